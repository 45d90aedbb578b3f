"""Evaluation metrics on predictions and scores (numpy only, no numba)."""

from __future__ import annotations

import numpy as np
from scipy.stats import rankdata


def roc_auc(scores: np.ndarray, positive: np.ndarray) -> float | None:
    """Area under the ROC curve of ``scores`` for the boolean ``positive``; ties count one half. None if one class is absent."""
    scores = np.asarray(scores, dtype=np.float64)
    positive = np.asarray(positive, dtype=bool)
    n_pos = int(positive.sum())
    n_neg = positive.size - n_pos
    if n_pos == 0 or n_neg == 0:
        return None
    ranks = rankdata(scores)
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def pairwise_accuracy(scores: np.ndarray, y: np.ndarray, qid: np.ndarray | None = None) -> float | None:
    """Fraction of the pairs with y_i > y_j (within the same qid when given) scored s_i > s_j; ties count one half.

    O(n log n) per rank by sorting, never enumerating pairs. None when there is no such pair.
    """
    scores = np.asarray(scores, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if qid is None:
        groups = [np.arange(y.size)]
    else:
        order = np.argsort(qid, kind="mergesort")
        bounds = np.flatnonzero(np.diff(np.asarray(qid)[order])) + 1
        groups = np.split(order, bounds)
    good = 0.0
    total = 0
    for members in groups:
        ys, ss = y[members], scores[members]
        for value in np.unique(ys)[1:]:
            lower = np.sort(ss[ys < value])
            upper = ss[ys == value]
            less = np.searchsorted(lower, upper, side="left")
            leq = np.searchsorted(lower, upper, side="right")
            good += float(less.sum()) + 0.5 * float((leq - less).sum())
            total += lower.size * upper.size
    return good / total if total else None


def predicted_ranks(scores: np.ndarray, ranks: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """The rank of each score: ranks[#{k : score > thresholds[k]}] (thresholds ascending)."""
    index = np.searchsorted(np.asarray(thresholds, dtype=np.float64), np.asarray(scores, dtype=np.float64), side="left")
    return np.asarray(ranks)[index]

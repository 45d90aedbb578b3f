"""Evaluation metrics on predictions and scores (numpy only, no numba)."""

from __future__ import annotations

import numpy as np


def _two_classes(scores, positive) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Scores as float64, the boolean positives, and the counts of positives and negatives."""
    scores = np.asarray(scores, dtype=np.float64)
    positive = np.asarray(positive, dtype=bool)
    n_pos = int(positive.sum())
    return scores, positive, n_pos, positive.size - n_pos


def roc_auc(scores: np.ndarray, positive: np.ndarray) -> float | None:
    """Area under the ROC curve of ``scores`` for the boolean ``positive``; ties count one half. None if one class is absent."""
    scores, positive, n_pos, n_neg = _two_classes(scores, positive)
    if n_pos == 0 or n_neg == 0:
        return None
    from scipy.stats import rankdata  # here, not at the top: scipy.stats costs 0.7 s of every API start

    ranks = rankdata(scores)
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


ROC_POINTS = 1001
"""Most points of a ROC curve in an answer: a longer curve keeps this many of its corners, evenly spaced."""


def roc_curve(scores: np.ndarray, positive: np.ndarray, max_points: int = ROC_POINTS) -> dict | None:
    """The ROC curve of ``scores`` for the boolean ``positive``: {"fpr", "tpr"}, from (0, 0) to (1, 1).

    One point per distinct score (rows with equal scores move together, a diagonal step), collinear points
    dropped as scikit-learn's ``roc_curve(drop_intermediate=True)`` does; beyond ``max_points`` an evenly
    spaced subset of them, first and last kept. None when one class is absent.
    """
    scores, positive, n_pos, n_neg = _two_classes(scores, positive)
    if n_pos == 0 or n_neg == 0:
        return None
    order = np.argsort(-scores, kind="mergesort")
    sorted_scores, sorted_positive = scores[order], positive[order]
    last_of_each = np.r_[np.flatnonzero(np.diff(sorted_scores)), scores.size - 1]
    tps = np.cumsum(sorted_positive)[last_of_each]
    fps = (last_of_each + 1) - tps
    if fps.size > 2:  # drop the points on a straight line between their neighbours (exact: on the counts)
        keep = np.r_[True, np.logical_or(np.diff(fps, 2) != 0, np.diff(tps, 2) != 0), True]
        fps, tps = fps[keep], tps[keep]
    fpr = np.r_[0.0, fps / n_neg]
    tpr = np.r_[0.0, tps / n_pos]
    if fpr.size > max_points:
        chosen = np.unique(np.round(np.linspace(0, fpr.size - 1, max_points)).astype(np.int64))
        fpr, tpr = fpr[chosen], tpr[chosen]
    return {"fpr": fpr.tolist(), "tpr": tpr.tolist()}


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


def prbep(scores: np.ndarray, positive: np.ndarray) -> float | None:
    """Precision/recall break-even point: precision (= recall) among the k highest scores, k = number of positives."""
    positive = np.asarray(positive, dtype=bool)
    k = int(positive.sum())
    if k == 0:
        return None
    top = np.argsort(-np.asarray(scores, dtype=np.float64), kind="mergesort")[:k]
    return float(positive[top].sum() / k)


def kendall_tau(scores: np.ndarray, y: np.ndarray, qid: np.ndarray | None = None) -> float | None:
    """Kendall's tau-b between scores and y (with qid: the mean over queries whose y is not constant)."""
    from scipy.stats import kendalltau

    scores = np.asarray(scores, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    groups = [np.arange(y.size)] if qid is None else [np.flatnonzero(qid == q) for q in np.unique(qid)]
    taus = []
    for members in groups:
        if np.unique(y[members]).size < 2 or np.unique(scores[members]).size < 2:
            continue
        tau = kendalltau(scores[members], y[members]).statistic
        if np.isfinite(tau):
            taus.append(float(tau))
    return float(np.mean(taus)) if taus else None


def classification_report(
    true: np.ndarray, predicted: np.ndarray, scores: np.ndarray, model_labels: np.ndarray
) -> dict:
    """Accuracy, error rate, precision, recall, F1, PRBEP, ROC AUC (and curve) and the confusion matrix.

    Two model labels: the larger is the positive class and ``scores`` has one column. More: precision,
    recall and F1 are macro averages over the model's classes (per class in ``per_class``), ROC AUC is
    the macro average of one-vs-rest AUCs over the classes present, and PRBEP and the ROC curve are left out.
    """
    true = np.asarray(true, dtype=np.float64)
    predicted = np.asarray(predicted, dtype=np.float64)
    all_labels = np.union1d(np.asarray(model_labels, dtype=np.float64), np.unique(true))
    index = {value: i for i, value in enumerate(all_labels)}
    confusion = np.zeros((all_labels.size, all_labels.size), dtype=np.int64)
    np.add.at(
        confusion,
        (np.array([index[v] for v in true], dtype=np.int64), np.array([index[v] for v in predicted], dtype=np.int64)),
        1,
    )
    per_class = []
    for value in model_labels:
        tp = int(np.sum((predicted == value) & (true == value)))
        fp = int(np.sum((predicted == value) & (true != value)))
        fn = int(np.sum((predicted != value) & (true == value)))
        precision = tp / (tp + fp) if tp + fp else 0.0
        recall = tp / (tp + fn) if tp + fn else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        per_class.append(
            {
                "label": float(value),
                "precision": precision,
                "recall": recall,
                "f1": f1,
                "support": int(np.sum(true == value)),
            }
        )
    accuracy = float(np.mean(predicted == true))
    report = {
        "accuracy": accuracy,
        "error_rate": 1.0 - accuracy,
        "confusion_matrix": {"labels": [float(v) for v in all_labels], "matrix": confusion.tolist()},
        "per_class": per_class,
    }
    scores = np.asarray(scores, dtype=np.float64)
    if len(model_labels) == 2:
        positive_class = per_class[1]
        report.update(precision=positive_class["precision"], recall=positive_class["recall"], f1=positive_class["f1"])
        positive = true == model_labels[1]
        report["roc_auc"] = roc_auc(scores.reshape(-1), positive)
        report["roc_curve"] = roc_curve(scores.reshape(-1), positive)
        report["prbep"] = prbep(scores.reshape(-1), positive)
    else:
        report.update(
            precision=float(np.mean([c["precision"] for c in per_class])),
            recall=float(np.mean([c["recall"] for c in per_class])),
            f1=float(np.mean([c["f1"] for c in per_class])),
        )
        aucs = [roc_auc(scores[:, k], true == value) for k, value in enumerate(model_labels)]
        known = [float(a) for a in aucs if a is not None]
        report["roc_auc"] = float(np.mean(known)) if known else None
        report["prbep"] = None
    return report


REGRESSION_POINTS = 1000
"""Most (true, predicted) pairs a regression's evaluation answers: a seeded sample of the rows past it."""


def predicted_vs_true(predicted: np.ndarray, y: np.ndarray, max_points: int = REGRESSION_POINTS) -> dict:
    """The (true, predicted) pairs of a regression's rows for a scatter plot: every row, or a seeded sample of
    ``max_points`` rows (in row order) when there are more."""
    rows = np.arange(y.size)
    if y.size > max_points:
        rows = np.sort(np.random.default_rng(0).choice(y.size, max_points, replace=False))
    return {
        "y_true": np.asarray(y, dtype=np.float64)[rows].tolist(),
        "y_pred": np.asarray(predicted, dtype=np.float64)[rows].tolist(),
        "n_rows": int(y.size),
    }


HISTOGRAM_BINS = 40
"""Bins of a one-class model's score histogram in an evaluation."""


def score_histogram(scores: np.ndarray, y: np.ndarray | None = None, bins: int = HISTOGRAM_BINS) -> dict:
    """A histogram of scores: ``edges`` (bins + 1, equal widths over the scores' range, 0 kept inside it) and
    ``counts``; with labels -1 / 1 (``y``), ``counts_outliers`` and ``counts_inliers`` split the counts."""
    scores = np.asarray(scores, dtype=np.float64)
    low, high = (float(scores.min()), float(scores.max())) if scores.size else (-1.0, 1.0)
    low, high = min(low, 0.0), max(high, 0.0)
    if high <= low:
        low, high = low - 1.0, high + 1.0
    edges = np.linspace(low, high, bins + 1)
    out = {"edges": edges.tolist(), "counts": np.histogram(scores, edges)[0].tolist()}
    if y is not None:
        out["counts_outliers"] = np.histogram(scores[y < 0], edges)[0].tolist()
        out["counts_inliers"] = np.histogram(scores[y > 0], edges)[0].tolist()
    return out


def regression_report(predicted: np.ndarray, y: np.ndarray) -> dict:
    """Mean squared error, mean absolute error and R² (1 - SSE / SST, as scikit-learn's ``r2_score``: 1.0 for
    perfect predictions of constant targets, 0.0 otherwise then) of predicted values against the targets."""
    predicted = np.asarray(predicted, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    residual = predicted - y
    sse = float(np.dot(residual, residual))
    sst = float(np.sum((y - y.mean()) ** 2)) if y.size else 0.0
    if sst > 0.0:
        r2 = 1.0 - sse / sst
    else:
        r2 = 1.0 if sse == 0.0 else 0.0
    n = max(1, y.size)
    return {"mse": sse / n, "mae": float(np.abs(residual).sum()) / n, "r2": r2}

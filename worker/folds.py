"""Cross-validation folds: which fold each row is in, and the arrays of a subset of rows.

Folds are stratified by label (each label's rows shuffled with the seed and dealt round robin), or
grouped by qid for ranking (whole queries dealt round robin), so that a fold never splits a query.
"""

from __future__ import annotations

import numpy as np

from service.scoring.models import csr


def make_folds(y: np.ndarray, qid: np.ndarray | None, k: int, seed: int) -> np.ndarray:
    """Fold number of every row: stratified by label, or whole qid groups when qid is given."""
    rng = np.random.default_rng(seed)
    folds = np.empty(y.size, dtype=np.int64)
    if qid is not None:
        groups = np.unique(qid)
        rng.shuffle(groups)
        fold_of_group = {g: i % k for i, g in enumerate(groups)}
        return np.array([fold_of_group[q] for q in qid], dtype=np.int64)
    offset = 0
    for label in np.unique(y):
        rows = np.flatnonzero(y == label)
        rng.shuffle(rows)
        folds[rows] = (np.arange(rows.size) + offset) % k
        offset += rows.size
    return folds


def subset(arrays: dict, rows: np.ndarray, n_features: int) -> dict:
    """The arrays of a subset of rows (kernels' dtypes: int64 indptr, int32 indices, float64 data)."""
    matrix = csr(arrays, n_features)[rows]
    out = {
        "indptr": matrix.indptr.astype(np.int64),
        "indices": matrix.indices.astype(np.int32),
        "data": matrix.data.astype(np.float64),
        "y": np.asarray(arrays["y"])[rows],
    }
    if "qid" in arrays:
        out["qid"] = np.asarray(arrays["qid"])[rows]
    return out

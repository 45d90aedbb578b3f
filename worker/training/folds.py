"""Cross-validation folds: which fold each row is in, and the arrays of a subset of rows.

Folds are stratified by label (each label's rows shuffled with the seed and dealt round robin), or
grouped by qid for ranking (whole queries dealt round robin), so that a fold never splits a query; a
regression's rows are shuffled and dealt round robin (its targets are not classes).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from core.scoring.kernel import KernelExpansion
from core.scoring.models import csr
from worker.solvers.common import SolverResult


def make_folds(y: np.ndarray, qid: np.ndarray | None, k: int, seed: int, stratified: bool = True) -> np.ndarray:
    """Fold number of every row: stratified by label, or whole qid groups when qid is given, or (``stratified``
    false: regression targets) every row shuffled and dealt round robin."""
    rng = np.random.default_rng(seed)
    folds = np.empty(y.size, dtype=np.int64)
    if not stratified:
        rows = rng.permutation(y.size)
        folds[rows] = np.arange(y.size) % k
        return folds
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


def held_out_decisions(
    result: SolverResult, train: dict, held_matrix: sp.csr_matrix, kernel: dict | None, n_features: int
) -> np.ndarray:
    """Decision values of a fit (on the rows ``train``) for the held-out rows: w for linear models, else
    the kernel expansion over the support rows of ``train``."""
    if result.w is not None and (kernel is None or kernel.get("type") == "linear"):
        return np.asarray(held_matrix @ result.w).reshape(-1) + result.bias
    if kernel is None:
        raise ValueError("a fit without a weight vector needs its kernel to be scored")
    support = np.asarray(result.extra["support_indices"], dtype=np.int64)
    rows = csr(train, n_features)[support]
    expansion = KernelExpansion(
        rows.indptr,
        rows.indices,
        rows.data,
        np.asarray(result.extra["dual_coef"]),
        result.bias,
        kernel,
        n_features=n_features,
    )
    values = expansion.decision_function(held_matrix.indptr, held_matrix.indices, held_matrix.data)
    return np.asarray(values).reshape(-1)

"""ocas's ``multiclass: crammer_singer``: one problem over every label (``worker.solvers.ocas_multiclass``), its
result shaped as the one-vs-rest models' (a weight vector and an offset per label, predicted by the largest score).

With two labels the model keeps one score, the difference of the two classes' scores (positive for the larger
label), as every two-label model here. The job's fit (``fit_crammer_singer``), a search's fold fits (``fit_rows``,
scored by ``scores_of``: the argmax of the K scores) and the calibration's cross-validated scores
(``held_out_scores``, for ``probability``) all fit this one problem; none of them runs one problem per label."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from core.schemas.solver_params import OcasParams, SolverParams
from core.scoring.models import csr
from worker.runtime import core_budget
from worker.solvers.common import SolverControl, SolverResult
from worker.training.context import FitContext


def uses_crammer_singer(params: SolverParams) -> bool:
    """Whether the job trains Crammer and Singer's multi-class problem (ocas's ``multiclass: crammer_singer``)."""
    return getattr(params, "multiclass", None) == "crammer_singer"


def fit_crammer_singer(
    params: OcasParams, arrays: dict, n_features: int, context: FitContext, on_point
) -> tuple[np.ndarray, list[SolverResult]]:
    """The sorted labels and the one result of the job's Crammer-Singer problem: ``w`` a (labels, n_features)
    matrix and ``extra["biases"]`` the offsets (two labels: one vector and ``bias``, the second class's score minus
    the first's). ``on_point(0, point)`` receives the trace."""
    labels = np.unique(np.asarray(arrays["y"]))
    control = SolverControl(
        deadline=context.deadline,
        cancel_requested=context.cancel_requested,
        on_point=lambda point: on_point(0, point),
        cores=core_budget.follow(),
    )
    return labels, [fit_rows(params, arrays, labels, n_features, control, memory_bytes=context.data_memory)]


def _one_score_for_two(result: SolverResult, n_labels: int) -> SolverResult:
    """Two labels keep one score: the second class's minus the first's."""
    if n_labels == 2:
        weights, biases = np.asarray(result.w), np.asarray(result.extra["biases"])
        result = replace(result, w=weights[1] - weights[0], bias=float(biases[1] - biases[0]))
    return result


def fit_rows(
    params: OcasParams, rows: dict, labels: np.ndarray, n_features: int, control, memory_bytes: int | None = None
) -> SolverResult:
    """The Crammer-Singer problem over ``rows`` (the job's, or a search fold's training rows) with these ``labels``
    (theirs, sorted), its trace through ``control``: its result shaped as the job's (``fit_crammer_singer``)."""
    from worker.solvers.ocas_multiclass import solve_crammer_singer

    classes = np.searchsorted(labels, np.asarray(rows["y"]))
    result = solve_crammer_singer(
        rows["indptr"], rows["indices"], np.asarray(rows["data"], dtype=np.float64), classes,
        n_classes=max(2, labels.size), n_features=n_features, params=params, control=control,
        memory_bytes=memory_bytes,
    )  # fmt: skip
    return _one_score_for_two(replace(result, trace=()), labels.size)  # its points went through the control


def scores_of(result: SolverResult, matrix) -> np.ndarray:
    """Rows' scores under a Crammer-Singer result: n x K, or n for two labels (its one score)."""
    if np.asarray(result.w).ndim == 2:
        return np.asarray(matrix @ np.asarray(result.w).T) + np.asarray(result.extra["biases"])
    return np.asarray(matrix @ result.w).reshape(-1) + result.bias


def held_out_scores(params: OcasParams, arrays: dict, n_features: int, folds: np.ndarray, context: FitContext):
    """The scores of every row (n, or n x K for more than two labels) from the Crammer-Singer model fitted on the
    folds that do not hold it (``worker.training.calibration``'s cross-validated decision values); None when
    canceled. A class absent from a fold's training rows scores below every other class on its held-out rows."""
    from worker.solvers.ocas_multiclass import solve_crammer_singer
    from worker.training.folds import subset

    y = np.asarray(arrays["y"])
    labels, classes = np.unique(y, return_inverse=True)
    matrix = csr(arrays, n_features)
    scores = np.zeros((y.size, labels.size))
    for fold in range(int(folds.max()) + 1):
        if context.cancel_requested():
            return None
        train_rows, test_rows = np.flatnonzero(folds != fold), np.flatnonzero(folds == fold)
        present, train_classes = np.unique(classes[train_rows], return_inverse=True)
        train = subset(arrays, train_rows, n_features)
        control = SolverControl(deadline=context.deadline, cancel_requested=context.cancel_requested)
        result = solve_crammer_singer(
            train["indptr"], train["indices"], np.asarray(train["data"], dtype=np.float64), train_classes,
            n_classes=max(2, present.size), n_features=n_features, params=params, control=control,
        )  # fmt: skip
        held = np.asarray(matrix[test_rows] @ np.asarray(result.w).T) + np.asarray(result.extra["biases"])
        block = np.full((test_rows.size, labels.size), held.min() - 1.0 if held.size else 0.0)
        block[:, present] = held[:, : present.size]
        scores[test_rows] = block
    return scores[:, 1] - scores[:, 0] if labels.size == 2 else scores

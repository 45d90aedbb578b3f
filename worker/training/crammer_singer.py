"""``multiclass: crammer_singer``: one problem over every label, linear by ocas or with a kernel by sampled cuts (the
function a solver's spec names as ``crammer_singer``), its result shaped as the one-vs-rest models' (a weight vector,
or a kernel expansion, and an offset per label, predicted by the largest score).

With two labels the model keeps one score, the difference of the two classes' scores (positive for the larger
label), as every two-label model here. The job's fit (``fit_crammer_singer``), a search's fold fits (``fit_rows``,
scored by ``scores_of``: the argmax of the K scores) and the calibration's cross-validated scores
(``held_out_scores``, for ``probability``) all fit this one problem; none of them runs one problem per label."""

from __future__ import annotations

import importlib
from dataclasses import replace
from typing import TypeGuard

import numpy as np

from core.schemas.solver_params import OcasParams, SampledCutsParams, SolverParams
from core.scoring.kernel import KernelExpansion
from core.scoring.models import csr
from core.solvers import SOLVERS
from worker.runtime import core_budget
from worker.solvers.common import SolverControl, SolverResult
from worker.training.context import FitContext
from worker.training.split import fit_split_crammer_singer

CrammerSingerParams = OcasParams | SampledCutsParams
"""The solvers that train Crammer and Singer's problem."""


def uses_crammer_singer(params: SolverParams) -> TypeGuard[CrammerSingerParams]:
    """Whether the job trains Crammer and Singer's multi-class problem (``multiclass: crammer_singer``: ocas's, or
    the sampled cuts' with a kernel)."""
    return getattr(params, "multiclass", None) == "crammer_singer"


def _solve(params: CrammerSingerParams, rows: dict, classes, n_classes: int, n_features: int, control, memory_bytes):
    """The Crammer-Singer function of the job's solver (its spec's ``crammer_singer``) on ``rows`` with classes in
    [0, n_classes)."""
    spec = next(spec for spec in SOLVERS.values() if spec.crammer_singer and isinstance(params, spec.params))
    assert spec.crammer_singer is not None
    module, name = spec.crammer_singer.split(":")
    arguments: dict = {"params": params, "control": control}
    if (spec.streams or spec.memory_bound) and memory_bytes is not None:
        arguments["memory_bytes"] = memory_bytes
    if spec.threads == "n_threads":
        arguments["n_threads"] = params.n_processes
    return getattr(importlib.import_module(module), name)(
        rows["indptr"], rows["indices"], np.asarray(rows["data"], dtype=np.float64), classes, n_classes=n_classes,
        n_features=n_features, **arguments,
    )  # fmt: skip


def fit_crammer_singer(
    params: CrammerSingerParams, arrays: dict, n_features: int, context: FitContext, on_point
) -> tuple[np.ndarray, list[SolverResult | None]]:
    """The sorted labels and the one result of the job's Crammer-Singer problem: ``w`` a (labels, n_features)
    matrix (a kernel's: ``extra["dual_coef"]`` a (labels, support rows) matrix) and ``extra["biases"]`` the offsets
    (two labels: one vector and ``bias``, the second class's score minus the first's). ``on_point(0, point)``
    receives the trace. With ``context.open_nodes`` (ocas's ``distributed``) the rows are split over the nodes of
    a cluster (``worker.training.split.fit_split_crammer_singer``); the one result is None when the job was
    canceled before the nodes had loaded the rows."""
    labels = np.unique(np.asarray(arrays["y"]))
    if context.open_nodes is not None:
        result = fit_split_crammer_singer(params, labels, n_features, context, on_point)
        if result is None:  # canceled while its nodes loaded the rows: never started
            return labels, [None]
        return labels, [_one_score_for_two(replace(result, trace=()), labels.size)]
    control = SolverControl(
        deadline=context.deadline,
        cancel_requested=context.cancel_requested,
        on_point=lambda point: on_point(0, point),
        cores=core_budget.follow(),
    )
    return labels, [fit_rows(params, arrays, labels, n_features, control, memory_bytes=context.data_memory)]


def _one_score_for_two(result: SolverResult, n_labels: int) -> SolverResult:
    """Two labels keep one score: the second class's minus the first's."""
    if n_labels != 2:
        return result
    biases = np.asarray(result.extra["biases"])
    bias = float(biases[1] - biases[0])
    if result.w is None:  # a kernel expansion per class
        coef = np.asarray(result.extra["dual_coef"])
        return replace(result, bias=bias, extra={**result.extra, "dual_coef": coef[1] - coef[0]})
    weights = np.asarray(result.w)
    return replace(result, w=weights[1] - weights[0], bias=bias)


def fit_rows(
    params: CrammerSingerParams,
    rows: dict,
    labels: np.ndarray,
    n_features: int,
    control,
    memory_bytes: int | None = None,
) -> SolverResult:
    """The Crammer-Singer problem over ``rows`` (the job's, or a search fold's training rows) with these ``labels``
    (theirs, sorted), its trace through ``control``: its result shaped as the job's (``fit_crammer_singer``)."""
    classes = np.searchsorted(labels, np.asarray(rows["y"]))
    result = _solve(params, rows, classes, max(2, labels.size), n_features, control, memory_bytes)
    return _one_score_for_two(replace(result, trace=()), labels.size)  # its points went through the control


def scores_of(
    result: SolverResult, matrix, kernel_values: np.ndarray | None = None, *, train: dict | None = None,
    params: SolverParams | None = None, n_features: int = 0,
) -> np.ndarray:  # fmt: skip
    """Rows' scores under a Crammer-Singer result: n x K, or n for two labels (its one score). A kernel result
    reads ``kernel_values`` (K(fit row, scored row), fit rows x n), or without them evaluates its expansion over
    the fit's rows ``train`` with the kernel of ``params``."""
    if result.w is None:
        coef = np.asarray(result.extra["dual_coef"])
        biases = np.asarray(result.extra["biases"]) if coef.ndim == 2 else result.bias
        support = np.asarray(result.extra["support_indices"], dtype=np.int64)
        if kernel_values is None:
            assert train is not None and isinstance(params, SampledCutsParams)
            support_rows = csr(train, n_features)[support]
            expansion = KernelExpansion(
                support_rows.indptr, support_rows.indices, support_rows.data, coef, biases,
                params.kernel.model_dump(), n_features=n_features,
            )  # fmt: skip
            scores = np.asarray(expansion.decision_function(matrix.indptr, matrix.indices, matrix.data))
            return scores.reshape(matrix.shape[0], -1) if coef.ndim == 2 else scores.reshape(-1)
        if coef.ndim == 1:
            return coef @ kernel_values[support] + biases
        return (coef @ kernel_values[support]).T + biases
    if np.asarray(result.w).ndim == 2:
        return np.asarray(matrix @ np.asarray(result.w).T) + np.asarray(result.extra["biases"])
    return np.asarray(matrix @ result.w).reshape(-1) + result.bias


def held_out_scores(params: CrammerSingerParams, arrays: dict, n_features: int, folds: np.ndarray, context: FitContext):
    """The scores of every row (n, or n x K for more than two labels) from the Crammer-Singer model fitted on the
    folds that do not hold it (``worker.training.calibration``'s cross-validated decision values); None when
    canceled. A class absent from a fold's training rows scores below every other class on its held-out rows."""
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
        result = _solve(params, train, train_classes, max(2, present.size), n_features, control, None)
        held = scores_of(result, matrix[test_rows], train=train, params=params, n_features=n_features)
        block = np.full((test_rows.size, labels.size), held.min() - 1.0 if held.size else 0.0)
        block[:, present] = held[:, : present.size]
        scores[test_rows] = block
    return scores[:, 1] - scores[:, 0] if labels.size == 2 else scores

"""ocas's ``multiclass: crammer_singer``: one problem over every label (``worker.solvers.ocas_multiclass``), its
result shaped as the one-vs-rest models' (a weight vector and an offset per label, predicted by the largest score).

With two labels the model keeps one score, the difference of the two classes' scores (positive for the larger
label), as every two-label model here."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from core.schemas.solver_params import OcasParams, SolverParams
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
    from worker.solvers.ocas_multiclass import solve_crammer_singer

    y = np.asarray(arrays["y"])
    labels, classes = np.unique(y, return_inverse=True)
    control = SolverControl(
        deadline=context.deadline,
        cancel_requested=context.cancel_requested,
        on_point=lambda point: on_point(0, point),
        cores=core_budget.follow(),
    )
    result = solve_crammer_singer(
        np.asarray(arrays["indptr"]),
        np.asarray(arrays["indices"]),
        np.asarray(arrays["data"], dtype=np.float64),
        classes,
        n_classes=labels.size,
        n_features=n_features,
        params=params,
        control=control,
        memory_bytes=context.data_memory,
    )
    result = replace(result, trace=())  # its points reached the job through on_point
    if labels.size == 2:
        weights, biases = np.asarray(result.w), np.asarray(result.extra["biases"])
        result = replace(result, w=weights[1] - weights[0], bias=float(biases[1] - biases[0]))
    return labels, [result]

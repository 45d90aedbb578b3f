"""The model from its fitted problems: the weight vectors or the kernel expansion with its union of rows, the
training report (iterations, objectives, the certified gap, the stopping rule), and the training accuracy
(on a seeded sample for kernel models and stopped ones). ``worker.training.fit`` fits the problems."""

from __future__ import annotations

import math

import numpy as np

from core.schemas.enums import ModelKind, Multiclass, Task
from core.schemas.solver_params import SolverParams
from core.scoring.models import Scorer, csr
from core.storage.documents import ModelDescription
from worker.solvers.common import SolverResult, StopReason
from worker.training.problems import uses_one_vs_one
from worker.training.stopping import stopping_rule

TRAIN_SCORE_ROWS = 20_000
"""Kernel models report their training accuracy on at most this many rows (a seeded sample)."""
STOPPED_SCORE_VALUES = 5_000_000
"""A model stopped by a cancel, a shutdown or its deadline measures its training accuracy on fewer
rows: at most this much work (rows x support rows for a kernel model, stored values for a linear
one: a fraction of a second), so the job ends within about a second of the stop instead of scoring
20,000 rows against every support row, or every row of a large data set."""


def assemble_model(
    solver: str,
    params: SolverParams,
    results: list[SolverResult],
    labels: np.ndarray,
    arrays: dict,
    n_features: int,
    *,
    with_accuracy: bool = True,
    linear_arrays: dict | None = None,
) -> tuple[dict, ModelDescription]:
    """The stored arrays and description of a classification model from its problems' results (``linear_arrays``:
    a linear model's arrays as ``linear_model_arrays`` made them from these results already)."""
    model = ModelDescription()
    overall = summarize(model, results, any(r.stop_reason is StopReason.DEADLINE for r in results))
    kernel = getattr(params, "kernel", None)
    if kernel is not None:
        one_vs_one = uses_one_vs_one(params, np.asarray(arrays["y"]))
        model_arrays = kernel_model_arrays(model, results, arrays, n_features, labels if one_vs_one else None)
        model.kernel = kernel.model_dump()
    else:
        model_arrays = linear_arrays if linear_arrays is not None else linear_model_arrays(results)
        model.kind = ModelKind.linear.value
    model.stopping_rule = stopping_rule(solver, params, results, overall.value).model_dump()
    model.labels = [float(v) for v in labels]
    model.n_features = int(n_features)
    model.task = Task.classification.value
    if with_accuracy:
        model.train_accuracy = _train_accuracy(model, model_arrays, arrays, n_features, np.asarray(arrays["y"]))
    return model_arrays, model


def linear_model_arrays(results: list[SolverResult]) -> dict:
    """A linear model's stored arrays: one weight vector and one offset per binary problem (a Crammer-Singer
    problem's one result: its matrix of a vector per label, and their offsets)."""
    if len(results) == 1 and results[0].w is not None and results[0].w.ndim == 2:
        return {
            "weights": np.ascontiguousarray(results[0].w, dtype=np.float64),
            "offsets": np.asarray(results[0].extra["biases"], dtype=np.float64),
        }
    return {"weights": stacked_weights(results), "offsets": np.array([r.bias for r in results], dtype=np.float64)}


def summarize(model: ModelDescription, results: list[SolverResult], deadline_hit: bool) -> StopReason:
    """Set the training report's figures over the problems (iterations, time, objectives, certified gap) on the
    model, and return its stop reason: the first of canceled, node_lost, deadline, max_iter that a problem met,
    else converged."""
    reasons = [r.stop_reason for r in results]
    if StopReason.CANCELED in reasons:
        overall = StopReason.CANCELED
    elif StopReason.NODE_LOST in reasons:
        overall = StopReason.NODE_LOST
    elif deadline_hit:
        overall = StopReason.DEADLINE
    elif StopReason.MAX_ITER in reasons:
        overall = StopReason.MAX_ITER
    else:
        overall = StopReason.CONVERGED
    model.n_iter = int(sum(r.n_iter for r in results))
    model.n_iter_per_problem = [int(r.n_iter) for r in results]
    model.converged = all(r.converged for r in results)
    model.stop_reason = overall.value
    model.training_seconds = float(sum(r.solver_seconds for r in results))
    model.trace_seconds = float(sum(r.trace_seconds for r in results))
    model.objective = _finite_or_none(sum(r.objective for r in results))
    model.objectives = [_finite_or_none(r.objective) for r in results]
    _certify_gap(model, results)
    model.data_access = data_access(results)
    return overall


def data_access(results: list[SolverResult]) -> dict | None:
    """How the problems read their data (``DataAccess``): split over nodes, or streamed from disk; None when every one
    had it in memory."""
    split = [r.extra["data"] for r in results if (r.extra.get("data") or {}).get("form") == "split"]
    if split:
        lost = max(int(s.get("nodes_lost") or 0) for s in split)  # counted over the job: the last problem's count
        if not lost:
            return {"form": "split", "nodes": max(int(s["nodes"]) for s in split)}
        return {"form": "split", "nodes": int(split[-1]["nodes"]), "nodes_lost": lost}
    streamed = [r.extra["data"] for r in results if (r.extra.get("data") or {}).get("form") == "streamed"]
    if not streamed:
        return None
    return {
        "form": "streamed",
        "memory_bytes": max(int(s["memory_bytes"]) for s in streamed),
        "streamed_bytes": max(int(s["streamed_bytes"]) for s in streamed),
        "read_bytes": sum(int(s["read_bytes"]) for s in streamed),
        "passes": sum(int(s["passes"]) for s in streamed),
        "packed": all(bool(s.get("packed")) for s in streamed),
    }


def _certify_gap(model: ModelDescription, results: list[SolverResult]) -> None:
    """Set gap_rel (the largest over the problems), per problem, and how it was certified."""
    gaps = [r.extra.get("gap_rel") for r in results]
    gaps = [None if g is None or not math.isfinite(float(g)) else max(float(g), 0.0) for g in gaps]
    note = results[0].extra.get("gap_note") if results else None
    known = [g for g in gaps if g is not None]
    if len(known) < len(gaps) or not gaps:
        model.gap_rel = None
        model.gap_rel_per_problem = gaps
        model.gap_rel_note = note or "this solver has no lower bound on the optimum to certify a gap with"
        return
    model.gap_rel = max(known)
    model.gap_rel_per_problem = gaps
    model.gap_rel_note = note


def stacked_weights(results: list[SolverResult]) -> np.ndarray:
    """The (k, n_features) float64 matrix of the problems' weight vectors. When they are the consecutive full
    rows of one shared matrix (one-vs-rest on several processes: ``SharedRows``) it is that matrix, not a
    copy: stacking sector's 105 vectors copied 46 MB (44 ms a job, after the fits, in the worker's process)."""
    vectors = [_weights(r) for r in results]
    first = vectors[0]
    size, base = first.size, first.base
    if (
        len(vectors) > 1
        and base is not None
        and all(v.base is base and v.dtype == np.float64 and v.shape == (size,) and v.strides == (8,) for v in vectors)
        and all(v.ctypes.data == first.ctypes.data + k * size * 8 for k, v in enumerate(vectors))
    ):
        return np.lib.stride_tricks.as_strided(first, shape=(len(vectors), size), strides=(size * 8, 8))
    return np.vstack(vectors).astype(np.float64, copy=False)


def _weights(result: SolverResult) -> np.ndarray:
    """The weight vector of a linear solver's result."""
    if result.w is None:
        raise ValueError("a linear model's problem returned no weight vector")
    return result.w


def _finite_or_none(value: float) -> float | None:
    """JSON has no NaN: an objective a solver could not afford to evaluate (smo stopped while shrunk) is null."""
    value = float(value)
    return value if math.isfinite(value) else None


def kernel_model_arrays(
    model: ModelDescription,
    results: list[SolverResult],
    arrays: dict,
    n_features: int,
    one_vs_one_labels: np.ndarray | None = None,
) -> dict:
    """The arrays of a kernel model: the union of the problems' expansion rows, with one coefficient row per
    problem (a Crammer-Singer problem's one result: a row per label; its kind and support counts set on ``model``).

    One-vs-one models (``one_vs_one_labels``: the sorted labels) keep their rows grouped by label, in
    the order of the labels, with the count per label (``nr_sv``), as a LIBSVM model file lists them.
    """
    supports = [np.asarray(r.extra["support_indices"], dtype=np.int64) for r in results]
    rows = np.unique(np.concatenate(supports)) if supports else np.zeros(0, dtype=np.int64)
    offsets = np.array([r.bias for r in results], dtype=np.float64)
    if len(results) == 1 and np.ndim(results[0].extra["dual_coef"]) == 2:  # Crammer-Singer: an expansion per label
        coef = np.asarray(results[0].extra["dual_coef"], dtype=np.float64)[:, np.argsort(supports[0])]
        offsets = np.asarray(results[0].extra["biases"], dtype=np.float64)
    else:
        coef = np.zeros((len(results), rows.size), dtype=np.float64)
        for k, (result, support) in enumerate(zip(results, supports)):
            coef[k, np.searchsorted(rows, support)] = np.asarray(result.extra["dual_coef"], dtype=np.float64)
    label_of_row = None
    if one_vs_one_labels is not None:
        label_of_row = np.searchsorted(one_vs_one_labels, np.asarray(arrays["y"])[rows])
        order = np.argsort(label_of_row, kind="stable")
        rows, coef = rows[order], coef[:, order]
    matrix = csr(arrays, n_features)[rows]
    model_arrays = {
        "sv_indptr": matrix.indptr.astype(np.int64),
        "sv_indices": matrix.indices.astype(np.int32),
        "sv_data": matrix.data.astype(np.float64),
        "coef": coef,
        "offsets": offsets,
    }
    model.kind = ModelKind.kernel.value
    model.n_support = int(rows.size)
    model.n_support_per_problem = [int(s.size) for s in supports]
    model.n_bounded_support_per_problem = [
        None if r.extra.get("n_bounded_sv") is None else int(r.extra["n_bounded_sv"]) for r in results
    ]
    if one_vs_one_labels is not None and label_of_row is not None:
        model.multiclass = Multiclass.ovo.value
        model.ovo_labels = [float(v) for v in one_vs_one_labels]
        model.nr_sv = np.bincount(label_of_row, minlength=one_vs_one_labels.size).tolist()
    return model_arrays


def _train_accuracy(model: ModelDescription, model_arrays: dict, arrays: dict, n_features: int, y: np.ndarray) -> float:
    """The model's accuracy on the training rows (on a seeded sample when there are many: its size set on
    ``model`` as train_accuracy_rows)."""
    matrix = csr(arrays, n_features)
    rows = np.arange(y.size)
    limit = TRAIN_SCORE_ROWS if model.kind == ModelKind.kernel else y.size
    if model.stop_reason in (StopReason.CANCELED.value, StopReason.DEADLINE.value):
        per_row = int(model.n_support or 1) if model.kind == ModelKind.kernel else matrix.nnz // max(1, y.size)
        limit = max(200, min(limit, STOPPED_SCORE_VALUES // max(1, per_row)))
    if y.size > limit:
        rows = np.sort(np.random.default_rng(0).choice(y.size, limit, replace=False))
        model.train_accuracy_rows = limit
        matrix = matrix[rows]
    return _n_correct(model, model_arrays, matrix, y[rows]) / rows.size


def _n_correct(model: ModelDescription, model_arrays: dict, matrix, y: np.ndarray) -> int:
    """How many of the rows of ``matrix`` the model predicts as ``y``."""
    predicted, _ = Scorer(model, model_arrays).predict_values(matrix)
    return int(np.count_nonzero(predicted == y))


def correct_rows(
    weights: np.ndarray, offsets: list, labels: np.ndarray, arrays: dict, n_features: int, start: int, stop: int
) -> int:
    """How many of the rows start..stop a linear model predicts right (the subtask processes' part of
    ``_train_accuracy``)."""
    model = ModelDescription(kind=ModelKind.linear.value, n_features=n_features, labels=[float(v) for v in labels])
    model_arrays = {"weights": weights, "offsets": np.asarray(offsets, dtype=np.float64)}
    return _n_correct(model, model_arrays, csr(arrays, n_features)[start:stop], np.asarray(arrays["y"])[start:stop])

"""The dispatcher: turns a job's labels into binary problems, runs the solver, assembles the model.

Two labels: one problem, the larger label is +1. More: one-vs-rest, one problem per class (class
k is +1, the rest -1), scores compared by argmax. ``class_weight`` factors multiply C: in a
two-label problem each label's factor applies to its rows; in one-vs-rest the class's factor
applies to its rows (+1) and the rest keep factor 1 (as LIBLINEAR does).

Deadline: it is the job's. A binary problem that hits it returns its best model so far; problems
not yet started then get a single pass each, so that a one-vs-rest model is complete. Cancel: the
current problem stops; the model is kept when it is complete (always for two labels), otherwise the
job ends without a model.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from service.labels import label_key
from worker import registry
from worker.solvers.common import SolverControl, SolverResult, StopReason


@dataclass
class TrainingOutcome:
    """What the job function stores: the model's arrays and metadata, or no model (canceled early)."""

    stop_reason: StopReason
    arrays: dict | None
    meta: dict = field(default_factory=dict)


def binary_problems(y: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """The sorted labels and the {-1, +1} label vector of each binary problem."""
    labels = np.unique(y)
    if labels.size == 2:
        return labels, [np.where(y == labels[1], 1.0, -1.0)]
    return labels, [np.where(y == label, 1.0, -1.0) for label in labels]


def class_weight_pairs(labels: np.ndarray, class_weight: dict | None) -> list[tuple[float, float]]:
    """(negative, positive) factor for each binary problem."""
    weights = class_weight or {}
    factor = [float(weights.get(label_key(v), 1.0)) for v in labels]
    if labels.size == 2:
        return [(factor[0], factor[1])]
    return [(1.0, f) for f in factor]


def train_linear(
    solver: str,
    params: dict,
    arrays: dict,
    n_features: int,
    *,
    deadline: float | None,
    cancel_requested,
    sink,
) -> TrainingOutcome:
    """Train every binary problem of the job with the solver and assemble a linear model."""
    fit = registry.adapter(solver)
    indptr = np.asarray(arrays["indptr"])
    indices = np.asarray(arrays["indices"])
    data = np.asarray(arrays["data"])
    y = np.asarray(arrays["y"])
    labels, problems = binary_problems(y)
    pairs = class_weight_pairs(labels, params.get("class_weight"))
    results: list[SolverResult] = []
    deadline_hit = False
    for k, (signs, pair) in enumerate(zip(problems, pairs)):
        sink.subproblem = k
        run_params = params
        control = SolverControl(deadline=deadline, cancel_requested=cancel_requested, on_point=sink.add)
        if deadline_hit:
            run_params = dict(params, max_iter=1)
            control = SolverControl(deadline=None, cancel_requested=cancel_requested, on_point=sink.add)
        result = fit(indptr, indices, data, signs, n_features=n_features, params=run_params, class_weight=pair, control=control)
        results.append(result)
        if result.stop_reason is StopReason.CANCELED:
            sink.flush()
            if len(results) < len(problems):
                return TrainingOutcome(StopReason.CANCELED, None, {"n_iter": sum(r.n_iter for r in results)})
            break
        if result.stop_reason is StopReason.DEADLINE:
            deadline_hit = True
    sink.flush()
    weights = np.vstack([r.w for r in results]).astype(np.float64)
    offsets = np.array([r.bias for r in results], dtype=np.float64)
    reasons = [r.stop_reason for r in results]
    if StopReason.CANCELED in reasons:
        overall = StopReason.CANCELED
    elif deadline_hit:
        overall = StopReason.DEADLINE
    elif StopReason.MAX_ITER in reasons:
        overall = StopReason.MAX_ITER
    else:
        overall = StopReason.CONVERGED
    matrix = sp.csr_matrix((data, indices, indptr), shape=(indptr.size - 1, n_features))
    scores = np.asarray(matrix @ weights.T) + offsets
    if weights.shape[0] == 1:
        predicted = np.where(scores[:, 0] > 0, labels[1], labels[0])
    else:
        predicted = labels[np.argmax(scores, axis=1)]
    meta = {
        "kind": "linear",
        "labels": [float(v) for v in labels],
        "n_features": int(n_features),
        "n_iter": int(sum(r.n_iter for r in results)),
        "n_iter_per_problem": [int(r.n_iter) for r in results],
        "converged": all(r.converged for r in results),
        "stop_reason": overall.value,
        "training_seconds": float(sum(r.solver_seconds for r in results)),
        "trace_seconds": float(sum(r.trace_seconds for r in results)),
        "objective": float(sum(r.objective for r in results)),
        "objectives": [float(r.objective) for r in results],
        "train_accuracy": float(np.mean(predicted == y)),
    }
    return TrainingOutcome(overall, {"weights": weights, "offsets": offsets}, meta)


def now() -> float:
    """Monotonic clock used for deadlines."""
    return time.monotonic()

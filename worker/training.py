"""The dispatcher: turns a job's labels into problems, runs the solver, assembles the model.

Classification (every solver): two labels make one binary problem where the larger label is +1;
more labels make one problem per class (one-vs-rest: class k is +1, the rest -1), scored by argmax.
``class_weight`` factors multiply C: in a two-label problem each label's factor applies to its
rows; in one-vs-rest the class's factor applies to its rows (+1) and the rest keep factor 1 (as
LIBLINEAR does). Linear solvers give a weight vector per problem; kernel solvers give an expansion
over training rows, and the model stores the union of those rows once with a coefficient per
problem and row. Pairwise objectives of ``cpa`` (ordinal, roc_area, ranking) are one problem over
the label values as ranks (and the qids for ranking); the model scores rows, and ordinal models also
predict a rank through thresholds between adjacent ranks.

Deadline: it is the job's. A problem that hits it returns its best model so far; problems not yet
started then get a single iteration each, so that a one-vs-rest model is complete. Cancel: the
current problem stops; the model is kept when it is complete (always for a single problem),
otherwise the job ends without a model.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from service.labels import label_key
from service.scoring.metrics import pairwise_accuracy, roc_auc
from service.scoring.models import Scorer, csr
from worker import registry
from worker.solvers.common import SolverControl, SolverResult, StopReason

TRAIN_SCORE_ROWS = 20_000
"""Kernel models report their training accuracy on at most this many rows (a seeded sample)."""


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


def resolve_kernel(kernel: dict, arrays: dict, n_features: int) -> dict:
    """The kernel with gamma `scale` replaced by its value on this data set."""
    if "gamma" not in kernel:
        return dict(kernel)
    from worker.solvers.kernels import resolve_gamma

    gamma = resolve_gamma(kernel["gamma"], np.asarray(arrays["indptr"]), np.asarray(arrays["data"]), n_features)
    return dict(kernel, gamma=float(gamma))


def train_model(
    solver: str,
    params: dict,
    arrays: dict,
    n_features: int,
    *,
    deadline: float | None,
    cancel_requested,
    sink,
) -> TrainingOutcome:
    """Train every problem of the job with the solver and assemble the model."""
    if solver == "cpa" and params.get("objective", "classification") != "classification":
        return _train_pairwise(params, arrays, n_features, deadline=deadline, cancel_requested=cancel_requested, sink=sink)
    if solver in registry.KERNEL_SOLVERS:
        params = dict(params, kernel=resolve_kernel(params["kernel"], arrays, n_features))
    fit = registry.adapter(solver)
    indptr, indices, data = (np.asarray(arrays[name]) for name in ("indptr", "indices", "data"))
    y = np.asarray(arrays["y"])
    labels, problems = binary_problems(y)
    pairs = class_weight_pairs(labels, params.get("class_weight"))
    results: list[SolverResult] = []
    deadline_hit = False
    for k, (signs, pair) in enumerate(zip(problems, pairs)):
        sink.subproblem = k
        run_params, run_deadline = params, deadline
        if deadline_hit:
            run_params, run_deadline = dict(params, max_iter=1), None
        control = SolverControl(deadline=run_deadline, cancel_requested=cancel_requested, on_point=sink.add)
        result = fit(indptr, indices, data, signs, n_features=n_features, params=run_params, class_weight=pair,
                     control=control)
        results.append(result)
        if result.stop_reason is StopReason.CANCELED and len(results) < len(problems):
            sink.flush()
            return TrainingOutcome(StopReason.CANCELED, None, {"n_iter": sum(r.n_iter for r in results)})
        if result.stop_reason is StopReason.DEADLINE:
            deadline_hit = True
    sink.flush()
    if solver in registry.KERNEL_SOLVERS:
        model_arrays, extra_meta = _kernel_model(results, arrays, n_features)
        extra_meta["kernel"] = params["kernel"]
    else:
        model_arrays = {
            "weights": np.vstack([r.w for r in results]).astype(np.float64),
            "offsets": np.array([r.bias for r in results], dtype=np.float64),
        }
        extra_meta = {"kind": "linear"}
    meta = dict(_summary(results, deadline_hit), **extra_meta)
    meta.update(labels=[float(v) for v in labels], n_features=int(n_features))
    meta["train_accuracy"] = _train_accuracy(meta, model_arrays, arrays, n_features, y)
    return TrainingOutcome(StopReason(meta["stop_reason"]), model_arrays, meta)


def _summary(results: list[SolverResult], deadline_hit: bool) -> dict:
    reasons = [r.stop_reason for r in results]
    if StopReason.CANCELED in reasons:
        overall = StopReason.CANCELED
    elif deadline_hit:
        overall = StopReason.DEADLINE
    elif StopReason.MAX_ITER in reasons:
        overall = StopReason.MAX_ITER
    else:
        overall = StopReason.CONVERGED
    return {
        "n_iter": int(sum(r.n_iter for r in results)),
        "n_iter_per_problem": [int(r.n_iter) for r in results],
        "converged": all(r.converged for r in results),
        "stop_reason": overall.value,
        "training_seconds": float(sum(r.solver_seconds for r in results)),
        "trace_seconds": float(sum(r.trace_seconds for r in results)),
        "objective": float(sum(r.objective for r in results)),
        "objectives": [float(r.objective) for r in results],
    }


def _kernel_model(results: list[SolverResult], arrays: dict, n_features: int) -> tuple[dict, dict]:
    """The union of the problems' expansion rows, with one coefficient row per problem."""
    supports = [np.asarray(r.extra["support_indices"], dtype=np.int64) for r in results]
    rows = np.unique(np.concatenate(supports)) if supports else np.zeros(0, dtype=np.int64)
    coef = np.zeros((len(results), rows.size), dtype=np.float64)
    for k, (result, support) in enumerate(zip(results, supports)):
        coef[k, np.searchsorted(rows, support)] = np.asarray(result.extra["dual_coef"], dtype=np.float64)
    matrix = csr(arrays, n_features)[rows]
    model_arrays = {
        "sv_indptr": matrix.indptr.astype(np.int64),
        "sv_indices": matrix.indices.astype(np.int32),
        "sv_data": matrix.data.astype(np.float64),
        "coef": coef,
        "offsets": np.array([r.bias for r in results], dtype=np.float64),
    }
    meta = {
        "kind": "kernel",
        "n_support": int(rows.size),
        "n_support_per_problem": [int(s.size) for s in supports],
        "n_bounded_support_per_problem": [
            None if r.extra.get("n_bounded_sv") is None else int(r.extra["n_bounded_sv"]) for r in results
        ],
    }
    return model_arrays, meta


def _train_accuracy(meta: dict, model_arrays: dict, arrays: dict, n_features: int, y: np.ndarray) -> float:
    matrix = csr(arrays, n_features)
    rows = np.arange(y.size)
    if meta["kind"] == "kernel" and y.size > TRAIN_SCORE_ROWS:
        rows = np.sort(np.random.default_rng(0).choice(y.size, TRAIN_SCORE_ROWS, replace=False))
        meta["train_accuracy_rows"] = TRAIN_SCORE_ROWS
        matrix = matrix[rows]
    predicted, _ = Scorer(meta, model_arrays).predict_values(matrix)
    return float(np.mean(predicted == y[rows]))


def _train_pairwise(params: dict, arrays: dict, n_features: int, *, deadline, cancel_requested, sink) -> TrainingOutcome:
    """cpa with an ordinal, ROC-area or ranking objective: one problem over the labels as ranks."""
    objective = params["objective"]
    indptr, indices, data = (np.asarray(arrays[name]) for name in ("indptr", "indices", "data"))
    y = np.asarray(arrays["y"], dtype=np.float64)
    qid = np.asarray(arrays["qid"]) if objective == "ranking" else None
    control = SolverControl(deadline=deadline, cancel_requested=cancel_requested, on_point=sink.add)
    result = registry.adapter("cpa")(indptr, indices, data, y, n_features=n_features, params=params,
                                     class_weight=(1.0, 1.0), control=control, qid=qid)
    sink.flush()
    model_arrays = {"weights": np.asarray(result.w, dtype=np.float64).reshape(1, -1), "offsets": np.zeros(1)}
    meta = dict(_summary([result], result.stop_reason is StopReason.DEADLINE), kind="ranking", task=objective,
                n_features=int(n_features), n_pairs=int(result.extra.get("n_pairs", 0)))
    scores = np.asarray(csr(arrays, n_features) @ model_arrays["weights"][0])
    meta["train_pairwise_accuracy"] = pairwise_accuracy(scores, y, qid)
    if objective == "roc_area":
        meta["train_roc_auc"] = roc_auc(scores, y == y.max())
    meta["labels"] = None
    meta["train_accuracy"] = None
    if objective == "ordinal":
        meta["ranks"] = [float(v) for v in result.extra["ranks"]]
        meta["thresholds"] = [float(v) for v in result.extra["thresholds"]]
        meta["labels"] = meta["ranks"]
        predicted, _ = Scorer(meta, model_arrays).predict_values(csr(arrays, n_features))
        meta["train_accuracy"] = float(np.mean(predicted == y))
    return TrainingOutcome(StopReason(meta["stop_reason"]), model_arrays, meta)


train_linear = train_model
"""Former name of ``train_model`` (kept for callers written before kernel and ranking models)."""

"""The dispatcher: turns a job's labels into problems, runs the solver, assembles the model.

Classification (every solver): two labels make one binary problem, more labels one problem per
class (one-vs-rest), scored by argmax, or for smo with ``multiclass: ovo`` one problem per pair of
classes on their rows, scored by vote; ``worker.training.problems`` makes them and their class-weight
factors. Linear solvers give a weight vector per problem; kernel solvers give an expansion
over training rows, and the model stores the union of those rows once with a coefficient per
problem and row. Pairwise objectives of ``cpa`` (ordinal, roc_area, ranking) are one problem over
the label values as ranks (and the qids for ranking); the model scores rows, and ordinal models also
predict a rank through thresholds between adjacent ranks.

Problems run as parallel subtasks (``worker.runtime.subtasks``) when the job has several and
``n_processes`` > 1. Deadline: it is the job's. A problem that hits it returns its best model so
far; a problem that starts after it stops after its first iteration, so a one-vs-rest model is
always complete. Cancel: running problems stop; the model is kept when every problem has a result
(always for a single problem), otherwise the job ends without a model.

``params.probability``: once the model is assembled, ``worker.training.calibration`` fits the calibration on
cross-validated decision values and stores it on the model (its ``probability``).

The model is described as it is stored: a ``core.storage.documents.ModelDescription``, its fields set in the
order the stored document lists them (its training report first, then what scores rows).
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass, replace

import numpy as np

from core.schemas.enums import ModelKind, Multiclass, Task
from core.schemas.solver_params import PolyKernel, RbfKernel, SigmoidKernel, SolverParams
from core.scoring.metrics import pairwise_accuracy, roc_auc
from core.scoring.models import Scorer, csr
from core.solvers import spec_of
from core.storage.documents import ModelDescription
from worker.runtime import core_budget
from worker.runtime.progress import ProblemsEstimator
from worker.runtime.subtasks import SharedRows, SubtaskContext, run_task_graph
from worker.solvers.common import SolverControl, SolverResult, StopReason
from worker.training import registry
from worker.training.context import FitContext
from worker.training.folds import subset
from worker.training.problems import job_problems, n_binary_problems, uses_one_vs_one
from worker.training.stopping import stopping_rule

TRAIN_SCORE_ROWS = 20_000
"""Kernel models report their training accuracy on at most this many rows (a seeded sample)."""
STOPPED_SCORE_VALUES = 5_000_000
"""A model stopped by a cancel, a shutdown or its deadline measures its training accuracy on fewer
rows: at most this much work (rows x support rows for a kernel model, stored values for a linear
one: a fraction of a second), so the job ends within about a second of the stop instead of scoring
20,000 rows against every support row, or every row of a large data set."""


@dataclass(init=False)
class TrainingOutcome:
    """What the job function stores: the model's arrays and description, or no model (canceled early)."""

    stop_reason: StopReason
    arrays: dict | None
    model: ModelDescription  # no model: what training reported (n_iter)
    no_model: str | None  # no model: why, in words (the job's error message)

    def __init__(
        self,
        stop_reason: StopReason,
        arrays: dict | None,
        model: ModelDescription | None = None,
        no_model: str | None = None,
    ) -> None:
        self.stop_reason, self.arrays, self.no_model = stop_reason, arrays, no_model
        self.model = model if model is not None else ModelDescription()


def resolve_kernel(params: SolverParams, arrays: dict, n_features: int) -> SolverParams:
    """The parameters with the kernel's gamma `scale` replaced by its value on this data set (others: as they are)."""
    kernel = getattr(params, "kernel", None)
    if not isinstance(kernel, (RbfKernel, PolyKernel, SigmoidKernel)):  # no kernel, or linear: nothing to resolve
        return params
    from worker.solvers.kernels import resolve_gamma

    gamma = resolve_gamma(kernel.gamma, np.asarray(arrays["indptr"]), np.asarray(arrays["data"]), n_features)
    return params.model_copy(update={"kernel": kernel.model_copy(update={"gamma": float(gamma)})})


def fit_problems(
    solver: str,
    params: SolverParams,
    arrays: dict,
    n_features: int,
    context: FitContext,
    *,
    on_point,
    warm: list | None = None,
    warm_C: float | None = None,
    on_subtask_done=None,
    on_problem_done=None,
    train_correct: list | None = None,
    warm_states: bool = True,
    on_fitted=None,
) -> tuple[np.ndarray, list[SolverResult | None]]:
    """Fit every binary problem of the labels (in parallel subtasks when n_processes > 1).

    Returns the sorted labels and one result per problem; a problem never started because of a
    cancel is None. ``context``: its deadline, cancel poll and processes (1 when not set; its sink is not
    used). ``warm`` gives a previous result per problem, fitted at C = ``warm_C``, to start
    from (dcd: its dual variables; ocas: its weights), for paths along increasing C. ``on_point(k, point)`` receives
    the trace points of problem k.

    ``train_correct``: a list that gets, when the training rows could be scored by the subtask processes
    after the fits (linear one-vs-rest on several processes, every problem converged or at max_iter), the
    number of rows the model predicts right, per block of rows; else it stays empty (``assemble_model``
    scores them then, in this process: sector's 105 x 55,197 model took 140 ms there, after the fits).

    ``warm_states=False``: the results of a linear model keep no dual variables (``extra["alpha"]``, what a
    warm start at the next C needs): one row's worth per problem that a subtask process no longer pickles back
    (sector: 51 KB a class).

    ``on_fitted(results)`` is called once every problem has its result (weight vectors included), before the
    training rows are scored: what the model will be is known then (``worker.runtime.model_staging``).
    """
    fit = registry.adapter(solver)
    n_processes = context.n_processes or 1
    indptr, indices = (np.asarray(arrays[name]) for name in ("indptr", "indices"))
    data = registry.data_for(solver, np.asarray(arrays["data"]))
    y = np.asarray(arrays["y"])
    labels, members, problems, pairs = job_problems(params, y)  # members: one-vs-one's rows per problem
    # ocas (processes) and the kernel solvers (threads) parallelize inside a single problem; with several
    # problems the processes go to the problems (and the kernel solvers take the threads each process is
    # allowed, cores // processes: their own n_processes, else the cores).
    threads = spec_of(solver).threads
    parallel = None
    if threads == "n_processes":
        parallel = n_processes if len(problems) == 1 else 1
    elif threads == "n_threads" and (len(problems) == 1 or n_processes == 1):
        parallel = n_processes

    parallel_problems = n_processes > 1 and len(problems) > 1
    linear = spec_of(solver).model_kind == ModelKind.linear
    shared = (
        SharedRows(len(problems), n_features)
        if parallel_problems and SharedRows.fits(len(problems), n_features)
        else None
    )

    def fit_one(k: int, subtask: SubtaskContext) -> SolverResult:
        control = SolverControl(
            deadline=subtask.deadline,
            cancel_requested=subtask.cancel_requested,
            on_point=subtask.record_point,
            cores=core_budget.follow(),  # in the job's own process: its share of the cores; None in a subtask process
        )
        start = registry.warm_start_arguments(solver, warm[k] if warm else None, params, warm_C)
        matrix = (indptr, indices, data)
        if members is not None:
            rows = subset(arrays, members[k], n_features)
            matrix = (rows["indptr"], rows["indices"], registry.data_for(solver, rows["data"]))
        result = fit(
            *matrix,
            problems[k],
            n_features=n_features,
            params=params,
            class_weight=pairs[k],
            control=control,
            parallel=parallel,
            **start,
        )
        if members is not None:  # the expansion's rows, numbered in the whole data set as the model stores them
            support = np.asarray(result.extra["support_indices"], dtype=np.int64)
            result = replace(result, extra={**result.extra, "support_indices": members[k][support]})
        result = replace(result, trace=())  # its points reached the job through record_point: not pickled twice
        if not warm_states and linear and "alpha" in result.extra:
            result = replace(result, extra={key: value for key, value in result.extra.items() if key != "alpha"})
        if shared is not None and shared.put(k, result.w):
            result = replace(result, w=None)  # the parent takes it from the shared rows
        return result

    if parallel_problems:
        n_processes = min(n_processes, len(problems))
        done: set[int] = set()
        results_in: list[SolverResult | None] = [None] * len(problems)
        score = (
            train_correct is not None
            and shared is not None
            and members is None
            and spec_of(solver).model_kind == ModelKind.linear
        )

        def run(payload, subtask: SubtaskContext):
            if payload[0] == "fit":
                return fit_one(payload[1], subtask)
            _, start, stop, offsets = payload
            assert shared is not None, "scored only when every vector is in the shared rows"
            return _correct_rows(shared.values[: len(problems)], offsets, labels, arrays, n_features, start, stop)

        def finished(payload, result) -> list:
            if payload[0] == "score":
                assert train_correct is not None
                train_correct.append(int(result))
                return []
            index = payload[1]
            results_in[index] = result
            done.add(index)
            if on_problem_done is not None:
                on_problem_done(index)
            if on_subtask_done is not None:
                on_subtask_done(len(done), len(problems))
            if on_fitted is not None and len(done) == len(problems):
                on_fitted(_with_vectors(results_in, shared))
            if not score or len(done) < len(problems):
                return []
            fitted = [r for r in results_in if r is not None]
            if any(r.w is not None or r.stop_reason in (StopReason.CANCELED, StopReason.DEADLINE) for r in fitted):
                return []  # a vector outside the shared rows, or a model scored on a sample (``_train_accuracy``)
            bounds = np.linspace(0, y.size, n_processes + 1).astype(int)
            offsets = [r.bias for r in fitted]
            return [((1, b), ("score", int(bounds[b]), int(bounds[b + 1]), offsets)) for b in range(n_processes)]

        run_task_graph(
            run,
            [((0, k), ("fit", k)) for k in range(len(problems))],
            n_processes=n_processes,
            deadline=context.deadline,
            cancel_requested=context.cancel_requested,
            on_done=finished,
            on_point=on_point,
        )
        if train_correct is not None and len(train_correct) < n_processes:
            train_correct.clear()  # a cancel came before every block was scored
        return labels, _with_vectors(results_in, shared)
    results: list[SolverResult | None] = [None] * len(problems)
    for k in range(len(problems)):
        result = results[k] = fit_one(
            k, SubtaskContext(k, context.deadline, context.cancel_requested, functools.partial(on_point, k))
        )
        if on_problem_done is not None:
            on_problem_done(k)
        if on_subtask_done is not None and len(problems) > 1:
            on_subtask_done(k + 1, len(problems))
        if result.stop_reason is StopReason.CANCELED:
            break
    if on_fitted is not None and all(result is not None for result in results):
        on_fitted(results)
    return labels, results


def _with_vectors(results: list, shared: SharedRows | None) -> list:
    """The results with the weight vectors that came back in the shared rows put in (views, not copies)."""
    if shared is None:
        return list(results)
    return [
        result if result is None or result.w is not None else replace(result, w=shared.view(k))
        for k, result in enumerate(results)
    ]


def train_model(
    solver: str,
    params: SolverParams,
    arrays: dict,
    n_features: int,
    context: FitContext,
    *,
    phase: str = "training",
    stage_model=None,
) -> TrainingOutcome:
    """Train every problem of the job with the solver and assemble the model (``phase``: as progress shows it).

    ``stage_model(arrays)``: called with a linear model's arrays as soon as every problem is fitted, before the
    training rows are scored (``worker.runtime.model_staging`` writes them to Redis meanwhile); the outcome's arrays
    are then those same arrays.

    ``params``: the solver's schema (the job's are read by ``worker.runtime.runs.job_params``).
    """
    context = replace(context, n_processes=context.processes(params))
    sink = context.progress_sink()
    if params.task != Task.classification:
        return _train_pairwise(solver, params, arrays, n_features, context)
    params = resolve_kernel(params, arrays, n_features)

    y = np.asarray(arrays["y"])
    estimator = ProblemsEstimator(solver, params, n_binary_problems(y, uses_one_vs_one(params, y)))
    sink.estimator = estimator

    def on_point(k: int, point: dict) -> None:
        sink.subproblem = k
        sink.add(point)

    published = [0.0]

    def on_subtask_done(done: int, total: int) -> None:
        # at most once per flush of the trace (105 classes: 105 round trips otherwise), and the last one
        now = time.monotonic()
        if done == total or now - published[0] >= sink.flush_s:
            published[0] = now
            sink.jobs.update(sink.job_id, subtasks={"done": done, "total": total})

    sink.set_phase(phase)
    train_correct: list[int] = []  # rows predicted right, when the subtask processes scored them
    staged: dict = {}  # the linear model's arrays, as given to stage_model

    def fitted(results: list[SolverResult]) -> None:
        if stage_model is not None and spec_of(solver).model_kind == ModelKind.linear:
            staged.update(_linear_arrays(results))
            stage_model(staged)

    labels, results = fit_problems(
        solver,
        params,
        arrays,
        n_features,
        context,
        on_point=on_point,
        on_subtask_done=on_subtask_done,
        on_problem_done=estimator.problem_done,
        train_correct=train_correct,
        warm_states=False,
        on_fitted=fitted,
    )
    sink.flush()
    done = [r for r in results if r is not None]
    if len(done) < len(results):
        kind = "one-vs-one pairs" if uses_one_vs_one(params, y) else "one-vs-rest classes"
        why = (
            f"canceled after {len(done)} of {len(results)} binary problems ({kind}): a model needs every one of "
            "them, so none was stored"
        )
        return TrainingOutcome(
            StopReason.CANCELED, None, ModelDescription(n_iter=sum(r.n_iter for r in done)), no_model=why
        )
    sink.set_phase("scoring training data")
    model_arrays, model = assemble_model(
        solver, params, done, labels, arrays, n_features, with_accuracy=not train_correct, linear_arrays=staged or None
    )
    if train_correct:
        model.train_accuracy = sum(train_correct) / y.size
    if params.probability and not context.cancel_requested():
        from worker.training.calibration import calibrate

        sink.set_phase("calibrating probabilities")
        model.probability = calibrate(solver, params, arrays, n_features, context)
    return TrainingOutcome(StopReason(model.stop_reason), model_arrays, model)


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
    a linear model's arrays as ``_linear_arrays`` made them from these results already)."""
    model = ModelDescription()
    overall = _summarize(model, results, any(r.stop_reason is StopReason.DEADLINE for r in results))
    kernel = getattr(params, "kernel", None)
    if kernel is not None:
        one_vs_one = uses_one_vs_one(params, np.asarray(arrays["y"]))
        model_arrays = _kernel_model(model, results, arrays, n_features, labels if one_vs_one else None)
        model.kernel = kernel.model_dump()
    else:
        model_arrays = linear_arrays if linear_arrays is not None else _linear_arrays(results)
        model.kind = ModelKind.linear.value
    model.stopping_rule = stopping_rule(solver, params, results, overall.value).model_dump()
    model.labels = [float(v) for v in labels]
    model.n_features = int(n_features)
    model.task = Task.classification.value
    if with_accuracy:
        model.train_accuracy = _train_accuracy(model, model_arrays, arrays, n_features, np.asarray(arrays["y"]))
    return model_arrays, model


def _linear_arrays(results: list[SolverResult]) -> dict:
    """A linear model's stored arrays: one weight vector and one offset per binary problem."""
    return {"weights": _stacked_weights(results), "offsets": np.array([r.bias for r in results], dtype=np.float64)}


def _summarize(model: ModelDescription, results: list[SolverResult], deadline_hit: bool) -> StopReason:
    """Set the training report's figures over the problems (iterations, time, objectives, certified gap) on the
    model, and return its stop reason: the first of canceled, deadline, max_iter that a problem met, else
    converged."""
    reasons = [r.stop_reason for r in results]
    if StopReason.CANCELED in reasons:
        overall = StopReason.CANCELED
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
    return overall


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


def _stacked_weights(results: list[SolverResult]) -> np.ndarray:
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


def _kernel_model(
    model: ModelDescription,
    results: list[SolverResult],
    arrays: dict,
    n_features: int,
    one_vs_one_labels: np.ndarray | None = None,
) -> dict:
    """The arrays of a kernel model: the union of the problems' expansion rows, with one coefficient row per
    problem (its kind and support counts set on ``model``).

    One-vs-one models (``one_vs_one_labels``: the sorted labels) keep their rows grouped by label, in
    the order of the labels, with the count per label (``nr_sv``), as a LIBSVM model file lists them.
    """
    supports = [np.asarray(r.extra["support_indices"], dtype=np.int64) for r in results]
    rows = np.unique(np.concatenate(supports)) if supports else np.zeros(0, dtype=np.int64)
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
        "offsets": np.array([r.bias for r in results], dtype=np.float64),
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


def _correct_rows(
    weights: np.ndarray, offsets: list, labels: np.ndarray, arrays: dict, n_features: int, start: int, stop: int
) -> int:
    """How many of the rows start..stop a linear model predicts right (the subtask processes' part of
    ``_train_accuracy``)."""
    model = ModelDescription(kind=ModelKind.linear.value, n_features=n_features, labels=[float(v) for v in labels])
    model_arrays = {"weights": weights, "offsets": np.asarray(offsets, dtype=np.float64)}
    return _n_correct(model, model_arrays, csr(arrays, n_features)[start:stop], np.asarray(arrays["y"])[start:stop])


def _train_pairwise(
    solver: str, params: SolverParams, arrays: dict, n_features: int, context: FitContext
) -> TrainingOutcome:
    """A pairwise objective (cpa's ordinal, ROC-area or ranking): one problem over the labels as ranks."""
    objective = params.task  # the pairwise objective (cpa: `objective`)
    indptr, indices = (np.asarray(arrays[name]) for name in ("indptr", "indices"))
    data = registry.data_for(solver, np.asarray(arrays["data"]))
    y = np.asarray(arrays["y"], dtype=np.float64)
    qid = np.asarray(arrays["qid"]) if objective == Task.ranking else None
    estimator = ProblemsEstimator(solver, params, 1)
    sink = context.progress_sink()
    sink.estimator = estimator
    sink.set_phase("training")
    control = SolverControl(
        deadline=context.deadline,
        cancel_requested=context.cancel_requested,
        on_point=sink.add,
        cores=core_budget.follow(),
    )
    result = registry.adapter(solver)(
        indptr,
        indices,
        data,
        y,
        n_features=n_features,
        params=params,
        class_weight=(1.0, 1.0),
        control=control,
        qid=qid,
    )
    estimator.problem_done(0)
    sink.set_phase("scoring training data")
    model_arrays = {"weights": np.asarray(result.w, dtype=np.float64).reshape(1, -1), "offsets": np.zeros(1)}
    model = ModelDescription()
    overall = _summarize(model, [result], result.stop_reason is StopReason.DEADLINE)
    model.kind = ModelKind.ranking.value
    model.stopping_rule = stopping_rule(solver, params, [result], result.stop_reason.value).model_dump()
    model.task = Task(objective).value
    model.n_features = int(n_features)
    model.n_pairs = int(result.extra.get("n_pairs", 0))
    scores = np.asarray(csr(arrays, n_features) @ model_arrays["weights"][0])
    model.train_pairwise_accuracy = pairwise_accuracy(scores, y, qid)
    if objective == Task.roc_area:
        model.train_roc_auc = roc_auc(scores, y == y.max())
    model.labels = None  # a model that only scores (ordinal: its ranks, below)
    model.train_accuracy = None
    if objective == Task.ordinal:
        model.ranks = [float(v) for v in result.extra["ranks"]]
        model.thresholds = [float(v) for v in result.extra["thresholds"]]
        model.labels = model.ranks
        predicted, _ = Scorer(model, model_arrays).predict_values(csr(arrays, n_features))
        model.train_accuracy = float(np.mean(predicted == y))
    return TrainingOutcome(overall, model_arrays, model)

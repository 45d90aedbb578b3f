"""The dispatcher: turns a job's labels into problems, runs the solver, and has the model assembled
(``worker.training.assemble``).

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
import time
from dataclasses import dataclass, replace

import numpy as np

from core.schemas.enums import ModelKind, Task
from core.schemas.kernel_params import PolyKernel, RbfKernel, SigmoidKernel
from core.schemas.solver_params import SolverParams
from core.scoring.metrics import pairwise_accuracy, regression_report, roc_auc
from core.scoring.models import Scorer, csr
from core.scoring.probability import logistic_calibration
from core.solvers import spec_of
from core.storage.documents import ModelDescription
from worker.runtime import core_budget
from worker.runtime.progress import ProblemsEstimator
from worker.runtime.subtasks import SharedRows, SubtaskContext, run_task_graph
from worker.solvers.common import SolverControl, SolverResult, StopReason
from worker.training import registry
from worker.training.assemble import assemble_model, correct_rows, kernel_model_arrays, linear_model_arrays, summarize
from worker.training.context import FitContext
from worker.training.crammer_singer import fit_crammer_singer, uses_crammer_singer
from worker.training.folds import subset
from worker.training.problems import job_problems, n_binary_problems, uses_one_vs_one
from worker.training.split import fit_split
from worker.training.stopping import stopping_rule


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
    if context.open_nodes is not None and spec_of(solver).split_solve is not None:
        labels = np.unique(np.asarray(arrays["y"]))
        split_results = fit_split(
            solver,
            params,
            labels,
            n_features,
            context,
            on_point=on_point,
            on_problem_done=on_problem_done,
            on_subtask_done=on_subtask_done,
        )
        if on_fitted is not None and all(result is not None for result in split_results):
            on_fitted(split_results)
        return labels, split_results
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
    # the data's memory is shared by the processes that fit problems side by side, each holding its part
    memory_bytes = None
    if context.data_memory is not None:
        memory_bytes = context.data_memory // (min(n_processes, len(problems)) if parallel_problems else 1)
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
            memory_bytes=memory_bytes,
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
            return correct_rows(shared.values[: len(problems)], offsets, labels, arrays, n_features, start, stop)

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
    if params.task not in (Task.classification, Task.regression, Task.one_class):
        return _train_pairwise(solver, params, arrays, n_features, context)
    params = resolve_kernel(params, arrays, n_features)
    if params.task in (Task.regression, Task.one_class):
        return _train_one_problem(solver, params, arrays, n_features, context)

    y = np.asarray(arrays["y"])
    n_problems = 1 if uses_crammer_singer(params) else n_binary_problems(y, uses_one_vs_one(params, y))
    estimator = ProblemsEstimator(solver, params, n_problems)
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
            staged.update(linear_model_arrays(results))
            stage_model(staged)

    results: list[SolverResult | None]
    if uses_crammer_singer(params):
        labels, fitted_one = fit_crammer_singer(params, arrays, n_features, context, on_point)
        estimator.problem_done(0)
        ready = [result for result in fitted_one if result is not None]
        if len(ready) == len(fitted_one):  # else canceled before it started: no model (below)
            fitted(ready)
        results = list(fitted_one)
    else:
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
            if not uses_crammer_singer(params)
            else "canceled before its one problem over every label started (its nodes were loading the rows): no model"
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
    elif getattr(params, "loss", None) == "logistic":  # log-odds already: probabilities with no calibration
        model.probability = logistic_calibration(len(done), pairwise=uses_one_vs_one(params, y))
    return TrainingOutcome(StopReason(model.stop_reason), model_arrays, model)


def _train_pairwise(
    solver: str, params: SolverParams, arrays: dict, n_features: int, context: FitContext
) -> TrainingOutcome:
    """A pairwise objective (cpa's ordinal, ROC-area or ranking): one problem over the labels as ranks."""
    objective = params.task  # the pairwise objective (cpa: `objective`)
    y = np.asarray(arrays["y"], dtype=np.float64)
    qid = np.asarray(arrays["qid"]) if objective == Task.ranking else None
    result, sink = _fit_one_problem(solver, params, arrays, y, n_features, context, qid=qid)
    sink.set_phase("scoring training data")
    model_arrays = {"weights": np.asarray(result.w, dtype=np.float64).reshape(1, -1), "offsets": np.zeros(1)}
    model = ModelDescription()
    overall = summarize(model, [result], result.stop_reason is StopReason.DEADLINE)
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


def _train_one_problem(
    solver: str, params: SolverParams, arrays: dict, n_features: int, context: FitContext
) -> TrainingOutcome:
    """A regression (dcd's epsilon-insensitive losses, smo's epsilon_svr: one problem over the real targets, the
    model's one score its predicted value) or a one-class SVM (smo's one_class: one problem over the rows, labels
    unused; the model predicts +1 where its score is positive, else -1)."""
    y = np.asarray(arrays["y"], dtype=np.float64)
    result, sink = _fit_one_problem(solver, params, arrays, y, n_features, context)
    sink.set_phase("scoring training data")
    model = ModelDescription()
    overall = summarize(model, [result], result.stop_reason is StopReason.DEADLINE)
    kernel = getattr(params, "kernel", None)
    if kernel is not None:  # the expansion over its support rows, as a kernel classifier's
        model_arrays = kernel_model_arrays(model, [result], arrays, n_features)
        model.kernel = kernel.model_dump()
    else:
        model_arrays = linear_model_arrays([result])
        model.kind = ModelKind.linear.value
    model.stopping_rule = stopping_rule(solver, params, [result], overall.value).model_dump()
    one_class = params.task == Task.one_class
    model.labels = [-1.0, 1.0] if one_class else None  # a regression predicts values
    model.n_features = int(n_features)
    model.task = params.task.value
    model.train_accuracy = None
    _, predicted = Scorer(model, model_arrays).predict_values(csr(arrays, n_features))
    if one_class:
        model.train_outlier_fraction = float(np.mean(predicted <= 0.0))
    else:
        report = regression_report(predicted, y)
        model.train_mse, model.train_r2 = report["mse"], report["r2"]
    return TrainingOutcome(overall, model_arrays, model)


def _fit_one_problem(solver: str, params: SolverParams, arrays: dict, y: np.ndarray, n_features: int, context, **extra):
    """The job's one problem over ``y`` (a pairwise objective's ranks, a regression's targets), its trace and progress
    going to the job: (result, the progress sink). ``extra``: the solver's keywords (qid)."""
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
    indptr, indices = (np.asarray(arrays[name]) for name in ("indptr", "indices"))
    data = registry.data_for(solver, np.asarray(arrays["data"]))
    result = registry.adapter(solver)(
        indptr,
        indices,
        data,
        y,
        n_features=n_features,
        params=params,
        class_weight=(1.0, 1.0),
        control=control,
        **extra,
    )
    estimator.problem_done(0)
    sink.flush()
    return result, sink

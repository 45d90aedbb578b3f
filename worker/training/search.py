"""Model selection: cross-validate a grid of C (and gamma) values, then refit the best on all the data.

Folds are stratified by label (each label's rows shuffled with the search seed and dealt round
robin), or grouped by qid for ranking (whole queries dealt round robin), so that a fold never
splits a query.

Paths and warm starts
---------------------
The unit of work is a *path*: one binary problem (one class against the rest, or the two-label
problem, or cpa's pairwise problem) of one fold and one gamma, fitted at every C of the grid in
increasing order. For dcd, ocas and smo with ``warm_start`` (the default) each fit starts from the
previous fit of its path (dcd: the dual variables scaled by the ratio of the C values; smo: the dual
variables as they are, with their gradient, so that the start costs no kernel row; ocas: the weights),
so every fit but the first of a path is warm-started whatever the number of processes. Increasing C is
the direction that warm-starts well: on a9a (dcd, tol 0.1, C from 0.01 to 30) a fold's path took 1,410
passes upward, 2,594 downward (the cold fit at the largest C dominates) and 3,427 cold; on digits'
one-vs-one pairs (smo, rbf, C 1 -> 10) the fit at C = 10 took 30-75% fewer steps than a cold one.

The paths run as tasks of ``worker.runtime.subtasks.run_task_graph`` over the processes. A path is one task
when there are enough paths to keep the processes busy (one-vs-rest: folds x classes, 525 on
sector's 105 classes); otherwise (a two-label problem has only ``cv_folds`` paths, and 5 paths on 2
processes cannot do better than 5/3) every fit is its own task and the warm start travels with the
task to whichever process runs the next C, the paths advancing side by side (lowest C first). The
fits, their warm starts and hence the table do not depend on the number of processes. Without warm
starts every (fold, gamma, problem, C) fit is an independent task, largest C first.

Every fit of a search, the refit's included, records its last trace point only, unless
``search.trace_fits`` asks for the points its ``trace_every`` (and dcd's ``trace_budget``) give: a point of
dcd or smo costs a pass over the data (a9a, 7 C x 5 folds, one process: 0.95 s with the last points, 1.03 s
with dcd's default budget, 3.1 s with a point per pass), and the parent handles every point.

Each fit reports its decision values on the held-out fold; the parent scores a (fold, setting) cell
with the search metric once every problem of the fold has reported, and publishes the table as it
fills (throttled). A cell of one problem (two labels, or a pairwise task) is scored by the process that
ran its fit, which sends back the score instead of the decision values. The table (``table``) gives per
setting the mean and standard deviation of the fold scores, the iterations, seconds, warm-started fits and
stop reasons of its fits; with
``measure_cold`` the fits of fold 0 are repeated from a cold start and the table shows the
iterations that warm starts saved there (measured, not estimated; it costs the cold fits, which are
the expensive ones at large C, so it is off by default).

The best setting (highest mean; ties go to the smaller C, then the smaller gamma) is refitted on all
the data and becomes the job's model, with the table in its metadata as ``search_results``. With
dcd's and ocas's warm starts the refit walks the C path up to the best C on all the data (a cold fit at a
large C costs more than the whole warm path: on a9a 0.77 s cold at C = 30 against 0.2 s for the path);
smo's refit is one fit at the best C (its warm start saves steps, not the fit at the smaller C: digits'
refit took 0.23 s walked, 0.14 s cold); only
the last fit's trace reaches the job. When the fits are tasks (few paths), that path on all the data
runs among them: with several processes it goes first at every C (it is the longest chain: walked
after the search it was a serial tail of about a fifth of a two-label search on a9a, which capped 2
processes near 1.67x), as far as the best C once that is known (the fits beyond it are speculative,
counted in ``refit_path.fits_beyond_best``). Its fit at the largest C, the most expensive one, runs
with the others too unless the scores known when it could start rule that C out (``largest_c_ruled_out``:
the largest setting scored on every fold trails the best by more than two standard errors of the paired
fold differences); ruled out, it waits until every setting is scored and runs only if the largest C wins
after all. Parked always, it had been a serial tail on a9a, where the scores are flat within 1e-4 and C =
30 wins: 0.11 s on one process while the other idled (1.50x over one process through the service; run
with the others, 1.62x). With one process the path runs after the search, up to the best C only. At
each C the fold whose previous fit took longest goes first, so that the processes end together (a9a, 2
processes: 1.63x -> 1.75x over one). Its fit at the best C is the model, the same one the walk after the
search gives.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import time
from collections import Counter, OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from core.schemas.enums import Task, WarningCode
from core.schemas.solver_params import SearchParams, SolverParams
from core.scoring import metrics
from core.scoring.kernel import KernelExpansion
from core.scoring.metrics import predicted_ranks
from core.scoring.models import one_vs_one_votes
from core.scoring.quality import settled, warning
from core.solvers import spec_of
from worker.runtime.progress import ProblemsEstimator
from worker.runtime.subtasks import SharedRows, SubtaskContext, available_cores, run_task_graph
from worker.solvers.common import SolverControl, SolverResult, StopReason
from worker.training import registry
from worker.training.fit import TrainingOutcome, assemble_model, fit_problems, resolve_kernel, train_model
from worker.training.folds import held_out_decisions, make_folds, subset
from worker.training.problems import (
    binary_problems,
    class_weight_pairs,
    n_binary_problems,
    one_vs_one_problems,
    one_vs_one_weight_pairs,
    uses_one_vs_one,
)

PATHS_PER_PROCESS = 4
"""A path is one task when there are at least this many paths per process; else each fit is a task."""
FOLD_CACHE_BYTES = 256 << 20
"""A process keeps the fold subsets it built while they take at most this much (or one data set's size)."""
HELD_KERNEL_BYTES = 128 << 20
"""A process keeps the kernel values between a fold's held-out and training rows (per kernel setting) while they
take at most this much; a fold whose matrix alone is larger scores each fit with its own kernel expansion."""
PUBLISH_EVERY_S = 0.2
LAST_POINT_ONLY = 2**62
"""``trace_every`` of a cross-validation fit without ``search.trace_fits``: it records its last point only."""
ALL_ROWS = -1
"""The fold number of the paths on all the data (the refit's), which run with the search when its fits are tasks."""
STOP_SEVERITY = (
    StopReason.CONVERGED.value,
    StopReason.DEADLINE.value,
    StopReason.CANCELED.value,
    StopReason.MAX_ITER.value,
)
"""Order in which a setting's worst stop reason is chosen (the last one present wins)."""


def default_metric(task: str) -> str:
    """accuracy for classification, pairwise_accuracy otherwise."""
    return "accuracy" if task == Task.classification else "pairwise_accuracy"


def score_decisions(
    metric: str,
    task: str,
    labels: np.ndarray | None,
    decisions: np.ndarray,
    y: np.ndarray,
    qid: np.ndarray | None = None,
    ranking: dict | None = None,
    one_vs_one: bool = False,
) -> float:
    """The metric of held-out decision values (rows x problems) as a stored model would score them.

    Two labels: one column, positive means ``labels[1]``; more: one column per label, argmax, or with
    ``one_vs_one`` one column per pair of labels, the vote (and the one-vs-rest shaped scores for roc_auc).
    Pairwise tasks: one column of scores (ordinal models also predict ranks through ``ranking``'s thresholds).
    nan when the metric is undefined on these rows (e.g. one class only).
    """
    value = None
    if task == Task.classification:
        assert labels is not None, "classification scores need the labels"
        if one_vs_one and decisions.shape[1] > 1:
            votes, scores = one_vs_one_votes(decisions, labels.size)
            predicted = labels[np.argmax(votes, axis=1)]
        elif decisions.shape[1] == 1:
            scores = decisions[:, 0]
            predicted = np.where(scores > 0, labels[1], labels[0])
        else:
            scores = decisions
            predicted = labels[np.argmax(decisions, axis=1)]
        if metric == "accuracy":
            value = float(np.mean(predicted == y))
        elif metric == "pairwise_accuracy":
            value = metrics.pairwise_accuracy(scores, y, None)
        else:
            value = metrics.classification_report(y, predicted, scores, labels)[metric]
    else:
        scores = decisions[:, 0]
        if metric == "pairwise_accuracy":
            value = metrics.pairwise_accuracy(scores, y, qid if task == Task.ranking else None)
        elif metric == "roc_auc":
            value = metrics.roc_auc(scores, y == y.max())
        elif metric == "accuracy" and ranking is not None and ranking.get("thresholds") is not None:
            predicted = predicted_ranks(scores, np.asarray(ranking["ranks"]), np.asarray(ranking["thresholds"]))
            value = float(np.mean(predicted == y))
    return float("nan") if value is None else float(value)


@dataclass(frozen=True)
class FitPath:
    """The fits of one binary problem of one fold (and gamma) along the C grid, in order (see the module docstring)."""

    fold: int
    gamma_index: int
    gamma: float | str | None  # a number, `scale` or `auto` (resolved by the kernel), or None
    problem: int
    Cs: tuple
    warm: bool
    cold_reference: bool = False


@dataclass
class FitRecord:
    """What a fit sends back to the parent: its cost, why it stopped, its held-out decision values."""

    C: float
    n_iter: int
    seconds: float
    stop_reason: str
    warm_started: bool
    decisions: np.ndarray | None
    ranking: dict | None = None
    result: SolverResult | None = None  # the whole result, for the fits on all the data (the refit's path)
    score: float | None = None  # a cell of one problem, scored where the fit ran (then ``decisions`` is None)
    gap_rel: float | None = None  # its certified relative gap, when the solver certifies one


class FoldCache:
    """The training and held-out subsets of the folds a process has worked on (built on first use).

    Subsets are kept while they take at most ``max(FOLD_CACHE_BYTES, data set bytes)``, the least
    recently used dropped first, so small data sets build each fold once per process and large ones
    hold about one fold at a time.
    """

    def __init__(self, arrays: dict, n_features: int, folds: np.ndarray, task: str, one_vs_one: bool = False) -> None:
        self.arrays = arrays
        self.one_vs_one = one_vs_one
        self.n_features = n_features
        self.folds = folds
        self.task = task
        data_bytes = sum(np.asarray(arrays[k]).nbytes for k in ("indptr", "indices", "data"))
        self.budget = max(FOLD_CACHE_BYTES, data_bytes)
        self.entries: OrderedDict[int, tuple[dict, int]] = OrderedDict()
        self.held_kernels: OrderedDict[tuple, np.ndarray] = OrderedDict()

    def held_kernel(self, fold: int, kernel: dict) -> np.ndarray | None:
        """K(training row, held-out row) of the fold, dense (n_train, n_held), built on first use and kept while
        the matrices take at most ``HELD_KERNEL_BYTES``; None when this one alone would take more.

        The fits of a fold and gamma (the C grid; one-vs-rest classes or one-vs-one pairs: 45 on digits) then
        score the held-out rows from rows of one matrix instead of each recomputing its kernel rows: a fit's
        support vectors pick contiguous rows (digits: 0.03 ms a fit, 0.3 ms from the columns of the transpose)."""
        entry = self.get(fold)
        n_train = entry["train"]["indptr"].size - 1
        n_held = entry["held"]["indptr"].size - 1
        if n_train * n_held * 8 > HELD_KERNEL_BYTES:
            return None
        key = (fold, tuple(sorted(kernel.items())))
        if key in self.held_kernels:
            self.held_kernels.move_to_end(key)
            return self.held_kernels[key]
        while self.held_kernels and (len(self.held_kernels) + 1) * n_train * n_held * 8 > HELD_KERNEL_BYTES:
            self.held_kernels.popitem(last=False)
        train = entry["train"]
        expansion = KernelExpansion(
            train["indptr"], train["indices"], train["data"], np.zeros(n_train), 0.0, kernel, n_features=self.n_features
        )
        held = entry["held_matrix"]
        values = expansion.kernel_values(held.indptr, held.indices, held.data)  # (n_held, n_train)
        self.held_kernels[key] = np.ascontiguousarray(values.T)
        return self.held_kernels[key]

    def get(self, fold: int) -> dict:
        """The fold's train subset, held-out CSR matrix and rows, labels and binary problems (ALL_ROWS: the data).

        One-vs-one: ``members`` are the training rows of each pair (``pair_train`` its subsets, built on first use)."""
        if fold == ALL_ROWS:
            assert not self.one_vs_one, "the refit's path runs with the search for warm-started solvers only"
            entry: dict[str, Any] = {"train": self.arrays}
            entry["labels"], entry["problems"] = binary_problems(np.asarray(self.arrays["y"]))
            return entry
        if fold in self.entries:
            self.entries.move_to_end(fold)
            return self.entries[fold][0]
        train = subset(self.arrays, np.flatnonzero(self.folds != fold), self.n_features)
        held = subset(self.arrays, np.flatnonzero(self.folds == fold), self.n_features)
        entry = {
            "train": train,
            "held": held,
            "held_matrix": sp.csr_matrix(
                (held["data"], held["indices"], held["indptr"]), shape=(held["indptr"].size - 1, self.n_features)
            ),
        }
        if self.task == Task.classification and self.one_vs_one:
            entry["labels"], entry["members"], entry["problems"] = one_vs_one_problems(np.asarray(train["y"]))
            entry["pair_train"] = {}
        elif self.task == Task.classification:
            entry["labels"], entry["problems"] = binary_problems(np.asarray(train["y"]))
        size = sum(a.nbytes for part in (train, held) for a in part.values())
        while self.entries and sum(s for _, s in self.entries.values()) + size > self.budget:
            self.entries.popitem(last=False)
        self.entries[fold] = (entry, size)
        return entry


WARM_ROW = "warm_row"
"""Key of a warm state's ``extra`` whose dual variables wait in the search's shared rows (the path's row)."""


WARM_KEYS = ("alpha", "gradient", "gradient_bar", "n_sv", "n_bounded_sv")
"""What of a result's ``extra`` a warm start takes (``worker.training.registry.warm_start_arguments``)."""


def _warm_state(result: SolverResult, rows: SharedRows | None = None, row: int = 0) -> SolverResult:
    """The part of a result a warm start needs (dcd: alpha; smo: alpha and its gradient; ocas: w and bias), small
    enough to pickle: with ``rows``, dcd's dual variables go into row ``row`` of the shared rows and the state only
    names it."""
    extra = {key: result.extra[key] for key in WARM_KEYS if result.extra.get(key) is not None}
    if (
        "alpha" in extra
        and "gradient" not in extra
        and rows is not None
        and rows.put(row, np.asarray(extra["alpha"], dtype=np.float64))
    ):
        extra = {key: value for key, value in extra.items() if key != "alpha"} | {WARM_ROW: row}
    return dataclasses.replace(result, trace=(), extra=extra)


def _restored(state: SolverResult, rows: SharedRows | None) -> SolverResult:
    """A warm state with its dual variables back from the shared rows (as it was when ``_warm_state`` made it)."""
    if WARM_ROW not in state.extra:
        return state
    assert rows is not None, "a warm state in shared rows needs the rows"
    extra = {key: value for key, value in state.extra.items() if key != WARM_ROW}
    return dataclasses.replace(state, extra=extra | {"alpha": rows.take(state.extra[WARM_ROW])})


class Search:
    """One model selection: its grid, folds and paths; runs the paths and builds the table."""

    def __init__(self, solver: str, params: SolverParams, arrays: dict, n_features: int) -> None:
        if params.search is None:
            raise ValueError("a search needs params.search")
        search = params.search
        self.solver = solver
        self.params = params
        self.search: SearchParams = search
        self.arrays = arrays
        self.n_features = n_features
        self.task = params.task
        self.metric = search.metric or default_metric(self.task)
        self.cv_folds = int(search.cv_folds)
        base_params = resolve_kernel(params.model_copy(update={"search": None}), arrays, n_features)
        self.base_params = base_params
        self.Cs = tuple(sorted(float(c) for c in (search.C or [params.C])))
        kernel = getattr(base_params, "kernel", None)
        self.gammas: list[float | str | None] = list(search.gamma) if search.gamma else [getattr(kernel, "gamma", None)]
        self.warm = bool(search.warm_start) and spec_of(solver).warm_start is not None
        self.measure_cold = bool(search.measure_cold) and self.warm
        y = np.asarray(arrays["y"])
        qid = np.asarray(arrays["qid"]) if self.task == Task.ranking and "qid" in arrays else None
        self.folds = make_folds(y, qid, self.cv_folds, search.seed)
        self.one_vs_one = self.task == Task.classification and uses_one_vs_one(base_params, y)
        self.held_y = [y[self.folds == f] for f in range(self.cv_folds)]
        self.held_qid = [qid[self.folds == f] if qid is not None else None for f in range(self.cv_folds)]
        self.fold_labels: list[np.ndarray | None] = [None] * self.cv_folds
        if self.task == Task.classification:
            self.fold_labels = [np.unique(y[self.folds != f]) for f in range(self.cv_folds)]
        self.refit_walks = (
            self.warm and self.task == Task.classification and spec_of(solver).warm_start != "dual_gradient"
        )
        """Whether the refit walks the C path up to the best C (dcd, ocas) rather than fitting the best C alone
        (smo: see the module docstring)."""
        self.settings: dict[tuple, SolverParams] = {}
        self.processes = 1
        self.full_results: dict[tuple[int, float], SolverResult] = {}
        self.warm_rows: SharedRows | None = None

    # -- the work ---------------------------------------------------------------------------------

    def n_problems(self, fold: int) -> int:
        """Binary problems of a fold: one for two labels (or a pairwise task), else one per label (one-vs-one:
        per pair of labels)."""
        labels = self.fold_labels[fold]
        if labels is None or labels.size == 2:
            return 1
        return int(labels.size * (labels.size - 1) // 2) if self.one_vs_one else int(labels.size)

    def paths(self, folds: list[int] | None = None, gamma_indices: list[int] | None = None) -> list[FitPath]:
        """Every path of the search (or of the given folds and gammas), fold-major."""
        out = []
        for fold in range(self.cv_folds) if folds is None else folds:
            for g, gamma in enumerate(self.gammas):
                if gamma_indices is not None and g not in gamma_indices:
                    continue
                for k in range(self.n_problems(fold)):
                    out.append(FitPath(fold, g, gamma, k, self.Cs, self.warm))
                    if self.measure_cold and fold == 0:
                        out.append(FitPath(fold, g, gamma, k, self.Cs, False, cold_reference=True))
        return out

    def setting(self, C: float, gamma) -> SolverParams:
        """The solver parameters of one fit of the grid (or of the refit): without ``search.trace_fits``, a
        fit records its last trace point only (see the module docstring). Made once per setting (digits: 540
        fits of 2 ms share 4 settings)."""
        key = (C, gamma)
        if key not in self.settings:
            self.settings[key] = self._setting(C, gamma)
        return self.settings[key]

    def _setting(self, C: float, gamma) -> SolverParams:
        update: dict = {"C": C}
        if not self.search.trace_fits and "trace_every" in type(self.base_params).model_fields:
            update["trace_every"] = LAST_POINT_ONLY
        kernel = getattr(self.base_params, "kernel", None)
        if gamma is not None and kernel is not None:
            update["kernel"] = kernel.model_copy(update={"gamma": gamma})
        return self.base_params.model_copy(update=update)

    def parallel_within_fit(self) -> int | None:
        """Threads one fit of the grid may use (the spec's ``threads``); None: the solver's default."""
        threads = spec_of(self.solver).threads
        if threads == "n_processes":
            return 1  # the processes go to the paths
        if threads == "n_threads":
            return 1 if self.processes == 1 else None  # None: the threads the process is allowed
        return None

    def fit_segment(
        self,
        path: FitPath,
        start: int,
        stop: int,
        state,
        cache: FoldCache,
        *,
        deadline,
        cancel_requested,
        record_point=None,
        row: int = 0,
    ) -> tuple[list[FitRecord], object]:
        """Fit ``path.Cs[start:stop]`` in order, each from the previous (or ``state``, a (C, result) pair).

        With the search's ``warm_rows`` (several processes, fits as tasks), the warm state's dual variables
        travel through the path's row ``row`` of shared memory instead of the task pipes."""
        fit = registry.adapter(self.solver)
        if state:
            state = (state[0], _restored(state[1], self.warm_rows))
        fold_data = cache.get(path.fold)
        train = fold_data["train"]
        records = []
        for i in range(start, stop):
            C = path.Cs[i]
            setting = self.setting(C, path.gamma)
            start_args = registry.warm_start_arguments(self.solver, state[1], setting, state[0]) if state else {}
            on_point = None
            if record_point is not None and not path.cold_reference and path.fold != ALL_ROWS:
                tags = {"stage": "search", "fold": path.fold, "C": C, "gamma": path.gamma, "subproblem": path.problem}
                on_point = lambda point, tags=tags: record_point(dict(point, **tags))  # noqa: E731
            control = SolverControl(deadline=deadline, cancel_requested=cancel_requested, on_point=on_point)
            began = time.perf_counter()
            score = None
            fit_rows = train  # the rows of the fit (one-vs-one: the pair's)
            if self.task == Task.classification:
                labels = fold_data["labels"]
                class_weight = getattr(setting, "class_weight", None)
                if "members" in fold_data:  # one-vs-one: the pair's rows only
                    if "weight_pairs" not in fold_data:  # the same for every fit of the fold
                        fold_data["weight_pairs"] = one_vs_one_weight_pairs(labels, class_weight)
                    pair = fold_data["weight_pairs"][path.problem]
                    pair_train = fold_data["pair_train"]
                    if path.problem not in pair_train:
                        pair_train[path.problem] = subset(train, fold_data["members"][path.problem], self.n_features)
                    fit_rows = pair_train[path.problem]
                else:
                    pair = class_weight_pairs(labels, class_weight)[path.problem]
                    fit_rows = train
                result = fit(
                    fit_rows["indptr"],
                    fit_rows["indices"],
                    fit_rows["data"],
                    fold_data["problems"][path.problem],
                    n_features=self.n_features,
                    params=setting,
                    class_weight=pair,
                    control=control,
                    parallel=self.parallel_within_fit(),
                    **start_args,
                )
                ranking = None
            else:
                result = registry.adapter(self.solver)(
                    train["indptr"],
                    train["indices"],
                    train["data"],
                    train["y"],
                    n_features=self.n_features,
                    params=setting,
                    class_weight=(1.0, 1.0),
                    control=control,
                    parallel=self.parallel_within_fit(),
                    qid=train.get("qid") if self.task == Task.ranking else None,
                )
                result = dataclasses.replace(result, bias=0.0)
                ranking = {"ranks": result.extra.get("ranks"), "thresholds": result.extra.get("thresholds")}
            cut_short = result.stop_reason in (StopReason.DEADLINE, StopReason.CANCELED) and not settled(
                result.stop_reason.value, result.extra.get("gap_rel")
            )
            if path.fold == ALL_ROWS:
                # the linear model needs no dual variables (the warm state has its own): not pickled back
                extra = {key: value for key, value in result.extra.items() if key != "alpha"}
                decisions, whole = None, dataclasses.replace(result, extra=extra)
            elif cut_short:
                # stopped by the deadline (or a cancel) before it settled: its setting cannot be ranked, so its
                # held-out rows are not scored (with a kernel that costs n_sv x held-out kernel values, seconds
                # past the deadline)
                decisions, whole, score = None, None, math.nan
            else:
                kernel = getattr(setting, "kernel", None)
                kernel_dict = None if kernel is None else kernel.model_dump()
                values = None
                if result.w is None and kernel_dict is not None and self.task == Task.classification:
                    values = cache.held_kernel(path.fold, kernel_dict)
                if values is not None:
                    support = np.asarray(result.extra["support_indices"], dtype=np.int64)
                    if "members" in fold_data:  # the pair's rows, numbered among the fold's training rows
                        support = fold_data["members"][path.problem][support]
                    decisions = np.asarray(result.extra["dual_coef"]) @ values[support] + result.bias
                else:
                    decisions = held_out_decisions(
                        result, fit_rows, fold_data["held_matrix"], kernel_dict, self.n_features
                    )
                whole = None
                if self.n_problems(path.fold) == 1:
                    # its cell is this fit alone: scored here, so that a number travels back instead of the
                    # held-out rows' decision values (a9a: 52 KB a fit, unpickled by the coordinator)
                    score = self.score_cell(path.fold, decisions[:, None], ranking)
                    decisions = None
            records.append(
                FitRecord(
                    C,
                    int(result.n_iter),
                    time.perf_counter() - began,
                    result.stop_reason.value,
                    bool(start_args),
                    decisions,
                    ranking,
                    whole,
                    score,
                    result.extra.get("gap_rel"),
                )
            )
            # the next fit's start (none after the path's last C: it would be pickled back for nothing)
            state = (C, _warm_state(result, self.warm_rows, row)) if path.warm and i + 1 < len(path.Cs) else None
            if result.stop_reason in (StopReason.CANCELED, StopReason.DEADLINE):
                break  # the path's next fits would stop at once
        return records, state

    def run(
        self,
        *,
        n_processes: int,
        deadline,
        cancel_requested,
        publish,
        folds: list[int] | None = None,
        gamma_indices: list[int] | None = None,
        on_rows=None,
        on_point=None,
        flush=None,
    ) -> list[dict]:
        """Run the paths (all, or those of ``folds`` and ``gamma_indices``); returns the table rows (one per fold and setting).

        ``publish(table, subtasks)`` gets the table as it fills (throttled, and ``flush()`` is called with
        it); ``on_rows(rows)`` gets the rows of each completed (fold, setting) cell; ``on_point(point)``
        every fit's trace points, tagged with ``stage: search``, the fold, C, gamma and the binary problem.
        """
        self.processes = n_processes
        paths = self.paths(folds, gamma_indices)
        split = self.warm and len(paths) < PATHS_PER_PROCESS * n_processes
        # with few paths (their fits are tasks) the refit's path on all the data runs with them, so that its
        # fits do not make a serial tail after the cross-validation (see the module docstring)
        self.full_results = {}
        self.full_walk: list[tuple[float, int]] = []
        with_refit = split and folds is None and self.refit_walks and not self.one_vs_one and len(self.gammas) == 1
        if with_refit:
            n_full = n_binary_problems(np.asarray(self.arrays["y"]))
            paths = paths + [FitPath(ALL_ROWS, 0, self.gammas[0], k, self.Cs, True) for k in range(n_full)]
        # processes: the refit's path goes first at each C (the longest chain); one process: after the search,
        # as far as the best C only
        refit_offset = 0 if n_processes > 1 else len(self.Cs)
        tasks: list[tuple[tuple, tuple]] = []
        for p, path in enumerate(paths):
            if path.warm and not split:
                tasks.append(((0, p), (p, 0, len(path.Cs), None)))
            elif path.fold == ALL_ROWS:
                tasks.append(((refit_offset, -math.inf, p), (p, 0, 1, None)))
            elif path.warm:
                tasks.append(((0, 0.0, path.fold, p), (p, 0, 1, None)))
            elif len(paths) >= PATHS_PER_PROCESS * n_processes:
                # independent fits, and paths enough to keep the processes busy: a path's fits go as one task (a
                # digits search of one-vs-one pairs is 540 fits of 2 ms: a task each, the pipes cost what the
                # second process gave)
                tasks.append(((0, p), (p, 0, len(path.Cs), None)))
            else:
                # independent fits: largest C first (longest-processing-time-first keeps the processes even)
                for i in range(len(path.Cs) - 1, -1, -1):
                    tasks.append(((-i, p), (p, i, i + 1, None)))
        cache = FoldCache(self.arrays, self.n_features, self.folds, self.task, self.one_vs_one)
        # fits as tasks on several processes: each path's dual variables wait for its next fit in shared memory
        # (a9a: 260 KB a fit, pickled twice per task, kept the processes idle between tasks)
        n_rows = int(np.asarray(self.arrays["y"]).size)
        self.warm_rows = (
            SharedRows(len(paths), n_rows)
            if split
            and n_processes > 1
            and spec_of(self.solver).warm_start == "dual"
            and SharedRows.fits(len(paths), n_rows)
            else None
        )

        def run_task(payload, context: SubtaskContext):
            p, start, stop, state = payload
            return self.fit_segment(
                paths[p],
                start,
                stop,
                state,
                cache,
                deadline=context.deadline,
                cancel_requested=context.cancel_requested,
                record_point=None if on_point is None else context.record_point,
                row=p,
            )

        cells: dict[tuple, dict[int, FitRecord]] = {}
        cold: dict[tuple, dict[int, FitRecord]] = {}
        rows: list[dict] = []
        total = (
            (len(folds) if folds is not None else self.cv_folds)
            * len(self.Cs)
            * (len(gamma_indices) if gamma_indices is not None else len(self.gammas))
        )
        last_publish = [0.0]

        def maybe_publish(force: bool = False) -> None:
            now = time.monotonic()
            if force or now - last_publish[0] >= PUBLISH_EVERY_S:
                last_publish[0] = now
                publish(table(rows, self.metric, self.search, self.warm), {"done": len(rows), "total": total})
                if flush is not None:
                    flush()

        def best_C():
            """The best setting's C once every cell is scored, else None."""
            if len(rows) < total:
                return None
            best = table(rows, self.metric, self.search, self.warm)["best"]
            return best["C"] if best is not None else -np.inf

        parked: list[tuple[tuple, tuple]] = []  # the refit's fits at the largest C, until the best C is known

        def on_done(payload, result):
            p, start, stop, _ = payload
            records, state = result
            path = paths[p]
            if path.fold == ALL_ROWS:
                for record in records:
                    self.full_results[(path.problem, record.C)] = record.result
                best = best_C()
                more = stop < len(path.Cs) and records and records[-1].stop_reason != StopReason.CANCELED.value
                if more and best is None and stop == len(path.Cs) - 1 and largest_c_ruled_out(rows, self.cv_folds):
                    # the fit at the largest C is only needed if that C wins, and the scores so far say it will
                    # not: run it once that is known (it is the most expensive fit, and would otherwise take a
                    # process from the last folds' fits)
                    parked.append(((refit_offset + stop, -math.inf, p), (p, stop, stop + 1, state)))
                    return []
                if more and (best is None or path.Cs[stop - 1] < best):
                    return [((refit_offset + stop, -math.inf, p), (p, stop, stop + 1, state))]
                return []
            target = cold if path.cold_reference else cells
            new_rows = []
            for record in records:
                key = (path.fold, path.gamma_index, record.C)
                target.setdefault(key, {})[path.problem] = record
                if len(target[key]) == self.n_problems(path.fold):
                    if path.cold_reference:
                        continue
                    new_rows.append(self.cell_row(path.fold, path.gamma, target.pop(key)))
            released = []
            if new_rows:
                rows.extend(new_rows)
                if on_rows is not None:
                    on_rows(new_rows)
                maybe_publish()
                best = best_C()
                if best is not None and parked:
                    released = [task for task in parked if paths[task[1][0]].Cs[task[1][1] - 1] < best]
                    parked.clear()
            if (
                path.warm
                and split
                and stop < len(path.Cs)
                and len(records) == stop - start
                and records[-1].stop_reason != StopReason.CANCELED.value
            ):
                # at each C the slowest fold's fit goes first (its last fit is likeliest to run alone at the end)
                priority = (stop, -records[-1].seconds, path.fold, p)
                return released + [(priority, (p, stop, stop + 1, state))]
            return released

        maybe_publish(force=True)
        try:
            run_task_graph(
                run_task,
                tasks,
                n_processes=n_processes,
                deadline=deadline,
                cancel_requested=cancel_requested,
                on_done=on_done,
                on_point=None if on_point is None else (lambda index, point: on_point(point)),
                start_after_deadline=False,
            )
        finally:
            self.warm_rows = None  # the states that name rows are gone with the graph
        for (fold, gamma_index, C), fits in cold.items():
            if len(fits) == self.n_problems(fold):
                for row in rows:
                    if row["fold"] == fold and row["C"] == C and row["gamma"] == self.gammas[gamma_index]:
                        row["cold_n_iter"] = int(sum(f.n_iter for f in fits.values()))
        rows.sort(key=lambda row: (row["fold"], row["gamma"] if row["gamma"] is not None else -1.0, row["C"]))
        maybe_publish(force=True)
        return rows

    def score_cell(self, fold: int, decisions: np.ndarray, ranking: dict | None) -> float:
        """The search metric of a fold's held-out decision values (rows x problems)."""
        return score_decisions(
            self.metric,
            self.task,
            self.fold_labels[fold],
            decisions,
            self.held_y[fold],
            self.held_qid[fold],
            ranking,
            one_vs_one=self.one_vs_one,
        )

    def cell_row(self, fold: int, gamma, fits: dict[int, FitRecord]) -> dict:
        """Score one (fold, setting) cell from its problems' held-out decision values (or the score its one fit
        brought)."""
        ordered = [fits[k] for k in range(len(fits))]
        if len(ordered) == 1 and ordered[0].score is not None:
            score = ordered[0].score
        elif any(f.decisions is None for f in ordered):
            score = math.nan  # a fit cut short before it settled was not scored (``fit_segment``)
        else:
            columns = [f.decisions for f in ordered if f.decisions is not None]
            assert len(columns) == len(ordered), "every fit of a cell reports its held-out decision values"
            score = self.score_cell(fold, np.column_stack(columns), ordered[0].ranking)
        reasons = Counter(f.stop_reason for f in ordered)
        return {
            "C": ordered[0].C,
            "gamma": gamma,
            "fold": fold,
            "score": score,
            "n_iter": int(sum(f.n_iter for f in ordered)),
            "seconds": float(sum(f.seconds for f in ordered)),
            "warm_started": any(f.warm_started for f in ordered),
            "stop_reason": worst_stop_reason(reasons),
            "stop_reasons": dict(reasons),
            "unsettled": sum(not settled(f.stop_reason, f.gap_rel) for f in ordered),
        }

    # -- the refit --------------------------------------------------------------------------------

    def refit(self, results_table: dict, *, n_processes: int, deadline, cancel_requested, sink) -> TrainingOutcome:
        """Train the best setting on all the data (see the module docstring); the table goes into the metadata."""
        best = results_table["best"]
        if best is None:
            raise SearchIncomplete(incomplete_message(results_table, self.params.max_seconds, n_processes))
        refit_params = self.setting(best["C"], best.get("gamma"))
        path = [C for C in self.Cs if C <= best["C"]] if self.refit_walks else [best["C"]]
        n_full = n_binary_problems(np.asarray(self.arrays["y"]))
        ran = [self.full_results.get((k, best["C"])) for k in range(n_full)]
        stopped = (StopReason.DEADLINE, StopReason.CANCELED)
        if all(result is not None and result.stop_reason not in stopped for result in ran):
            # the refit's path ran with the search (cut short there, by the search's share of the deadline, the
            # refit runs again below with the job's own)
            outcome, walked = self._refit_from_search(refit_params, best["C"], n_full, sink)
        elif len(path) == 1:
            outcome = train_model(
                self.solver,
                refit_params,
                self.arrays,
                self.n_features,
                deadline=deadline,
                cancel_requested=cancel_requested,
                sink=sink,
                n_processes=n_processes,
                phase="refitting the best setting",
            )
            walked = {"C": path, "n_iter": [outcome.meta.get("n_iter")]}
        else:
            outcome, walked = self._refit_path(
                refit_params,
                path,
                n_processes=n_processes,
                deadline=deadline,
                cancel_requested=cancel_requested,
                sink=sink,
            )
        outcome.meta["search_results"] = results_table
        outcome.meta["refit_params"] = {"C": best["C"], "gamma": best.get("gamma")}
        outcome.meta["warnings"] = search_warnings(results_table)
        outcome.meta["refit_path"] = walked
        return outcome

    def _refit_from_search(self, refit_params: SolverParams, best_C: float, n_full: int, sink):
        """The model from the refit's path that ran with the search (its fit at the best C)."""
        results = [self.full_results[(k, best_C)] for k in range(n_full)]
        labels, _ = binary_problems(np.asarray(self.arrays["y"]))
        estimator = ProblemsEstimator(self.solver, refit_params, n_full)
        sink.estimator = estimator
        sink.set_phase("refitting the best setting")
        for k, result in enumerate(results):
            for point in result.trace:
                sink.add(dict(point), subproblem=k)
            estimator.problem_done(k)
        sink.flush()
        sink.set_phase("scoring training data")
        model_arrays, meta = assemble_model(self.solver, refit_params, results, labels, self.arrays, self.n_features)
        walked_Cs = sorted({C for (_k, C) in self.full_results if C <= best_C})
        walked = {
            "C": walked_Cs,
            "n_iter": [int(sum(self.full_results[(k, C)].n_iter for k in range(n_full))) for C in walked_Cs],
            "ran_with_search": True,
            "fits_beyond_best": len({C for (_k, C) in self.full_results if C > best_C}),
        }
        return TrainingOutcome(StopReason(meta["stop_reason"]), model_arrays, meta), walked

    def _refit_path(self, refit_params: SolverParams, path: list, *, n_processes, deadline, cancel_requested, sink):
        previous, previous_C = None, None
        walked: dict[str, list] = {"C": [], "n_iter": []}
        estimator = ProblemsEstimator(self.solver, refit_params, n_binary_problems(np.asarray(self.arrays["y"])))
        sink.estimator = estimator
        sink.set_phase("refitting the best setting")

        def on_point(k: int, point: dict) -> None:
            sink.subproblem = k
            sink.add(point)

        for i, C in enumerate(path):
            last = i == len(path) - 1
            labels, results = fit_problems(
                self.solver,
                refit_params.model_copy(update={"C": C}),
                self.arrays,
                self.n_features,
                deadline=deadline,
                cancel_requested=cancel_requested,
                on_point=on_point if last else (lambda k, point: None),
                n_processes=n_processes,
                warm=previous,
                warm_C=previous_C,
                on_problem_done=estimator.problem_done if last else None,
            )
            done = [r for r in results if r is not None]
            if len(done) < len(results):
                sink.flush()
                return TrainingOutcome(StopReason.CANCELED, None, {"n_iter": sum(r.n_iter for r in done)}), walked
            walked["C"].append(C)
            walked["n_iter"].append(int(sum(r.n_iter for r in done)))
            stopped = any(r.stop_reason is StopReason.CANCELED for r in done)
            if last or stopped:
                break
            previous, previous_C = done, C
        sink.flush()
        sink.set_phase("scoring training data")
        model_arrays, meta = assemble_model(
            self.solver, refit_params.model_copy(update={"C": C}), done, labels, self.arrays, self.n_features
        )
        return TrainingOutcome(StopReason(meta["stop_reason"]), model_arrays, meta), walked


class SearchIncomplete(Exception):
    """No setting of a search could be evaluated (``table``): the job fails with code ``search_incomplete``."""


def _setting_name(setting: dict) -> str:
    return f"C {setting['C']:g}" + (f", gamma {setting['gamma']:g}" if setting.get("gamma") is not None else "")


def _why_unsettled(settings: list[dict]) -> str:
    reasons: Counter = Counter()
    for setting in settings:
        reasons.update({k: v for k, v in setting["stop_reasons"].items() if k != StopReason.CONVERGED.value})
    words = {"deadline": "the deadline (max_seconds)", "max_iter": "max_iter", "canceled": "a cancel"}
    return ", ".join(f"{n} by {words.get(reason, reason)}" for reason, n in reasons.most_common())


def search_warnings(results_table: dict) -> list[dict]:
    """A ``search_incomplete`` warning when some settings could not be evaluated (their fits not settled)."""
    settings = results_table["settings"]
    missing = [setting for setting in settings if not setting.get("evaluated", True)]
    if not missing:
        return []
    shown = "; ".join(_setting_name(setting) for setting in missing[:8]) + ("; ..." if len(missing) > 8 else "")
    return [
        warning(
            WarningCode.search_incomplete,
            f"{len(missing)} of {len(settings)} settings could not be evaluated ({shown}): fits stopped before their "
            f"stopping rule held ({_why_unsettled(missing)}); the best of the "
            f"{len(settings) - len(missing)} evaluated settings was refit. Give the search more time (max_seconds) or "
            "iterations to rank them all",
        )
    ]


def incomplete_message(results_table: dict, max_seconds: float | None, n_processes: int) -> str:
    """Why a search has no setting to refit, and what it would have needed (the deadline, or max_iter)."""
    settings = results_table["settings"]
    if not settings:
        return "the search scored no setting before it stopped: give it more time (max_seconds)"
    fits = int(sum(setting["folds_done"] for setting in settings))
    unsettled = int(sum(setting.get("unsettled_fits", 0) for setting in settings))
    if not unsettled:
        return f"no setting could be scored with metric {results_table['metric']!r} (every fold lacked what it needs)"
    seconds = float(sum(setting["seconds"] for setting in settings))
    message = (
        f"no setting of the search could be evaluated: {unsettled} of its {fits} cross-validation fits (fold x "
        f"setting) stopped before their stopping rule held ({_why_unsettled(settings)}), and a setting is ranked only "
        "when the fits of all its folds settled"
    )
    if max_seconds is not None and "deadline" in _why_unsettled(settings):
        per_process = seconds / max(1, n_processes)
        message += (
            f". The fits ran {seconds:.1f} s of solver time on {n_processes} process(es) under max_seconds "
            f"{max_seconds:g} and were still unfinished: the search needs more than that; try max_seconds "
            f"{max(4 * max_seconds, 4 * per_process):.0f} or more, fewer settings, or fewer folds (search.cv_folds)"
        )
    else:
        message += ". Raise max_iter, or check that the grid's C values are not far larger than the data needs"
    return message


RULED_OUT_STANDARD_ERRORS = 2.0
"""The grid's largest C is ruled out when its predecessor trails the best by more than this many standard errors."""


def largest_c_ruled_out(rows: list[dict], cv_folds: int) -> bool:
    """Whether the fold scores known so far make the grid's largest C unlikely to win.

    Among the settings scored on every fold, the largest C is compared with the best: it is ruled out when
    its mean trails the best's by more than ``RULED_OUT_STANDARD_ERRORS`` standard errors of the paired
    per-fold differences (scores past their peak, and clearly so). While the scores still rise, or are flat
    within their noise, the largest C may yet win. Rows are the table's (one per fold and setting)."""
    by_C: dict[float, dict[int, float]] = {}
    for row in rows:
        by_C.setdefault(row["C"], {})[row["fold"]] = row["score"]
    complete = {
        C: scores
        for C, scores in by_C.items()
        if len(scores) == cv_folds and all(math.isfinite(score) for score in scores.values())
    }
    if len(complete) < 2:
        return False
    means = {C: float(np.mean(list(scores.values()))) for C, scores in complete.items()}
    best = max(means, key=lambda C: (means[C], -C))
    largest = max(complete)
    if largest == best:
        return False
    folds = sorted(complete[best])
    differences = np.array([complete[largest][f] - complete[best][f] for f in folds])
    standard_error = float(differences.std(ddof=1)) / math.sqrt(differences.size)
    return float(differences.mean()) < -RULED_OUT_STANDARD_ERRORS * standard_error


def worst_stop_reason(reasons: Counter | dict) -> str:
    """The most telling stop reason among fits: max_iter over canceled over deadline over converged."""
    present = [reason for reason in STOP_SEVERITY if reasons.get(reason)]
    return present[-1] if present else StopReason.CONVERGED.value


def run_search(
    solver: str, params: SolverParams, arrays: dict, n_features: int, *, deadline, cancel_requested, sink, publish
) -> TrainingOutcome:
    """Cross-validate the grid, publish the table as it fills, refit the best; see the module docstring."""
    search = Search(solver, params, arrays, n_features)
    processes = search.params.n_processes or available_cores()
    search_work = FitCount(len(search.Cs) * len(search.gammas) * search.cv_folds)
    sink.estimator, sink.base, sink.span = search_work, 0.0, search_work.total / (search_work.total + 1.0)
    sink.set_phase("cross-validating")  # the refit weighs one fit

    def on_rows(new_rows: list[dict]) -> None:
        search_work.done += len(new_rows)

    cv_deadline = deadline
    if deadline is not None:
        # the refit gets a share of what is left, as one more fold would (it is one fit on all the rows): cut at
        # the job's deadline, it would return a model of its first iterations
        now = time.monotonic()
        cv_deadline = now + max(0.0, deadline - now) * search.cv_folds / (search.cv_folds + 1.0)
    rows = search.run(
        n_processes=processes,
        deadline=cv_deadline,
        cancel_requested=cancel_requested,
        publish=publish,
        on_rows=on_rows,
        on_point=lambda point: sink.add(point, subproblem=point.get("subproblem", 0)),
        flush=sink.flush,
    )
    sink.flush()
    results_table = table(rows, search.metric, search.search, search.warm)
    if cancel_requested():
        return TrainingOutcome(StopReason.CANCELED, None, {"search_results": results_table})
    sink.base, sink.span = sink.span, 1.0 - sink.span
    sink.tags = {"stage": "refit"}
    return search.refit(
        results_table, n_processes=processes, deadline=deadline, cancel_requested=cancel_requested, sink=sink
    )


class FitCount:
    """The fraction of a search's cross-validation done: (fold, setting) cells scored over all cells."""

    def __init__(self, total: int):
        self.total = max(1, total)
        self.done = 0

    def fraction(self) -> float:
        """Cells scored over all."""
        return min(1.0, self.done / self.total)


def table(rows: list[dict], metric: str, search: SearchParams, warm: bool) -> dict:
    """Per setting over the folds scored so far: mean, standard deviation, cost, stop reasons; and the best setting.

    Only *evaluated* settings are ranked: scored on every fold, each of their fits settled (its stopping rule
    held, or its certified gap is at most ``core.scoring.quality.SETTLED_GAP_REL``). A fit cut by the deadline
    after one iteration scores whatever its first step gave, and such scores once chose the "best" setting of a
    search that ran out of time; ``unsettled_fits`` counts the fits that were not settled.

    ``iterations_saved`` is measured (``search.measure_cold``): fold 0's cold fits minus its warm fits;
    otherwise it is null and ``iterations_saved_basis`` says so.
    """
    settings = []
    key = lambda row: (row["C"], row["gamma"] if row["gamma"] is not None else -1.0)  # noqa: E731
    for (C, gamma), grouped in itertools.groupby(sorted(rows, key=key), key=key):
        group = sorted(grouped, key=lambda row: row["fold"])
        scores = np.array([row["score"] for row in group], dtype=np.float64)
        finite = scores[np.isfinite(scores)]
        reasons: Counter = Counter()
        for row in group:
            reasons.update(row.get("stop_reasons") or {row["stop_reason"]: 1})
        measured = [row for row in group if row.get("cold_n_iter") is not None]
        unsettled = int(sum(row.get("unsettled", 0) for row in group))
        settings.append(
            {
                "C": C,
                "gamma": None if gamma == -1.0 else gamma,
                "mean": float(finite.mean()) if finite.size else None,
                "std": float(finite.std()) if finite.size else None,
                "fold_scores": [None if not math.isfinite(s) else float(s) for s in scores],
                "folds_done": len(group),
                "n_iter": int(sum(row["n_iter"] for row in group)),
                "seconds": float(sum(row["seconds"] for row in group)),
                "warm_started_fits": int(sum(row["warm_started"] for row in group)),
                "stop_reason": worst_stop_reason(reasons),
                "stop_reasons": dict(sorted(reasons.items())),
                "unsettled_fits": unsettled,
                "evaluated": bool(finite.size) and len(group) == search.cv_folds and unsettled == 0,
                "cold_n_iter": int(sum(row["cold_n_iter"] for row in measured)) if measured else None,
                "iterations_saved": int(sum(row["cold_n_iter"] - row["n_iter"] for row in measured))
                if measured
                else None,
                "iterations_saved_basis": (
                    f"measured: fold {', '.join(str(r['fold']) for r in measured)} refitted cold"
                    if measured
                    else "not measured (set search.measure_cold)"
                ),
            }
        )
    complete = [s for s in settings if s["evaluated"]]
    best = None
    if complete:
        best_row = min(complete, key=lambda s: (-s["mean"], s["C"], s["gamma"] if s["gamma"] is not None else 0.0))
        best = {"C": best_row["C"], "gamma": best_row["gamma"], "mean": best_row["mean"], "std": best_row["std"]}
    return {"metric": metric, "cv_folds": search.cv_folds, "warm_start": warm, "settings": settings, "best": best}

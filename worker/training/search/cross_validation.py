"""The grid's cross-validation: ``Search`` runs the paths of fits over the processes and scores the (fold,
setting) cells; ``worker.training.search.run`` is a search job from the grid to the refit (see the package docstring)."""

from __future__ import annotations

import dataclasses
import math
import time
from collections import Counter

import numpy as np

from core.schemas.enums import Task
from core.schemas.search_params import SearchParams
from core.schemas.solver_params import SolverParams
from core.scoring.quality import settled
from core.solvers import spec_of
from worker.runtime.subtasks import SharedRows, SubtaskContext, run_task_graph
from worker.solvers.common import SolverControl, SolverResult, StopReason
from worker.training import registry
from worker.training.context import FitContext
from worker.training.crammer_singer import fit_rows as fit_crammer_singer_rows
from worker.training.crammer_singer import scores_of, uses_crammer_singer
from worker.training.fit import resolve_kernel
from worker.training.folds import held_out_decisions, make_folds, subset
from worker.training.problems import class_weight_pairs, n_binary_problems, one_vs_one_weight_pairs, uses_one_vs_one
from worker.training.search.fits import ALL_ROWS, FitPath, FitRecord, FoldCache, restored, warm_state
from worker.training.search.table import default_metric, largest_c_ruled_out, score_decisions, table, worst_stop_reason

PATHS_PER_PROCESS = 4
"""A path is one task when there are at least this many paths per process; else each fit is a task."""
PUBLISH_EVERY_S = 0.2
LAST_POINT_ONLY = 2**62
"""``trace_every`` of a cross-validation fit without ``search.trace_fits``: it records its last point only."""


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
        self.pairwise = self.task in (Task.ordinal, Task.roc_area, Task.ranking)
        self.metric = search.metric or default_metric(self.task)
        self.cv_folds = int(search.cv_folds)
        base_params = resolve_kernel(params.model_copy(update={"search": None}), arrays, n_features)
        self.base_params = base_params
        self.Cs = tuple(sorted(float(c) for c in (search.C or [params.C])))
        kernel = getattr(base_params, "kernel", None)
        self.gammas: list[float | str | None] = list(search.gamma) if search.gamma else [getattr(kernel, "gamma", None)]
        self.crammer_singer = uses_crammer_singer(base_params)
        """ocas's Crammer-Singer problem: one fit per fold over every label (cold: its warm start is not ocas's)."""
        self.warm = bool(search.warm_start) and spec_of(solver).warm_start is not None and not self.crammer_singer
        self.measure_cold = bool(search.measure_cold) and self.warm
        y = np.asarray(arrays["y"])
        qid = np.asarray(arrays["qid"]) if self.task == Task.ranking and "qid" in arrays else None
        self.folds = make_folds(y, qid, self.cv_folds, search.seed, stratified=self.task != Task.regression)
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
        if labels is None or labels.size == 2 or self.crammer_singer:
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
            state = (state[0], restored(state[1], self.warm_rows))
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
            if self.crammer_singer:
                assert uses_crammer_singer(setting)
                result = fit_crammer_singer_rows(setting, train, fold_data["labels"], self.n_features, control)
                ranking = None
            elif self.task == Task.classification:
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
                    **start_args,
                    **({"qid": train.get("qid") if self.task == Task.ranking else None} if self.pairwise else {}),
                )
                if self.pairwise:  # a pairwise model scores with no offset
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
                if self.crammer_singer:
                    decisions = scores_of(
                        result,
                        fold_data["held_matrix"],
                        values,
                        train=train,
                        params=setting,
                        n_features=self.n_features,
                    )
                elif values is not None:
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
                    cell = decisions[:, None] if decisions.ndim == 1 else decisions  # Crammer-Singer: its K scores
                    score = self.score_cell(path.fold, cell, ranking)
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
            state = (C, warm_state(result, self.warm_rows, row)) if path.warm and i + 1 < len(path.Cs) else None
            if result.stop_reason in (StopReason.CANCELED, StopReason.DEADLINE):
                break  # the path's next fits would stop at once
        return records, state

    def run(
        self,
        context: FitContext,
        *,
        publish,
        folds: list[int] | None = None,
        gamma_indices: list[int] | None = None,
        on_rows=None,
        on_point=None,
        flush=None,
    ) -> list[dict]:
        """Run the paths (all, or those of ``folds`` and ``gamma_indices``) under ``context`` (its deadline, cancel
        poll and processes); returns the table rows (one per fold and setting).

        ``publish(table, subtasks)`` gets the table as it fills (throttled, and ``flush()`` is called with
        it); ``on_rows(rows)`` gets the rows of each completed (fold, setting) cell; ``on_point(point)``
        every fit's trace points, tagged with ``stage: search``, the fold, C, gamma and the binary problem.
        """
        n_processes = self.processes = context.processes(self.params)
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
                deadline=context.deadline,
                cancel_requested=context.cancel_requested,
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

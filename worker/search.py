"""Model selection: cross-validate a grid of C (and gamma) values, then refit the best on all the data.

Folds are stratified by label (each label's rows shuffled with the search seed and dealt round
robin), or grouped by qid for ranking (whole queries dealt round robin), so that a fold never
splits a query. The work is cut into subtasks for ``worker.subtasks``: one per (fold, gamma, run
of consecutive C values). Inside a subtask the C values are fitted in increasing order and, for
dcd and ocas with ``warm_start``, each fit starts from the previous one's solution (dcd: dual
variables scaled by the ratio of the C values; ocas: weights); runs are cut so that there are about TARGET_SUBTASKS
subtasks whatever the process count (so the table does not depend on it), which keeps the
processes busy at the cost of a cold start per run. Each
fit is scored on its held-out fold with the search metric; the table (mean and standard deviation
per setting, the fold scores, iterations and seconds) is published to the job as it fills. The
best setting (highest mean; ties go to the smaller C, then the smaller gamma) is refit on all the
data and becomes the job's model, with the table in its metadata as ``search_results``.
"""

from __future__ import annotations

import itertools
import math
import time

import numpy as np
import scipy.sparse as sp

from service.scoring import metrics
from service.scoring.models import Scorer, csr
from worker import registry
from worker.solvers.common import SolverControl, StopReason
from worker.subtasks import SubtaskContext, available_cores, run_subtasks
from worker.training import TrainingOutcome, assemble_model, fit_problems, resolve_kernel, train_model

WARM_SOLVERS = ("dcd", "ocas")
TARGET_SUBTASKS = 16
"""Runs of C are cut so that a search has at least about this many subtasks (independent of the process
count, so that a search gives the same table with any number of processes)."""


def task_of(solver: str, params: dict) -> str:
    """classification, or cpa's pairwise objective."""
    return params.get("objective", "classification") if solver == "cpa" else "classification"


def default_metric(task: str) -> str:
    """accuracy for classification, pairwise_accuracy otherwise."""
    return "accuracy" if task == "classification" else "pairwise_accuracy"


def make_folds(y: np.ndarray, qid: np.ndarray | None, k: int, seed: int) -> np.ndarray:
    """Fold number of every row: stratified by label, or whole qid groups when qid is given."""
    rng = np.random.default_rng(seed)
    folds = np.empty(y.size, dtype=np.int64)
    if qid is not None:
        groups = np.unique(qid)
        rng.shuffle(groups)
        fold_of_group = {g: i % k for i, g in enumerate(groups)}
        return np.array([fold_of_group[q] for q in qid], dtype=np.int64)
    offset = 0
    for label in np.unique(y):
        rows = np.flatnonzero(y == label)
        rng.shuffle(rows)
        folds[rows] = (np.arange(rows.size) + offset) % k
        offset += rows.size
    return folds


def subset(arrays: dict, rows: np.ndarray, n_features: int) -> dict:
    """The arrays of a subset of rows (kernels' dtypes: int64 indptr, int32 indices, float64 data)."""
    matrix = csr(arrays, n_features)[rows]
    out = {
        "indptr": matrix.indptr.astype(np.int64),
        "indices": matrix.indices.astype(np.int32),
        "data": matrix.data.astype(np.float64),
        "y": np.asarray(arrays["y"])[rows],
    }
    if "qid" in arrays:
        out["qid"] = np.asarray(arrays["qid"])[rows]
    return out


def fold_score(metric: str, task: str, scorer: Scorer, held_out: dict, n_features: int) -> float:
    """The metric of a fitted model on the held-out rows (nan when undefined there, e.g. one class)."""
    matrix = sp.csr_matrix((held_out["data"], held_out["indices"], held_out["indptr"]),
                           shape=(held_out["indptr"].size - 1, n_features))
    y = held_out["y"]
    predicted, scores = scorer.predict_values(matrix)
    value = None
    if metric == "accuracy":
        value = float(np.mean(predicted == y))
    elif metric == "pairwise_accuracy":
        qid = held_out.get("qid") if task == "ranking" else None
        value = metrics.pairwise_accuracy(scores, y, qid)
    elif task != "classification":
        positive = y == y.max()
        value = metrics.roc_auc(scores, positive) if metric == "roc_auc" else None
    else:
        report = metrics.classification_report(y, predicted, scores, scorer.labels)
        value = report[metric]
    return float("nan") if value is None else float(value)


def plan_subtasks(folds: int, gammas: list, Cs: list, warm: bool) -> list[tuple[int, object, list]]:
    """(fold, gamma, C run) triples: runs of increasing C, cut so that there are enough subtasks."""
    Cs = sorted(Cs)
    base = folds * len(gammas)
    pieces = min(len(Cs), max(1, math.ceil(TARGET_SUBTASKS / base))) if warm else len(Cs)
    runs = [list(run) for run in np.array_split(np.asarray(Cs), pieces) if len(run)]
    # Largest C first: fits get slower as C grows, and starting the longest subtasks first keeps the
    # processes evenly busy to the end (longest-processing-time-first scheduling).
    runs.sort(key=lambda run: -run[-1])
    return [(fold, gamma, [float(c) for c in run]) for run in runs for gamma in gammas for fold in range(folds)]


def run_search(solver: str, params: dict, arrays: dict, n_features: int, *, deadline, cancel_requested, sink,
               publish) -> TrainingOutcome:
    """Cross-validate the grid, publish the table as it fills, refit the best; see the module docstring."""
    search = params["search"]
    prepared = prepare(solver, params, arrays, n_features)
    task, metric, base_params = prepared["task"], prepared["metric"], prepared["base_params"]
    warm, folds = prepared["warm"], prepared["folds"]
    processes = params.get("n_processes") or available_cores()
    plan = plan_subtasks(search["cv_folds"], prepared["gammas"], prepared["Cs"], warm)

    def run_path(task_spec, context: SubtaskContext) -> list[dict]:
        fold, gamma, run = task_spec
        return score_run(solver, base_params, arrays, n_features, folds, fold, gamma, run, task=task, metric=metric,
                         warm=warm, deadline=context.deadline, cancel_requested=context.cancel_requested,
                         record_point=context.record_point)

    finished: list[dict] = []
    done_indices: set[int] = set()
    cv = SubtaskCount(len(plan))
    n_fits = len(prepared["Cs"]) * len(prepared["gammas"]) * search["cv_folds"]
    sink.estimator, sink.base, sink.span = cv, 0.0, n_fits / (n_fits + 1.0)  # the refit weighs one fit

    def on_done(index: int, rows: list[dict]) -> None:
        finished.extend(rows)
        done_indices.add(index)
        cv.done = len(done_indices)
        publish(table(finished, metric, search, warm), {"done": len(done_indices), "total": len(plan)})
        sink.flush()

    publish(table([], metric, search, warm), {"done": 0, "total": len(plan)})
    sink.set_phase("cross-validating")
    run_subtasks(run_path, plan, n_processes=processes, deadline=deadline, cancel_requested=cancel_requested,
                 on_point=lambda index, point: sink.add(point, subproblem=point.get("subproblem", 0)), on_done=on_done)
    sink.flush()
    results_table = table(finished, metric, search, warm)
    if cancel_requested():
        return TrainingOutcome(StopReason.CANCELED, None, {"search_results": results_table})
    sink.base, sink.span = sink.span, 1.0 - sink.span
    sink.tags = {"stage": "refit"}
    return refit_best(solver, base_params, results_table, arrays, n_features, deadline=deadline,
                      cancel_requested=cancel_requested, sink=sink, n_processes=processes)


class SubtaskCount:
    """The fraction of a search's cross-validation done: subtasks finished over subtasks."""

    def __init__(self, total: int):
        self.total = max(1, total)
        self.done = 0

    def fraction(self) -> float:
        """Subtasks done over all."""
        return self.done / self.total


def prepare(solver: str, params: dict, arrays: dict, n_features: int) -> dict:
    """Everything a search needs besides the data: task, metric, grid, folds, base parameters."""
    search = params["search"]
    task = task_of(solver, params)
    base_params = {key: value for key, value in params.items() if key != "search"}
    if solver in registry.KERNEL_SOLVERS:
        base_params["kernel"] = resolve_kernel(base_params["kernel"], arrays, n_features)
    y = np.asarray(arrays["y"])
    qid = np.asarray(arrays["qid"]) if task == "ranking" and "qid" in arrays else None
    return {
        "task": task,
        "metric": search.get("metric") or default_metric(task),
        "base_params": base_params,
        "Cs": sorted(search.get("C") or [params["C"]]),
        "gammas": search.get("gamma") or [base_params.get("kernel", {}).get("gamma")],
        "warm": bool(search.get("warm_start", True)) and solver in WARM_SOLVERS,
        "folds": make_folds(y, qid, search["cv_folds"], search.get("seed", 0)),
    }


def score_run(solver: str, base_params: dict, arrays: dict, n_features: int, folds: np.ndarray, fold: int, gamma,
              run: list, *, task: str, metric: str, warm: bool, deadline, cancel_requested,
              record_point=None) -> list[dict]:
    """Fit the C values of ``run`` in increasing order on every fold but ``fold``, score each on ``fold``.

    ``record_point(point)`` receives every fit's trace points, tagged with ``stage: search``, the fold,
    C and gamma (and the binary problem, in one-vs-rest).
    """
    record = record_point or (lambda point: None)
    train = subset(arrays, np.flatnonzero(folds != fold), n_features)
    held_out = subset(arrays, np.flatnonzero(folds == fold), n_features)
    previous, previous_C = None, None
    rows: list[dict] = []
    for C in run:
        setting = dict(base_params, C=C)
        if gamma is not None and "kernel" in setting:
            setting["kernel"] = dict(setting["kernel"], gamma=gamma)
        started = time.perf_counter()
        tags = {"stage": "search", "fold": fold, "C": C, "gamma": gamma}
        if task == "classification":
            labels, results = fit_problems(
                solver, setting, train, n_features, deadline=deadline, cancel_requested=cancel_requested,
                on_point=lambda k, point: record(dict(point, subproblem=k, **tags)), n_processes=1,
                warm=previous if warm else None, warm_C=previous_C,
            )
            if any(r is None for r in results):
                return rows
            model_arrays, meta = assemble_model(solver, setting, results, labels, train, n_features, with_accuracy=False)
            previous, previous_C = results, C
        else:
            control = SolverControl(deadline=deadline, cancel_requested=cancel_requested,
                                    on_point=lambda point: record(dict(point, **tags)))
            result = registry.adapter("cpa")(train["indptr"], train["indices"], train["data"], train["y"],
                                             n_features=n_features, params=setting, class_weight=(1.0, 1.0),
                                             control=control, qid=train.get("qid") if task == "ranking" else None)
            results = [result]
            model_arrays = {"weights": result.w.reshape(1, -1), "offsets": np.zeros(1)}
            meta = {"kind": "ranking", "task": task, "n_features": n_features, "labels": None,
                    "ranks": result.extra.get("ranks"), "thresholds": result.extra.get("thresholds")}
        score = fold_score(metric, task, Scorer(meta, model_arrays), held_out, n_features)
        rows.append({
            "C": C, "gamma": gamma, "fold": fold, "score": score,
            "n_iter": int(sum(r.n_iter for r in results)),
            "seconds": time.perf_counter() - started,
            "warm_started": bool(warm and len(rows) > 0),
            "stop_reason": results[0].stop_reason.value,
        })
        if any(r.stop_reason is StopReason.CANCELED for r in results):
            break
    return rows


def refit_best(solver: str, base_params: dict, results_table: dict, arrays: dict, n_features: int, *, deadline,
               cancel_requested, sink, n_processes: int) -> TrainingOutcome:
    """Train the best setting of the table on all the data; the table goes into the model's metadata."""
    best = results_table["best"]
    if best is None:
        raise RuntimeError(f"no setting could be scored with metric {results_table['metric']!r} (every fold lacked what it needs)")
    refit_params = dict(base_params, C=best["C"])
    if best.get("gamma") is not None and "kernel" in refit_params:
        refit_params["kernel"] = dict(refit_params["kernel"], gamma=best["gamma"])
    outcome = train_model(solver, refit_params, arrays, n_features, deadline=deadline,
                          cancel_requested=cancel_requested, sink=sink, n_processes=n_processes,
                          phase="refitting the best setting")
    outcome.meta["search_results"] = results_table
    outcome.meta["refit_params"] = {"C": best["C"], "gamma": best.get("gamma")}
    return outcome


def table(rows: list[dict], metric: str, search: dict, warm: bool) -> dict:
    """Mean and standard deviation per setting over the folds scored so far, and the best setting."""
    settings = []
    key = lambda row: (row["C"], row["gamma"] if row["gamma"] is not None else -1.0)  # noqa: E731
    for (C, gamma), group in itertools.groupby(sorted(rows, key=key), key=key):
        group = sorted(group, key=lambda row: row["fold"])
        scores = np.array([row["score"] for row in group], dtype=np.float64)
        finite = scores[np.isfinite(scores)]
        settings.append({
            "C": C,
            "gamma": None if gamma == -1.0 else gamma,
            "mean": float(finite.mean()) if finite.size else None,
            "std": float(finite.std()) if finite.size else None,
            "fold_scores": [None if not math.isfinite(s) else float(s) for s in scores],
            "folds_done": len(group),
            "n_iter": int(sum(row["n_iter"] for row in group)),
            "seconds": float(sum(row["seconds"] for row in group)),
            "warm_started_fits": int(sum(row["warm_started"] for row in group)),
        })
    complete = [s for s in settings if s["mean"] is not None and s["folds_done"] == search["cv_folds"]]
    best = None
    if complete:
        best_row = min(complete, key=lambda s: (-s["mean"], s["C"], s["gamma"] if s["gamma"] is not None else 0.0))
        best = {"C": best_row["C"], "gamma": best_row["gamma"], "mean": best_row["mean"], "std": best_row["std"]}
    return {"metric": metric, "cv_folds": search["cv_folds"], "warm_start": warm, "settings": settings, "best": best}

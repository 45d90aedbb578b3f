"""The refit: the best setting trained on all the data, the job's model (see the package docstring: with
dcd's and ocas's warm starts it walks the C path up to the best C, smo fits the best C alone, and a path that
ran with the search gives its fit at the best C)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from core.schemas.enums import Task
from core.schemas.solver_params import SolverParams
from core.storage.documents import ModelDescription
from worker.runtime.progress import ProblemsEstimator
from worker.solvers.common import StopReason
from worker.training.assemble import assemble_model
from worker.training.context import FitContext
from worker.training.fit import TrainingOutcome, fit_problems, train_model
from worker.training.problems import binary_problems, n_binary_problems
from worker.training.search.table import SearchIncomplete, incomplete_message, search_warnings

if TYPE_CHECKING:
    from worker.training.search.cross_validation import Search


def refit(search: Search, results_table: dict, context: FitContext) -> TrainingOutcome:
    """Train the best setting on all the data (see the module docstring); the table goes into the metadata."""
    best = results_table["best"]
    context = replace(context, n_processes=context.processes(search.params))
    if best is None:
        raise SearchIncomplete(
            incomplete_message(results_table, search.params.max_seconds, context.processes(search.params))
        )
    refit_params = search.setting(best["C"], best.get("gamma"))
    path = [C for C in search.Cs if C <= best["C"]] if search.refit_walks else [best["C"]]
    n_full = n_binary_problems(np.asarray(search.arrays["y"])) if search.task == Task.classification else 1
    ran = [search.full_results.get((k, best["C"])) for k in range(n_full)]
    stopped = (StopReason.DEADLINE, StopReason.CANCELED)
    if all(result is not None and result.stop_reason not in stopped for result in ran):
        # the refit's path ran with the search (cut short there, by the search's share of the deadline, the
        # refit runs again below with the job's own)
        outcome, walked = _refit_from_search(search, refit_params, best["C"], n_full, context.progress_sink())
    elif len(path) == 1:
        outcome = train_model(
            search.solver, refit_params, search.arrays, search.n_features, context, phase="refitting the best setting"
        )
        walked = {"C": path, "n_iter": [outcome.model.n_iter]}
    else:
        outcome, walked = _refit_path(search, refit_params, path, context)
    outcome.model.search_results = results_table
    outcome.model.refit_params = {"C": best["C"], "gamma": best.get("gamma")}
    outcome.model.warnings = search_warnings(results_table)
    outcome.model.refit_path = walked
    return outcome


def _refit_from_search(search: Search, refit_params: SolverParams, best_C: float, n_full: int, sink):
    """The model from the refit's path that ran with the search (its fit at the best C)."""
    results = [search.full_results[(k, best_C)] for k in range(n_full)]
    labels, _ = binary_problems(np.asarray(search.arrays["y"]))
    estimator = ProblemsEstimator(search.solver, refit_params, n_full)
    sink.estimator = estimator
    sink.set_phase("refitting the best setting")
    for k, result in enumerate(results):
        for point in result.trace:
            sink.add(dict(point), subproblem=k)
        estimator.problem_done(k)
    sink.flush()
    sink.set_phase("scoring training data")
    model_arrays, model = assemble_model(search.solver, refit_params, results, labels, search.arrays, search.n_features)
    walked_Cs = sorted({C for (_k, C) in search.full_results if C <= best_C})
    walked = {
        "C": walked_Cs,
        "n_iter": [int(sum(search.full_results[(k, C)].n_iter for k in range(n_full))) for C in walked_Cs],
        "ran_with_search": True,
        "fits_beyond_best": len({C for (_k, C) in search.full_results if C > best_C}),
    }
    return TrainingOutcome(StopReason(model.stop_reason), model_arrays, model), walked


def _refit_path(search: Search, refit_params: SolverParams, path: list, context: FitContext):
    """The model at the best C by walking the C path up to it on all the data, each fit warm-started from the last."""
    sink = context.progress_sink()
    previous, previous_C = None, None
    walked: dict[str, list] = {"C": [], "n_iter": []}
    estimator = ProblemsEstimator(search.solver, refit_params, n_binary_problems(np.asarray(search.arrays["y"])))
    sink.estimator = estimator
    sink.set_phase("refitting the best setting")

    def on_point(k: int, point: dict) -> None:
        sink.subproblem = k
        sink.add(point)

    for i, C in enumerate(path):
        last = i == len(path) - 1
        labels, results = fit_problems(
            search.solver,
            refit_params.model_copy(update={"C": C}),
            search.arrays,
            search.n_features,
            context,
            on_point=on_point if last else (lambda k, point: None),
            warm=previous,
            warm_C=previous_C,
            on_problem_done=estimator.problem_done if last else None,
        )
        done = [r for r in results if r is not None]
        if len(done) < len(results):
            sink.flush()
            return TrainingOutcome(
                StopReason.CANCELED, None, ModelDescription(n_iter=sum(r.n_iter for r in done))
            ), walked
        walked["C"].append(C)
        walked["n_iter"].append(int(sum(r.n_iter for r in done)))
        stopped = any(r.stop_reason is StopReason.CANCELED for r in done)
        if last or stopped:
            break
        previous, previous_C = done, C
    sink.flush()
    sink.set_phase("scoring training data")
    model_arrays, model = assemble_model(
        search.solver, refit_params.model_copy(update={"C": C}), done, labels, search.arrays, search.n_features
    )
    return TrainingOutcome(StopReason(model.stop_reason), model_arrays, model), walked

"""A search job: cross-validate the grid (``Search``), publishing the table as it fills, then refit the best
setting (``refit``) under what is left of the job's deadline."""

from __future__ import annotations

import dataclasses
import time

from core.schemas.solver_params import SolverParams
from core.storage.documents import ModelDescription
from worker.solvers.common import StopReason
from worker.training.context import FitContext
from worker.training.fit import TrainingOutcome
from worker.training.search.cross_validation import Search
from worker.training.search.refit import refit
from worker.training.search.table import FitCount, table


def run_search(
    solver: str, params: SolverParams, arrays: dict, n_features: int, context: FitContext, *, publish
) -> TrainingOutcome:
    """Cross-validate the grid, publish the table as it fills, refit the best; see the module docstring."""
    search = Search(solver, params, arrays, n_features)
    context = dataclasses.replace(context, n_processes=context.processes(search.params))
    sink = context.progress_sink()
    search_work = FitCount(len(search.Cs) * len(search.gammas) * search.cv_folds)
    sink.estimator, sink.base, sink.span = search_work, 0.0, search_work.total / (search_work.total + 1.0)
    sink.set_phase("cross-validating")  # the refit weighs one fit

    def on_rows(new_rows: list[dict]) -> None:
        search_work.done += len(new_rows)

    cross_validation = context
    if context.deadline is not None:
        # the refit gets a share of what is left, as one more fold would (it is one fit on all the rows): cut at
        # the job's deadline, it would return a model of its first iterations
        now = time.monotonic()
        share = max(0.0, context.deadline - now) * search.cv_folds / (search.cv_folds + 1.0)
        cross_validation = dataclasses.replace(context, deadline=now + share)
    rows = search.run(
        cross_validation,
        publish=publish,
        on_rows=on_rows,
        on_point=lambda point: sink.add(point, subproblem=point.get("subproblem", 0)),
        flush=sink.flush,
    )
    sink.flush()
    results_table = table(rows, search.metric, search.search, search.warm)
    if context.cancel_requested():
        return TrainingOutcome(StopReason.CANCELED, None, ModelDescription(search_results=results_table))
    sink.base, sink.span = sink.span, 1.0 - sink.span
    sink.tags = {"stage": "refit"}
    return refit(search, results_table, context)

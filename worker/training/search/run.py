"""A search job: cross-validate the grid (``Search``), publishing the table as it fills, then refit the best
setting (``refit``) under what is left of the job's deadline.

A grid over nu or epsilon (``search.nu``, ``search.epsilon``) is a search of its own per value (or pair of values)
over the C and gamma grid, run one after the other on the same folds, each with its share of the cross-validation's
time; their tables are merged (every setting carries its nu and epsilon), and the best setting over all is refit.
"""

from __future__ import annotations

import dataclasses
import itertools
import time

from core.schemas.search_params import SearchParams
from core.schemas.solver_params import SolverParams
from core.storage.documents import ModelDescription
from worker.solvers.common import StopReason
from worker.training.context import FitContext
from worker.training.fit import TrainingOutcome
from worker.training.search.cross_validation import Search
from worker.training.search.refit import refit
from worker.training.search.table import FitCount, search_warnings, table


def grid_values(params: SolverParams) -> list[dict]:
    """The nu and epsilon of each search of the job: [{}] when its search has no grid over them."""
    search = params.search
    assert search is not None, "a search job has params.search"
    axes = {name: values for name in ("nu", "epsilon") if (values := getattr(search, name)) is not None}
    if not axes:
        return [{}]
    names = list(axes)
    return [dict(zip(names, combo)) for combo in itertools.product(*(axes[name] for name in names))]


def run_search(
    solver: str, params: SolverParams, arrays: dict, n_features: int, context: FitContext, *, publish
) -> TrainingOutcome:
    """Cross-validate the grid, publish the table as it fills, refit the best; see the module docstring."""
    values = grid_values(params)
    searches = [Search(solver, params.model_copy(update=fixed), arrays, n_features) for fixed in values]
    first = searches[0]
    context = dataclasses.replace(context, n_processes=context.processes(first.params))
    sink = context.progress_sink()
    search_work = FitCount(sum(len(s.Cs) * len(s.gammas) * s.cv_folds for s in searches))
    sink.estimator, sink.base, sink.span = search_work, 0.0, search_work.total / (search_work.total + 1.0)
    sink.set_phase("cross-validating")  # the refit weighs one fit

    def on_rows(new_rows: list[dict]) -> None:
        search_work.done += len(new_rows)

    tables: list[dict] = []
    cross_validation_end = None
    if context.deadline is not None:
        # the refit gets a share of what is left, as one more fold would (it is one fit on all the rows): cut at
        # the job's deadline, it would return a model of its first iterations
        now = time.monotonic()
        cross_validation_end = now + max(0.0, context.deadline - now) * first.cv_folds / (first.cv_folds + 1.0)
    for index, (fixed, search) in enumerate(zip(values, searches)):
        cross_validation = context
        if cross_validation_end is not None:  # this search's share of what is left of the cross-validation's time
            now = time.monotonic()
            share = max(0.0, cross_validation_end - now) / (len(searches) - index)
            cross_validation = dataclasses.replace(context, deadline=now + share)

        def publish_merged(partial: dict, counts: dict, fixed=fixed) -> None:
            publish(merged([*tables, _tagged(partial, fixed)]), counts)

        rows = search.run(
            cross_validation,
            publish=publish_merged if len(searches) > 1 else publish,
            on_rows=on_rows,
            on_point=lambda point: sink.add(point, subproblem=point.get("subproblem", 0)),
            flush=sink.flush,
        )
        tables.append(_tagged(table(rows, search.metric, search.search, search.warm), fixed))
        if context.cancel_requested():
            break
    sink.flush()
    results_table = merged(tables)
    if context.cancel_requested():
        return TrainingOutcome(StopReason.CANCELED, None, ModelDescription(search_results=results_table))
    sink.base, sink.span = sink.span, 1.0 - sink.span
    sink.tags = {"stage": "refit"}
    return refit_best(searches, tables, values, results_table, context)


def refit_best(
    searches: list[Search], tables: list[dict], values: list[dict], results_table: dict, context: FitContext
) -> TrainingOutcome:
    """Refit the best setting of ``results_table`` (the searches' ``tables`` merged) with the search of its nu /
    epsilon (``values``, as ``grid_values`` gives them); the model keeps the merged table and names its nu /
    epsilon in ``refit_params``."""
    if len(searches) == 1:
        return refit(searches[0], results_table, context)
    best = results_table["best"]
    index = next((k for k, t in enumerate(tables) if best is not None and t["best"] == best), 0)
    outcome = refit(searches[index], tables[index] if best is not None else results_table, context)
    outcome.model.search_results = results_table
    outcome.model.refit_params = {**(outcome.model.refit_params or {}), **values[index]}
    outcome.model.warnings = search_warnings(results_table)
    return outcome


def tables_by_value(rows: list[dict], values: list[dict], metric: str, search: SearchParams, warm: bool) -> list[dict]:
    """The table of each nu / epsilon value's search from rows that carry its index in ``values`` (``value``; a
    row without one is the first value's), tagged with the value."""
    return [
        _tagged(table([row for row in rows if row.get("value", 0) == k], metric, search, warm), fixed)
        for k, fixed in enumerate(values)
    ]


def _tagged(results_table: dict, fixed: dict) -> dict:
    """A search's table with its nu / epsilon on every setting and on its best."""
    if not fixed:
        return results_table
    settings = [{**setting, **fixed} for setting in results_table["settings"]]
    best = None if results_table["best"] is None else {**results_table["best"], **fixed}
    return {**results_table, "settings": settings, "best": best}


def merged(tables: list[dict]) -> dict:
    """The searches' tables as one: every setting, and the best of their bests (highest mean, then the smaller C,
    gamma, nu and epsilon)."""
    if len(tables) == 1:
        return tables[0]
    bests = [t["best"] for t in tables if t["best"] is not None]

    def rank(best: dict) -> tuple:
        return (-best["mean"], best["C"], *(best.get(name) or 0.0 for name in ("gamma", "nu", "epsilon")))

    return {
        **tables[0],
        "settings": [setting for t in tables for setting in t["settings"]],
        "best": min(bests, key=rank) if bests else None,
    }

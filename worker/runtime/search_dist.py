"""Distributed model selection (``params.search.distribute``): every setting of the grid is its own RQ job.

The job's own RQ job (``worker.runtime.jobs.train``) only plans: it enqueues one RQ job per (fold, gamma) of each nu /
epsilon value of the search (``search.nu``, ``search.epsilon``: one value, the job's own, without them)
(``run_setting``: the paths of that fold along the C grid, warm-started as in an in-process search,
see ``worker.training.search``) into the tenant's queue, then a final RQ job
(``finish``) that depends on all of them through RQ's dependencies (``allow_failure``, so it also
runs when a setting failed). Any worker of the deployment takes settings, so a compose deployment
with N workers spreads the search over all N. Each setting appends its fold results to a Redis list
and republishes the job's table (``search_results``, ``subtasks`` done/total; with a nu / epsilon grid, each value's
table tagged and merged as in-process). ``finish`` builds the final table, fails the job if a setting is missing, else
refits the best setting (with its nu / epsilon) on all the data and stores the model like any job. Cancel and the deadline reach every setting (the deadline is the
job's wall-clock start plus ``max_seconds``).

While settings run, no single worker owns the job, so its ``worker`` field is cleared and the
reaper leaves it alone; ``finish`` takes ownership again for the refit. A setting lost with its
worker (kill -9) is noticed by RQ's own abandoned-job handling, after which ``finish`` runs and
fails the job naming the setting. The refit walks the C path as in an in-process search.
"""

from __future__ import annotations

import itertools
import json
import logging
import time

import numpy as np
from rq.job import Dependency

from core.config import get_settings
from core.processes import usable_cores
from core.queueing import JobQueue
from core.schemas.jobs import JobStatus
from core.schemas.search_params import SearchParams
from core.schemas.solver_params import SolverParams
from core.solvers import spec_of
from core.storage import cache, keys
from core.storage.documents import DatasetRecord
from core.storage.job_record import JobRecord
from core.storage.jobs import JobStore
from worker.runtime import core_budget, heartbeat, memory_budget, warmup
from worker.runtime.progress import CancelPoller, TraceSink
from worker.runtime.runs import cancel, fail, job_params, load_dataset, no_core, record_outcome, redis_client, worker_id
from worker.runtime.subtasks import available_cores, reaping
from worker.training import search as search_module
from worker.training.context import FitContext
from worker.training.problems import n_binary_problems, uses_one_vs_one

log = logging.getLogger("hinge.worker")


def _search_of(params: SolverParams) -> SearchParams:
    if params.search is None:
        raise ValueError("a distributed search needs params.search")
    return params.search


def grid_of(params: SolverParams) -> list[tuple[float, float | None]]:
    """The (C, gamma) settings of each nu / epsilon value's search, in a fixed order."""
    search = _search_of(params)
    Cs = sorted(search.C or [params.C])
    return [(C, gamma) for gamma, C in itertools.product(_gammas(search), Cs)]


def _searches(job: JobRecord, params: SolverParams, arrays: dict, n_features: int) -> list:
    """A ``Search`` per nu / epsilon value of the job's search (``grid_values``), on the same folds."""
    return [
        search_module.Search(job.solver, params.model_copy(update=fixed), arrays, n_features)
        for fixed in search_module.grid_values(params)
    ]


def _value_label(fixed: dict) -> str:
    """A nu / epsilon value as it is named in descriptions and messages (" nu=0.1"; "" without a grid over them)."""
    return "".join(f" {name}={number}" for name, number in fixed.items())


def _gammas(search: SearchParams) -> list[float | None]:
    """The search's gamma values, or one None (the job's own kernel, or no kernel)."""
    return list(search.gamma) if search.gamma else [None]


def units_of(params: SolverParams) -> list[tuple[int, int, int]]:
    """The (nu / epsilon value index, fold, gamma index) units of a distributed search, one RQ job each."""
    search = _search_of(params)
    values = range(len(search_module.grid_values(params)))
    return [(v, fold, g) for v in values for fold in range(search.cv_folds) for g in range(len(_gammas(search)))]


def start(jobs: JobStore, client, job: JobRecord, run: int) -> dict:
    """Enqueue one RQ job per (fold, gamma) and a final one depending on them; the job stays running."""
    settings = get_settings()
    job_id = job.id
    params = job_params(job)
    units = units_of(params)
    gammas = _gammas(_search_of(params))
    values = search_module.grid_values(params)
    queue = JobQueue(client, settings).tenant_queue(job.tenant)
    client.delete(keys.job_search_rows(job_id))
    children = []
    for index, (v, fold, g) in enumerate(units):
        children.append(
            queue.enqueue(
                "worker.runtime.search_dist.run_setting",
                job_id,
                run,
                index,
                job_id=f"{job_id}_r{run}_s{index}",
                job_timeout=settings.job_timeout_s,
                result_ttl=3600,
                failure_ttl=7 * 24 * 3600,
                description=f"search {job_id}: fold {fold} gamma={gammas[g]}{_value_label(values[v])}",
            )
        )
    queue.enqueue(
        "worker.runtime.search_dist.finish",
        job_id,
        run,
        job_id=f"{job_id}_r{run}_finish",
        depends_on=Dependency(jobs=children, allow_failure=True),
        job_timeout=settings.job_timeout_s,
        result_ttl=3600,
        failure_ttl=7 * 24 * 3600,
        description=f"search {job_id}: refit the best setting",
    )
    jobs.update(job_id, subtasks={"done": 0, "total": len(units)})
    jobs.clear(job_id, "worker")
    log.info("search distributed over %d (value, fold, gamma) units", len(units))
    return {"status": "distributed", "units": len(units)}


def _deadline(job: JobRecord) -> float | None:
    seconds = job_params(job).max_seconds
    if not seconds:
        return None
    started = job.started_ts or time.time()
    return time.monotonic() + (started + seconds - time.time())


def _load(client, job: JobRecord) -> tuple[DatasetRecord, dict]:
    return load_dataset(JobStore(client), client, job)


def _current(jobs: JobStore, job_id: str, run: int) -> JobRecord | None:
    job = jobs.get(job_id)
    if job is None or job.status is not JobStatus.running or job.attempts != run:
        return None
    return job


@reaping
def run_setting(job_id: str, run: int, index: int) -> dict:
    """The paths of one (value, fold, gamma) unit; its rows go to the job's list and the table is republished."""
    client = redis_client()
    jobs = JobStore(client)
    job = _current(jobs, job_id, run)
    if job is None:
        return {"skipped": "the job is no longer running this search"}
    params = job_params(job)
    value, fold, gamma_index = units_of(params)[index]
    warmup.ensure_solver(job.solver, params)  # the first run on a machine: compiled, or waited for, here
    dataset, arrays = _load(client, job)
    fixed = search_module.grid_values(params)[value]
    search = search_module.Search(job.solver, params.model_copy(update=fixed), arrays, dataset.n_features)
    poller = CancelPoller(jobs, job_id, get_settings().cancel_poll_s)
    # one process unless the job asks for more: the deployment's other workers take the other units
    processes = params.n_processes or 1
    why = f"a setting of a distributed search on {processes} process(es)"
    with core_budget.leased(client, jobs, job_id, worker_id(), processes, why, poller, unit=True) as granted:
        if not granted:
            return {"unit": index, "rows": 0, "stopped": "canceled or stopping while waiting for a core"}
        rows = search.run(
            FitContext(
                None, _deadline(job), poller, processes, memory_budget.data_memory_bytes(get_settings().job_memory)
            ),
            publish=lambda table, subtasks: None,
            folds=[fold],
            gamma_indices=[gamma_index],
        )
    if rows:
        client.rpush(
            keys.job_search_rows(job_id),
            *[json.dumps(dict(row, setting=index, value=value, worker=worker_id())) for row in rows],
        )
    _publish(jobs, client, job, search.metric)
    return {"unit": index, "rows": len(rows)}


def _rows(client, job_id: str) -> list[dict]:
    return [json.loads(raw) for raw in client.lrange(keys.job_search_rows(job_id), 0, -1)]


def _publish(jobs: JobStore, client, job: JobRecord, metric: str) -> tuple[list[dict], dict]:
    """Each nu / epsilon value's table and the job's (merged, ``distributed``, the workers that took part), published."""
    rows = _rows(client, job.id)
    params = job_params(job)
    search = _search_of(params)
    warm = bool(search.warm_start) and spec_of(job.solver).warm_start is not None
    tables = search_module.tables_by_value(rows, search_module.grid_values(params), metric, search, warm)
    results_table = dict(search_module.merged(tables))
    results_table["distributed"] = True
    results_table["workers"] = sorted({row.get("worker") for row in rows if row.get("worker")})
    done = len({row["setting"] for row in rows})
    jobs.update(job.id, search_results=results_table, subtasks={"done": done, "total": len(units_of(params))})
    return tables, results_table


@reaping
def finish(job_id: str, run: int) -> dict:
    """Build the final table, then refit the best setting on all the data and record the job's outcome."""
    settings = get_settings()
    client = redis_client()
    jobs = JobStore(client)
    job = _current(jobs, job_id, run)
    if job is None:
        return {"skipped": "the job is no longer running this search"}
    mine = ("attempts", str(run))
    params = job_params(job)
    cv_folds = _search_of(params).cv_folds
    jobs.update(job_id, worker=worker_id(), started_ts=time.time())
    heartbeat.current_job(job_id)
    try:
        warmup.ensure_solver(job.solver, params)
        dataset, arrays = _load(client, job)
        searches = _searches(job, params, arrays, dataset.n_features)
        tables, results_table = _publish(jobs, client, job, searches[0].metric)
        if jobs.cancel_requested(job_id):
            return cancel(jobs, job_id, mine)
        values = search_module.grid_values(params)
        missing = []
        for fixed, value_table in zip(values, tables):
            scored = {(row["C"], row["gamma"]): row["folds_done"] for row in value_table["settings"]}
            missing += [
                f"C={C} gamma={gamma}{_value_label(fixed)}"
                for C, gamma in grid_of(params)
                if scored.get((C, gamma), 0) < cv_folds
            ]
        if missing:
            return fail(
                jobs,
                job_id,
                mine,
                "search_setting_failed",
                f"{len(missing)} setting(s) of the search did not finish: {', '.join(missing[:5])}",
            )
        sink = TraceSink(jobs, job_id, settings.trace_flush_s, 1 if len(dataset.labels) == 2 else len(dataset.labels))
        sink.run = run
        n_fits = len(grid_of(params)) * len(values) * cv_folds
        sink.base, sink.span, sink.tags = n_fits / (n_fits + 1.0), 1.0 / (n_fits + 1.0), {"stage": "refit"}
        poller = CancelPoller(jobs, job_id, settings.cancel_poll_s)
        y = np.asarray(arrays["y"])
        n_problems = n_binary_problems(y, uses_one_vs_one(params, y))
        wanted, why = core_budget.wanted_cores(job.solver, params, n_problems, usable_cores())
        with core_budget.leased(client, jobs, job_id, worker_id(), wanted, why, poller) as granted:
            if not granted:
                return no_core(jobs, client, job, run, mine, "the refit")
            context = FitContext(
                sink,
                _deadline(job),
                poller,
                params.n_processes or available_cores(),
                memory_budget.data_memory_bytes(settings.job_memory),
            )
            outcome = search_module.refit_best(searches, tables, values, results_table, context)
        return record_outcome(jobs, client, job, dataset, outcome, mine, run, arrays=arrays)
    except cache.DatasetMissing:
        return fail(
            jobs, job_id, mine, "dataset_not_found", f"data set {job.dataset_id} was deleted before the job ran"
        )
    except search_module.SearchIncomplete as exc:
        return fail(jobs, job_id, mine, "search_incomplete", str(exc))
    except Exception as exc:
        log.exception("job %s: the search's refit failed", job_id)
        return fail(jobs, job_id, mine, "solver_error", f"{type(exc).__name__}: {exc}")
    finally:
        heartbeat.current_job(None)

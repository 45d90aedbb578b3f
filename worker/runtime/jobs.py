"""RQ job functions. The queue carries only a job id (JSON serializer); everything else is in Redis.

A run of a job, as ``train`` sees it:

1. Take the job: a fenced transition queued -> running that succeeds only if the RQ job being
   performed is the job's current one (``rq_job_id``: duplicates are skipped) and, when
   ``max_running_jobs_per_tenant`` is set, only while the tenant is under it (else the job goes
   back to the front of its queue). The run number ``attempts`` is incremented; every later write
   of this run is fenced on it, so a run that was declared lost cannot overwrite the run that
   replaced it. The heartbeat process is told which job runs (``worker.runtime.heartbeat``).
2. Lease the cores it can use from its machine's budget (``worker.runtime.core_budget``; it waits, phase
   ``waiting for a core``, while other jobs hold every core), then train, streaming the trace; a
   cancel, the deadline or the worker's SIGTERM stop the solver. The cores go back when it ends.
3. Store the model, then record the outcome (``worker.runtime.runs``, shared with a distributed search's
   RQ jobs in ``worker.runtime.search_dist``). A SIGTERM (``docker stop``) makes the outcome
   ``succeeded`` with stop_reason ``interrupted`` and the best model so far (``shutdown_policy =
   checkpoint``), or puts the job back in the queue (``requeue``, or when the interrupted job has
   no complete model yet); a put-back does not use up the job's ``retries``.
"""

from __future__ import annotations

import functools
import logging
import os
import signal
import time

import numpy as np
import redis
from pydantic import ValidationError

from core.compile_cache import UnitsStopped
from core.config import get_settings
from core.logs import job_id_var
from core.processes import die_with_parent, usable_cores
from core.queueing import JobQueue
from core.schemas.enums import Multiclass, Task
from core.schemas.jobs import WAITING_FOR_COMPILATION, JobStatus
from core.schemas.solver_params import SolverParams
from core.scoring.quality import c_out_of_range
from core.storage import cache
from core.storage.job_record import JobRecord
from core.storage.jobs import JobStore, Transition, utc_now
from core.storage.objects import StoreError
from core.storage.records import model_store
from core.storage.shards import max_row_norm_sq
from worker.runtime import cluster, core_budget, heartbeat, memory_budget, search_dist, subtasks, warmup
from worker.runtime.model_staging import ModelStaging
from worker.runtime.progress import INTERRUPT, CancelPoller, TraceSink
from worker.runtime.runs import (
    cancel,
    end_on_store_error,
    fail,
    hand_back,
    job_params,
    load_dataset,
    no_core,
    record_outcome,
    redis_client,
    worker_id,
)
from worker.solvers.common import SolverInputError
from worker.training.context import FitContext
from worker.training.fit import TrainingOutcome, train_model
from worker.training.search import SearchIncomplete, run_search

log = logging.getLogger("hinge.worker")


@subtasks.reaping  # the job's subtask processes, parked when their work ended: told to exit at its end
def train(job_id: str) -> dict:
    """Run one training job end to end: load data, train, store the model, record the outcome."""
    if os.environ.get("HINGE_WORKER_PID") not in (None, str(os.getpid())):
        die_with_parent(signal.SIGKILL)  # a forked work horse: killed with the worker (its job is retried elsewhere)
        signal.signal(signal.SIGTERM, lambda *_: INTERRUPT.set())  # the worker forwards its SIGTERM
    token = job_id_var.set(job_id)
    heartbeat.current_job(job_id)
    try:
        return _train(job_id)
    finally:
        heartbeat.current_job(None)
        job_id_var.reset(token)


def _current_rq_job_id() -> str | None:
    from rq import get_current_job

    try:
        current = get_current_job()
    except Exception:
        return None
    return current.id if current is not None else None


def _train(job_id: str) -> dict:
    settings = get_settings()
    client = redis_client()
    jobs = JobStore(client)
    job = jobs.get(job_id)
    if job is None:
        return {"skipped": "job record missing"}
    rq_job_id = _current_rq_job_id()
    fence = ("rq_job_id", rq_job_id) if rq_job_id and job.rq_job_id else None
    run = job.attempts + 1
    code = jobs.transition_code(
        job_id,
        (JobStatus.queued,),
        JobStatus.running,
        fence=fence,
        running_cap=settings.max_running_jobs_per_tenant,
        started_at=utc_now(),
        started_ts=time.time(),
        worker=worker_id(),
        attempts=run,
    )
    if code is Transition.AT_RUNNING_CAP:
        JobQueue(client, settings).enqueue(
            job_id, job.tenant, at_front=True, description=f"train {job.solver} on {job.dataset_id}"
        )
        return {"deferred": "tenant at max_running_jobs_per_tenant"}
    if code is not Transition.DONE:
        current = jobs.get(job_id)
        status, current_rq = (current.status.value, current.rq_job_id) if current is not None else (None, None)
        return {"skipped": f"job is {status} (RQ job {rq_job_id}, current {current_rq})"}
    mine = ("attempts", str(run))
    log.info("job started (run %d)", run, extra={"solver": job.solver, "dataset_id": job.dataset_id})
    try:
        params = job_params(job)
    except (KeyError, ValidationError) as exc:
        return fail(
            jobs, job_id, mine, "invalid_params", f"the stored parameters do not fit solver {job.solver}: {exc}"
        )
    if INTERRUPT.is_set():
        return hand_back(jobs, client, job, run, "the worker was stopping when the job started")
    begin = time.monotonic()
    deadline = begin + params.max_seconds if params.max_seconds else None
    if params.search is not None and params.search.distribute:
        try:
            return search_dist.start(jobs, client, job, run)
        except Exception as exc:
            log.exception("job %s: distributing the search failed", job_id)
            return fail(jobs, job_id, mine, "search_error", f"{type(exc).__name__}: {exc}")
    try:
        stopped = _warm_solver(jobs, job, params, settings.cancel_poll_s)
    except Exception as exc:  # a unit that does not compile: the job fails with why, the worker goes on
        log.exception("job %s: the compiled code of %s could not be made ready", job_id, job.solver)
        return fail(
            jobs, job_id, mine, "solver_error", f"compiling the code of {job.solver}: {type(exc).__name__}: {exc}"
        )
    if stopped == "interrupted":
        return hand_back(jobs, client, job, run, "the worker was stopping while the job waited for its kernels")
    if stopped == "canceled":
        return cancel(jobs, job_id, mine, "canceled while waiting for the solver's code to compile: no model")
    staging = ModelStaging(model_store(client, settings), job.tenant)
    try:
        return _train_and_record(jobs, client, job, params, run, mine, deadline, staging)
    finally:
        staging.discard()  # arrays staged ahead that did not become the model (nothing once claimed)


def _nodes_opener(job: JobRecord, params: SolverParams, dataset):
    """How a split training (``params.distributed``) reaches its nodes; None for a training on this machine."""
    split = getattr(params, "distributed", None)
    if split is None:
        return None
    address = get_settings().dask_scheduler
    if not address:
        raise cluster.ClusterError("params.distributed needs a Dask cluster: HINGE_DASK_SCHEDULER is not set here")
    return functools.partial(cluster.DaskNodes, address, split.nodes, dataset, dataset.n_features)


def _train_and_record(
    jobs: JobStore,
    client: redis.Redis,
    job: JobRecord,
    params: SolverParams,
    run: int,
    mine: tuple[str, str],
    deadline: float | None,
    staging: ModelStaging,
) -> dict:
    """Load the data, train within the job's core lease, then store the model and end the job (``_train``'s
    last steps)."""
    settings = get_settings()
    job_id = job.id
    jobs.update(job_id, progress={"phase": "loading data", "fraction": 0.0})
    try:
        dataset, arrays = load_dataset(jobs, client, job)
        out_of_range = _c_out_of_range(job, dataset, arrays)
        if out_of_range is not None:
            return fail(jobs, job_id, mine, "parameter_out_of_range", out_of_range)
        data_memory = memory_budget.data_memory_bytes(settings.job_memory)
        memory_budget.check_fits(job.solver, arrays, data_memory)
        n_labels = len(dataset.labels) if params.task == Task.classification else 2  # else: one problem
        one_vs_one = (
            getattr(params, "multiclass", Multiclass.ovr) == Multiclass.ovo and n_labels > 2
        )  # as problems.uses_one_vs_one
        n_problems = 1 if n_labels <= 2 else n_labels * (n_labels - 1) // 2 if one_vs_one else n_labels
        if getattr(params, "multiclass", None) == "crammer_singer":  # one problem over every label
            n_problems = 1
        sink = TraceSink(jobs, job_id, settings.trace_flush_s, n_problems)
        sink.run = run
        poller = CancelPoller(jobs, job_id, settings.cancel_poll_s)
        wanted, why = core_budget.wanted_cores(
            job.solver,
            params,
            n_problems,
            usable_cores(),
            rows=int(np.asarray(arrays["indptr"]).size) - 1,
            nonzeros=int(np.asarray(arrays["data"]).size),
        )
        with core_budget.leased(client, jobs, job_id, worker_id(), wanted, why, poller) as granted:
            if not granted:
                return no_core(jobs, client, job, run, mine, "the job")
            context = FitContext(
                sink, deadline, poller, data_memory=data_memory, open_nodes=_nodes_opener(job, params, dataset)
            )
            outcome = train_job(job.solver, params, arrays, dataset.n_features, context, stage_model=staging.start)
    except cache.CacheDiskFull as exc:
        log.warning("job %s: %s", job_id, exc)
        return fail(jobs, job_id, mine, "worker_disk_full", str(exc))
    except memory_budget.DataExceedsMemory as exc:
        return fail(jobs, job_id, mine, "data_exceeds_memory", str(exc))
    except cluster.ClusterError as exc:
        log.warning("job %s: %s", job_id, exc)
        return fail(jobs, job_id, mine, "cluster_error", str(exc))
    except cluster.NodeLost as exc:
        log.warning("job %s: %s", job_id, exc)
        return fail(jobs, job_id, mine, "node_lost", str(exc))
    except cache.DatasetMissing:
        return fail(
            jobs, job_id, mine, "dataset_not_found", f"data set {job.dataset_id} was deleted before the job ran"
        )
    except StoreError as exc:
        return end_on_store_error(jobs, client, job, run, mine, exc)
    except SolverInputError as exc:
        return fail(jobs, job_id, mine, "invalid_params", str(exc))
    except SearchIncomplete as exc:
        return fail(jobs, job_id, mine, "search_incomplete", str(exc))
    except redis.exceptions.RedisError:
        raise  # Redis stayed away longer than redis_retry_s: the reaper re-runs the job (not a solver error)
    except Exception as exc:  # the job fails, the worker goes on; details stay in the worker's log
        log.exception("job %s failed", job_id)
        return fail(jobs, job_id, mine, "solver_error", f"{type(exc).__name__}: {exc}")

    if outcome.arrays is not None:
        sink.set_phase("storing model", fraction=1.0)
    return record_outcome(jobs, client, job, dataset, outcome, mine, run, staging, arrays=arrays)


def _c_out_of_range(job: JobRecord, dataset, arrays: dict) -> str | None:
    """Why a C of the job is beyond what its data can use numerically (``core.scoring.quality.c_out_of_range``),
    for data sets stored before the API could tell (their record lacks ``max_row_norm_sq``); None when it is not."""
    if dataset.max_row_norm_sq is not None:
        return None  # the API judged it when it accepted the job
    norm_sq = max_row_norm_sq(arrays["indptr"], np.asarray(arrays["data"]))
    found = c_out_of_range(job.params, dataset.n_samples, norm_sq)
    return None if found is None else found[1]


def _warm_solver(jobs: JobStore, job: JobRecord, params: SolverParams, cancel_poll_s: float) -> str | None:
    """Make the kernels the job needs (its solver's, and its formulation's: ``warmup.ensure_solver``) warm in this
    worker; while another process compiles them the job's progress says ``waiting for compilation``. Returns None, or why the wait was given up:
    ``canceled`` (a cancel request) or ``interrupted`` (the worker is stopping)."""
    poller = CancelPoller(jobs, job.id, cancel_poll_s)

    def waiting(unit) -> None:
        log.info("waiting for the compiled code of %s (another process compiles it)", unit.name)
        waiting = {"phase": WAITING_FOR_COMPILATION, "fraction": 0.0, "compiling": unit.name, "kernels": unit.name}
        jobs.update(job.id, progress=waiting)

    try:
        warmup.ensure_solver(job.solver, params, should_stop=poller, on_wait=waiting)
    except UnitsStopped:
        return "interrupted" if INTERRUPT.is_set() else "canceled"
    return None


def train_job(
    solver: str, params: SolverParams, arrays: dict, n_features: int, context: FitContext, *, stage_model=None
) -> TrainingOutcome:
    """A job's training in this process: a model selection when ``params.search`` is set, else one model
    (``stage_model``: see ``worker.training.fit.train_model``; a search does not stage)."""
    if params.search is not None:
        sink = context.progress_sink()

        def publish(results_table: dict, subtasks: dict) -> None:
            sink.jobs.update(sink.job_id, search_results=results_table, subtasks=subtasks)

        return run_search(solver, params, arrays, n_features, context, publish=publish)
    return train_model(solver, params, arrays, n_features, context, stage_model=stage_model)

"""RQ job functions. The queue carries only a job id (JSON serializer); everything else is in Redis.

A run of a job, as ``train`` sees it:

1. Take the job: a fenced transition queued -> running that succeeds only if the RQ job being
   performed is the job's current one (``rq_job_id``: duplicates are skipped) and, when
   ``max_running_jobs_per_tenant`` is set, only while the tenant is under it (else the job goes
   back to the front of its queue). The run number ``attempts`` is incremented; every later write
   of this run is fenced on it, so a run that was declared lost cannot overwrite the run that
   replaced it. The heartbeat process is told which job runs (``worker.heartbeat``).
2. Train, streaming the trace; a cancel, the deadline or the worker's SIGTERM stop the solver.
3. Store the model, then record the outcome. A SIGTERM (``docker stop``) makes the outcome
   ``succeeded`` with stop_reason ``interrupted`` and the best model so far (``shutdown_policy =
   checkpoint``), or puts the job back in the queue (``requeue``, or when the interrupted job has
   no complete model yet); a put-back does not use up the job's ``retries``.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys
import time

import redis

from service.config import get_settings
from service.logs import job_id_var
from service.queueing import JobQueue
from service.storage import keys
from service.storage.connection import resilient_client
from service.storage.jobs import JobStore, utc_now
from service.storage.keys import new_id
from service.storage.records import dataset_store, model_store
from worker import datacache, heartbeat, training
from worker.progress import INTERRUPT, CancelPoller, TraceSink
from worker.solvers.common import SolverInputError, StopReason

log = logging.getLogger("hinge.worker")

_client: redis.Redis | None = None


def _redis() -> redis.Redis:
    global _client
    if _client is None:
        settings = get_settings()
        _client = resilient_client(settings.redis_url, settings.redis_retry_s)
    return _client


def worker_id() -> str:
    """This worker's id (set by ``hinge worker``; host and pid otherwise)."""
    return os.environ.get("HINGE_WORKER_ID") or f"{os.uname().nodename}:{os.getpid()}"


def _die_with_parent_now() -> None:
    """A forked work horse: SIGKILL it when the worker dies (a dead worker's job is retried elsewhere)."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except OSError:
            pass


def train(job_id: str) -> dict:
    """Run one training job end to end: load data, train, store the model, record the outcome."""
    if os.environ.get("HINGE_WORKER_PID") not in (None, str(os.getpid())):
        _die_with_parent_now()  # a forked work horse: do not outlive the worker
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
    client = _redis()
    jobs = JobStore(client)
    job = jobs.get(job_id)
    if job is None:
        return {"skipped": "job record missing"}
    rq_job_id = _current_rq_job_id()
    fence = ("rq_job_id", rq_job_id) if rq_job_id and job.get("rq_job_id") else None
    run = int(job.get("attempts", 0) or 0) + 1
    code = jobs.transition_code(
        job_id, ("queued",), "running", fence=fence, running_cap=settings.max_running_jobs_per_tenant,
        started_at=utc_now(), started_ts=time.time(), worker=worker_id(), attempts=run,
    )
    if code == 2:
        JobQueue(client, settings).enqueue(job_id, job["tenant"], at_front=True,
                                           description=f"train {job['solver']} on {job['dataset_id']}")
        return {"deferred": "tenant at max_running_jobs_per_tenant"}
    if code != 1:
        current = jobs.get(job_id) or {}
        return {"skipped": f"job is {current.get('status')} (RQ job {rq_job_id}, current {current.get('rq_job_id')})"}
    mine = ("attempts", str(run))
    log.info("job started (run %d)", run, extra={"solver": job["solver"], "dataset_id": job["dataset_id"]})
    params = job["params"]
    if INTERRUPT.is_set():
        return _hand_back(jobs, client, job, mine, "the worker was stopping when the job started")
    begin = time.monotonic()
    deadline = begin + params["max_seconds"] if params.get("max_seconds") else None
    if (params.get("search") or {}).get("distribute"):
        from worker import search_dist

        try:
            return search_dist.start(jobs, client, job, run)
        except Exception as exc:
            log.exception("job %s: distributing the search failed", job_id)
            return _fail(jobs, job_id, mine, "search_error", f"{type(exc).__name__}: {exc}")
    jobs.update(job_id, progress={"phase": "loading data", "fraction": 0.0})
    try:
        record, arrays = datacache.load(
            dataset_store(client, settings.chunk_bytes),
            job["dataset_id"],
            job["tenant"],
            settings.data_dir / "cache",
            settings.worker_cache_bytes,
        )
        n_problems = 1 if len(record["labels"]) == 2 else len(record["labels"])
        sink = TraceSink(jobs, job_id, settings.trace_flush_s, n_problems)
        sink.run = run
        poller = CancelPoller(jobs, job_id, settings.cancel_poll_s)
        outcome = training.train_linear(
            job["solver"], params, arrays, record["n_features"], deadline=deadline, cancel_requested=poller, sink=sink
        )
    except datacache.DatasetMissing:
        return _fail(jobs, job_id, mine, "dataset_not_found", f"data set {job['dataset_id']} was deleted before the job ran")
    except SolverInputError as exc:
        return _fail(jobs, job_id, mine, "invalid_params", str(exc))
    except redis.exceptions.RedisError:
        raise  # Redis stayed away longer than redis_retry_s: the reaper re-runs the job (not a solver error)
    except Exception as exc:  # the job fails, the worker goes on; details stay in the worker's log
        log.exception("job %s failed", job_id)
        return _fail(jobs, job_id, mine, "solver_error", f"{type(exc).__name__}: {exc}")

    if outcome.arrays is not None:
        sink.set_phase("storing model", fraction=1.0)
    return record_outcome(jobs, client, job, record, params, outcome, mine, run)


def record_outcome(jobs: JobStore, client: redis.Redis, job: dict, record: dict, params: dict, outcome, mine, run: int) -> dict:
    """Store the model (if any) and end the job (fenced on this run); a SIGTERM-interrupted job keeps its best model or goes back."""
    settings = get_settings()
    job_id = job["id"]
    seconds = float(outcome.meta.get("training_seconds", 0.0) or 0.0)
    if seconds:
        client.hincrbyfloat(keys.solver_stats(), job["solver"], seconds)
    interrupted = (
        outcome.stop_reason is StopReason.CANCELED and INTERRUPT.is_set() and not jobs.cancel_requested(job_id)
    )
    if interrupted and (settings.shutdown_policy == "requeue" or outcome.arrays is None):
        return _hand_back(jobs, client, job, mine, "the worker was stopped (SIGTERM)")

    model_id = None
    if outcome.arrays is not None:
        model_id = new_id("mdl")
        meta = dict(
            outcome.meta,
            id=model_id,
            tenant=job["tenant"],
            job_id=job_id,
            dataset_id=job["dataset_id"],
            solver=job["solver"],
            params=params,
            zero_based=bool(record.get("zero_based", False)),
            created_at=utc_now(),
        )
        if interrupted:
            meta["stop_reason"] = "interrupted"
        model_store(client, settings.chunk_bytes).create(meta, outcome.arrays)
    if interrupted:
        final, stop_reason = "succeeded", "interrupted"
        jobs.count_event("interrupted")
    else:
        final = "canceled" if outcome.stop_reason is StopReason.CANCELED else "succeeded"
        stop_reason = outcome.stop_reason.value
    done = jobs.transition(
        job_id, ("running",), final, fence=mine, finished_at=utc_now(), model_id=model_id, stop_reason=stop_reason
    )
    if not done:
        # This run was declared lost meanwhile (and another run replaced it): leave no orphan model.
        if model_id is not None:
            model_store(client, settings.chunk_bytes).delete(model_id, job["tenant"])
        log.warning("job %s: run %d was superseded; its result is dropped", job_id, run)
        return {"status": "superseded"}
    log.info("job %s (%s)", final, stop_reason, extra={"model_id": model_id, "solver_seconds": seconds})
    return {"status": final, "model_id": model_id}


def _hand_back(jobs: JobStore, client: redis.Redis, job: dict, mine: tuple[str, str], why: str) -> dict:
    """Put an interrupted job back at the front of its queue (its retries are not used up)."""
    moved = jobs.transition(job["id"], ("running",), "queued", fence=mine, delete=("started_at", "worker", "started_ts"))
    if moved:
        jobs.count_event("requeued_on_shutdown")
        JobQueue(client, get_settings()).enqueue(job["id"], job["tenant"], at_front=True,
                                                 description=f"train {job['solver']} on {job['dataset_id']} (handed back)")
        log.warning("job handed back to the queue: %s", why)
    return {"status": "queued", "reason": why}


def _fail(jobs: JobStore, job_id: str, mine: tuple[str, str], code: str, message: str) -> dict:
    jobs.transition(job_id, ("running",), "failed", fence=mine, finished_at=utc_now(), error={"code": code, "message": message})
    return {"status": "failed", "code": code}

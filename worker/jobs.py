"""RQ job functions. The queue carries only a job id (JSON serializer); everything else is in Redis."""

from __future__ import annotations

import logging
import os
import socket
import time

import redis

from service.config import get_settings
from service.storage.jobs import JobStore, utc_now
from service.storage.keys import new_id
from service.storage.records import dataset_store, model_store
from worker import datacache, training
from worker.progress import CancelPoller, TraceSink
from worker.solvers.common import SolverInputError, StopReason

log = logging.getLogger("hinge.worker")

_client: redis.Redis | None = None


def _redis() -> redis.Redis:
    global _client
    if _client is None:
        _client = redis.Redis.from_url(get_settings().redis_url)
    return _client


def train(job_id: str) -> dict:
    """Run one training job end to end: load data, train, store the model, record the outcome."""
    if os.environ.get("HINGE_WORKER_PID") not in (None, str(os.getpid())):
        from service.ingest.entry import die_with_parent

        die_with_parent()  # a forked work horse: do not outlive the worker
    settings = get_settings()
    client = _redis()
    jobs = JobStore(client)
    job = jobs.get(job_id)
    if job is None:
        return {"skipped": "job record missing"}
    started = jobs.transition(
        job_id, ("queued",), "running", started_at=utc_now(), worker=f"{socket.gethostname()}:{os.getpid()}"
    )
    if not started:
        return {"skipped": f"job is {jobs.get(job_id)['status']}"}
    params = job["params"]
    begin = time.monotonic()
    deadline = begin + params["max_seconds"] if params.get("max_seconds") else None
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
        poller = CancelPoller(jobs, job_id, settings.cancel_poll_s)
        outcome = training.train_linear(
            job["solver"], params, arrays, record["n_features"], deadline=deadline, cancel_requested=poller, sink=sink
        )
    except datacache.DatasetMissing:
        return _fail(jobs, job_id, "dataset_not_found", f"data set {job['dataset_id']} was deleted before the job ran")
    except SolverInputError as exc:
        return _fail(jobs, job_id, "invalid_params", str(exc))
    except Exception as exc:  # the job fails, the worker goes on; details stay in the worker's log
        log.exception("job %s failed", job_id)
        return _fail(jobs, job_id, "solver_error", f"{type(exc).__name__}: {exc}")

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
        model_store(client, settings.chunk_bytes).create(meta, outcome.arrays)
    final = "canceled" if outcome.stop_reason is StopReason.CANCELED else "succeeded"
    jobs.transition(
        job_id, ("running",), final, finished_at=utc_now(), model_id=model_id, stop_reason=outcome.stop_reason.value
    )
    return {"status": final, "model_id": model_id}


def _fail(jobs: JobStore, job_id: str, code: str, message: str) -> dict:
    jobs.transition(job_id, ("running",), "failed", finished_at=utc_now(), error={"code": code, "message": message})
    return {"status": "failed", "code": code}

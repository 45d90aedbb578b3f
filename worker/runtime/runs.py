"""How a run of a job begins and ends, shared by the job function (``worker.runtime.jobs``) and a distributed search's
RQ jobs (``worker.runtime.search_dist``): the worker's Redis client and id, loading the data set through the machine's
cache (waiting for the object store), storing the outcome, failing or canceling the run, handing the job back
to its queue.

A run is fenced on its number (``mine = ("attempts", str(run))``): every write of a run succeeds only
while the job record still names that run, so a run that was declared lost cannot overwrite the run
that replaced it.
"""

from __future__ import annotations

import logging
import os
from dataclasses import replace
from typing import Any

import redis

from core.config import cache_root, get_settings
from core.lifecycle import hand_back_job
from core.queueing import JobQueue
from core.schemas.jobs import JobDataLoad, JobStatus
from core.schemas.solver_params import SolverParams
from core.scoring.quality import gamma_warnings, model_warnings, rbf_gammas, sampled_squared_distances
from core.solvers import solver_params
from core.storage import cache, keys
from core.storage.capacity import StorageFull
from core.storage.connection import resilient_client
from core.storage.documents import DatasetRecord, ModelRecord
from core.storage.job_record import JobRecord
from core.storage.jobs import JobStore, utc_now
from core.storage.keys import new_id
from core.storage.objects import StoreError, StoreUnavailable
from core.storage.records import dataset_store, model_store
from worker.runtime.model_staging import ModelStaging
from worker.runtime.progress import INTERRUPT, CancelPoller
from worker.solvers.common import StopReason
from worker.training.fit import TrainingOutcome
from worker.training.stopping import INTERRUPTED

log = logging.getLogger("hinge.worker")

_client: redis.Redis | None = None


def redis_client() -> redis.Redis:
    """This process's Redis client (made on first use, never at import), retrying for ``redis_retry_s``."""
    global _client
    if _client is None:
        settings = get_settings()
        if settings.redis_url is None:
            raise RuntimeError("REDIS_URL is not set: a worker needs the service's Redis")
        _client = resilient_client(settings.redis_url, settings.redis_retry_s)
    return _client


def worker_id() -> str:
    """This worker's id (set by ``hinge worker``; host and pid otherwise)."""
    return os.environ.get("HINGE_WORKER_ID") or f"{os.uname().nodename}:{os.getpid()}"


def job_params(job: JobRecord) -> SolverParams:
    """The job's stored parameters read by its solver's schema: the worker's one re-check of what the API accepted.

    The API validated them when it accepted the job and stored that validated JSON form; this reads it
    back as the typed model the training code takes (defaults filled in). Stored by another version,
    they may no longer fit: pydantic's ValidationError (KeyError for a solver this version lacks), which
    the run reports as ``invalid_params``.
    """
    return solver_params(job.solver, job.params)


def record_outcome(
    jobs: JobStore,
    client: redis.Redis,
    job: JobRecord,
    dataset: DatasetRecord,
    outcome: TrainingOutcome,
    mine: tuple[str, str],
    run: int,
    staging: ModelStaging | None = None,
    arrays: dict | None = None,
) -> dict:
    """Store the model (if any) and end the job (fenced on this run); a SIGTERM-interrupted job keeps its best model or goes back.

    ``staging``: the model's arrays when they were written ahead (``worker.runtime.model_staging``): committed with its
    record instead of written now. ``arrays``: the training data, to judge the job's rbf gammas on (its model's
    warnings, ``core.scoring.quality``)."""
    settings = get_settings()
    job_id = job.id
    seconds = float(outcome.model.training_seconds or 0.0)
    if seconds:
        client.hincrbyfloat(keys.solver_stats(), job.solver, seconds)
    interrupted = (
        outcome.stop_reason is StopReason.CANCELED and INTERRUPT.is_set() and not jobs.cancel_requested(job_id)
    )
    if interrupted and (settings.shutdown_policy == "requeue" or outcome.arrays is None):
        return hand_back(jobs, client, job, run, "the worker was stopped (SIGTERM)")

    model_id = None
    warnings: list[dict] = []
    if outcome.arrays is not None:
        warnings = [*(outcome.model.warnings or []), *model_warnings(outcome.model, dataset.labels, job.params)]
        gammas = rbf_gammas(job.params)
        if gammas and arrays is not None:
            warnings += gamma_warnings(gammas, sampled_squared_distances(arrays, dataset.n_features))
        store = model_store(client, settings)
        try:
            claimed = staging.claim(outcome.arrays) if staging is not None else None
        except StorageFull as exc:
            log.warning("job %s: the model does not fit in Redis (%s)", job_id, exc)
            return fail(jobs, job_id, mine, "storage_full", str(exc))
        model_id = claimed[0] if claimed is not None else new_id("mdl")
        # the model as training described it (``outcome.model``), then where it came from
        document = dict(
            outcome.model.to_document(),
            id=model_id,
            tenant=job.tenant,
            job_id=job_id,
            dataset_id=job.dataset_id,
            solver=job.solver,
            params=job.params,  # as stored with the job: the validated JSON form
            zero_based=dataset.zero_based,
            zero_based_guessed=dataset.zero_based_guessed,
            created_at=utc_now(),
            warnings=warnings,
        )
        try:
            record = ModelRecord.from_document(document)
            if interrupted:
                record.stop_reason = StopReason.INTERRUPTED.value
                record.stopping_rule = INTERRUPTED.model_dump()
            if claimed is not None:
                store.commit(record, claimed[1])
            else:
                store.create(record, outcome.arrays)
        except StorageFull as exc:
            log.warning("job %s: the model does not fit in Redis (%s)", job_id, exc)
            return fail(jobs, job_id, mine, "storage_full", str(exc))
    if interrupted:
        final, stop_reason = JobStatus.succeeded, "interrupted"
        jobs.count_event("interrupted")
    else:
        final = JobStatus.canceled if outcome.stop_reason is StopReason.CANCELED else JobStatus.succeeded
        stop_reason = outcome.stop_reason.value
    why_none: dict[str, Any] = {}
    if model_id is None and final is JobStatus.canceled:  # say why there is no model (the error shape, code `canceled`)
        message = outcome.no_model or "canceled before a model was complete: none was stored"
        why_none = {"error": {"code": "canceled", "message": message}}
    if warnings:
        why_none["warnings"] = warnings
        for item in warnings:
            log.warning("job %s: %s: %s", job_id, item["code"], item["message"])
    done = end(jobs, job_id, mine, final, model_id=model_id, stop_reason=stop_reason, **why_none)
    if not done:
        # This run was declared lost meanwhile (and another run replaced it): leave no orphan model.
        if model_id is not None:
            model_store(client, settings).delete(model_id, job.tenant)
        log.warning("job %s: run %d was superseded; its result is dropped", job_id, run)
        return {"status": "superseded"}
    log.info("job %s (%s)", final.value, stop_reason, extra={"model_id": model_id, "solver_seconds": seconds})
    return {"status": final.value, "model_id": model_id}


def hand_back(jobs: JobStore, client: redis.Redis, job: JobRecord, run: int, why: str) -> dict:
    """Put an interrupted run of the job back at the front of its queue (its retries are not used up)."""
    hand_back_job(jobs, JobQueue(client, get_settings()), replace(job, attempts=run), why)
    return {"status": "queued", "reason": why}


def end(jobs: JobStore, job_id: str, mine: tuple[str, str], status: JobStatus, **fields) -> bool:
    """End the run with a final status and more fields of the record; False when it is no longer this run."""
    return jobs.transition(job_id, (JobStatus.running,), status, fence=mine, finished_at=utc_now(), **fields)


def no_core(jobs: JobStore, client: redis.Redis, job: JobRecord, run: int, mine: tuple[str, str], what: str) -> dict:
    """A run that gave up waiting for a core (``worker.runtime.core_budget.leased``): handed back when the worker is
    stopping, else canceled (a cancel request is the other reason to give up). ``what``: what waited."""
    if INTERRUPT.is_set():
        return hand_back(jobs, client, job, run, f"the worker was stopping while {what} waited for a core")
    return cancel(jobs, job.id, mine, f"canceled while {what} waited for a core: no model")


def fail(jobs: JobStore, job_id: str, mine: tuple[str, str], code: str, message: str) -> dict:
    """End the run as ``failed`` with an error code and a message the user reads (fenced on the run)."""
    end(jobs, job_id, mine, JobStatus.failed, error={"code": code, "message": message})
    return {"status": "failed", "code": code}


def cancel(jobs: JobStore, job_id: str, mine: tuple[str, str], no_model: str | None = None) -> dict:
    """End the run as ``canceled`` before training gave a model (fenced on the run); ``no_model`` says why
    there is none, as the error shape with code ``canceled``."""
    why = {"code": "canceled", "message": no_model} if no_model else None
    end(jobs, job_id, mine, JobStatus.canceled, stop_reason="canceled", error=why)
    return {"status": "canceled", "model_id": None}


def load_dataset(jobs: JobStore, client: redis.Redis, job: JobRecord) -> tuple:
    """The job's data set from the machine's cache (``core.storage.cache``), fetched if it is not there; while
    the object store does not answer the job waits for it, up to ``store_retry_s``, saying so in its progress
    (a cancel or the worker's stop ends the wait)."""
    settings = get_settings()
    poller = CancelPoller(jobs, job.id, settings.cancel_poll_s)

    def waiting(error: StoreError) -> None:
        log.warning("job %s: waiting for the object store: %s", job.id, error)  # the error: in the log only
        jobs.update(job.id, progress={"phase": "waiting for the object store", "fraction": 0.0})

    report: dict = {}
    loaded = cache.load(
        dataset_store(client, settings),
        job.dataset_id,
        job.tenant,
        cache_root(settings),
        settings.worker_cache_bytes,
        patience_s=settings.store_retry_s,
        should_stop=poller,
        on_wait=waiting,
        report=report,
    )
    load = JobDataLoad.model_validate(report)
    jobs.update(job.id, data_load=load)
    log.info(
        "data set %s loaded in %.3f s (%s)",
        job.dataset_id,
        load.seconds,
        "from the machine's cache" if load.cached else f"{load.fetched_bytes} bytes fetched",
    )
    return loaded


def sweep_deleted_copies(client: redis.Redis) -> list[str]:
    """Remove this machine's cached copies of data sets deleted since (``core.storage.cache.sweep``), an idle
    worker's chore; returns their ids. Redis or the disk failing only postpones it (logged)."""
    settings = get_settings()
    try:
        gone = cache.sweep(dataset_store(client, settings), cache_root(settings))
    except (redis.exceptions.RedisError, OSError) as exc:
        log.warning("the sweep of deleted data sets' copies failed (tried again later): %s", exc)
        return []
    if gone:
        log.info("removed the cached copies of %d deleted data sets", len(gone))
    return gone


def store_failure(error: StoreError, waited_s: float) -> str:
    """Why a job failed on the object store, in words a user can act on."""
    if isinstance(error, StoreUnavailable):
        return f"the object store did not answer for {waited_s:.0f} s (store_retry_s): {error}; submit the job again"
    return f"the object store could not give the data set: {error}"


def end_on_store_error(
    jobs: JobStore, client: redis.Redis, job: JobRecord, run: int, mine: tuple[str, str], error: StoreError
) -> dict:
    """End a run whose data set the object store could not give: handed back when the worker stops, canceled
    when that was asked for, else failed with the store's error code and why."""
    if INTERRUPT.is_set():
        return hand_back(jobs, client, job, run, "the worker was stopping while the job waited for the object store")
    if jobs.cancel_requested(job.id):
        return cancel(jobs, job.id, mine, "canceled while waiting for the object store: no model")
    log.warning("job %s: %s", job.id, error)
    return fail(jobs, job.id, mine, error.code, store_failure(error, get_settings().store_retry_s))

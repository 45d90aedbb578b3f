"""Routes of /v1/jobs: submit a training job, read its state and trace, cancel it, delete it once finished.

A submission is stored and put in the enqueue outbox in one atomic step, refused with 429 when the
tenant already has ``max_queued_jobs_per_tenant`` queued jobs, then enqueued into the tenant's own
RQ queue (``core/queueing.py``: per-tenant queues served least recently served first).

``GET /v1/jobs/{id}?wait_s=N`` answers when the job ends or N seconds have passed, whichever comes first
(a long poll): a client waiting for a job sends one request where a polling loop sends one every step, and
learns of the end as it is published (a millisecond or two) instead of half a step on average. One watcher per
API process hears every job's end on a Redis channel and wakes the requests waiting for it
(``service/api/job_wait.py``).
"""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Request, Response
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from core.schemas.base import ErrorResponse
from core.schemas.jobs import JobList, JobOut, JobRequest, JobStatus, TraceOut
from core.storage.job_record import JobRecord
from core.storage.jobs import FINAL_STATES, Deletion, JobStore, utc_now
from core.storage.keys import new_id
from service.api import job_wait
from service.api.deps import DatasetStoreDep, JobDep, JobStoreDep, SettingsDep, TenantDep
from service.api.errors import ApiError, not_found
from service.api.job_checks import check_request_against_dataset, stored_params

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])

MAX_WAIT_S = 60.0
"""Longest ``wait_s`` of GET /v1/jobs/{id} (below the usual 60-100 s idle timeouts of proxies and clients)."""

ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorResponse, "description": "No such job (or not yours)."},
    401: {"model": ErrorResponse, "description": "Missing or invalid API key."},
}


def _current(jobs: JobStore, job_id: str) -> JobRecord:
    """The job's record as it is now (404 when it was deleted in the meantime)."""
    job = jobs.get(job_id)
    if job is None:
        raise not_found("job", job_id)
    return job


def _as_stored(part: BaseModel | None) -> dict | None:
    """A typed part of the record as the JSON it was stored as (its fields that were set), for the view's dict."""
    return None if part is None else part.model_dump(mode="json", exclude_unset=True)


def job_view(job: JobRecord) -> dict:
    """The fields of a job record that the API shows."""
    view: dict[str, Any] = {
        "id": job.id,
        "status": job.status.value,
        "dataset_id": job.dataset_id,
        "solver": job.solver,
        "params": job.params,
        "created_at": job.created_at,
        "progress": _as_stored(job.progress) or {},
        "warnings": job.warnings or [],
    }
    shown_when_set = {
        "started_at": job.started_at,
        "finished_at": job.finished_at,
        "model_id": job.model_id,
        "stop_reason": job.stop_reason,
        "error": _as_stored(job.error),
        "search_results": job.search_results,
        "cores": _as_stored(job.cores),
        "data_load": _as_stored(job.data_load),
    }
    view.update((name, value) for name, value in shown_when_set.items() if value not in (None, ""))
    subtasks = job.subtasks
    if subtasks is not None:
        view["progress"] = dict(view["progress"], subtasks_done=subtasks.done, subtasks_total=subtasks.total)
        if view["progress"].get("fraction") is None and subtasks.total:
            # a distributed search: its settings run as RQ jobs of their own until the refit starts
            view["progress"].update(phase="cross-validating", fraction=round(subtasks.done / (subtasks.total + 1), 4))
    if job.status is JobStatus.succeeded and view["progress"].get("fraction") is not None:
        view["progress"] = dict(view["progress"], fraction=1.0, eta_s=0.0, phase="done")
    return view


@router.post(
    "",
    status_code=202,
    response_model=JobOut,
    summary="Submit a training job",
    responses={
        **ERRORS,
        404: {"model": ErrorResponse, "description": "No such data set (or not yours)."},
        413: {"model": ErrorResponse, "description": "Body over max_json_body_bytes."},
        422: {"model": ErrorResponse, "description": "Invalid request; the message names the field."},
        429: {
            "model": ErrorResponse,
            "description": "You have max_queued_jobs_per_tenant queued jobs already; "
            "retry after some finish (Retry-After).",
        },
    },
)
def submit_job(
    request: Request,
    response: Response,
    body: Annotated[JobRequest, Body(description="Data set, solver and the solver's parameters.")],
    settings: SettingsDep,
    datasets: DatasetStoreDep,
    jobs: JobStoreDep,
    tenant: TenantDep,
) -> JobOut:
    """Queue a training job; poll `Location` for its state and `…/trace` for its convergence."""
    dataset = datasets.get(body.dataset_id, tenant)
    if dataset is None:
        raise not_found("dataset", body.dataset_id)
    check_request_against_dataset(body, dataset, settings)
    job_id = new_id("job")
    record = JobRecord(
        id=job_id,
        tenant=tenant,
        status=JobStatus.queued,
        dataset_id=body.dataset_id,
        solver=body.solver,
        params=stored_params(body),
        created_at=utc_now(),
    )
    limit = settings.max_queued_jobs_per_tenant
    if not jobs.create(record, max_queued=limit):
        raise ApiError(
            429,
            "too_many_queued_jobs",
            f"you have {limit} queued jobs, the limit max_queued_jobs_per_tenant = {limit}; "
            "submit again when some have started"
            + (
                f" (at most {settings.max_running_jobs_per_tenant} of your jobs run at once: "
                "max_running_jobs_per_tenant)"
                if settings.max_running_jobs_per_tenant
                else ""
            ),
            {"limit": "max_queued_jobs_per_tenant", "value": limit},
            headers={"Retry-After": "5"},
        )
    try:
        request.app.state.job_queue.enqueue(job_id, tenant, description=f"train {body.solver} on {body.dataset_id}")
    except Exception:
        # The record and its outbox entry stay: the reaper enqueues it once Redis answers again.
        pass
    response.headers["Location"] = f"/v1/jobs/{job_id}"
    return JobOut.model_validate(job_view(_current(jobs, job_id)))


@router.get("", response_model=JobList, summary="List jobs", responses=ERRORS)
def list_jobs(
    offset: Annotated[int, Query(ge=0, description="Index of the first item.")] = 0,
    limit: Annotated[int, Query(ge=1, le=1000, description="Most items to return.")] = 100,
    status: Annotated[JobStatus | None, Query(description="Only jobs in this status.")] = None,
    *,
    jobs: JobStoreDep,
    tenant: TenantDep,
) -> JobList:
    """The caller's jobs, newest first."""
    items, total = jobs.list(tenant, offset, limit, status)
    return JobList.model_validate(
        {"items": [job_view(j) for j in items], "total": total, "offset": offset, "limit": limit}
    )


@router.get("/{job_id}", response_model=JobOut, summary="Get a job", responses=ERRORS)
async def get_job(
    request: Request,
    job: JobDep,
    jobs: JobStoreDep,
    wait_s: Annotated[
        float,
        Query(
            ge=0,
            le=MAX_WAIT_S,
            description="Wait up to this many seconds for a queued or running job to end before answering (a long "
            "poll: the answer comes as soon as the job is succeeded, failed or canceled, else after `wait_s` with the "
            "job as it is then). 0 answers at once.",
        ),
    ] = 0.0,
) -> JobOut:
    """A job's status, progress, model id (when done) or error (when failed); with ``wait_s``, once it ends."""
    if wait_s > 0 and job.status not in FINAL_STATES:
        await job_wait.watcher(request).wait(request, job.id, time.monotonic() + wait_s)
        job = await run_in_threadpool(_current, jobs, job.id)
    return JobOut.model_validate(job_view(job))


@router.get("/{job_id}/trace", response_model=TraceOut, summary="Get a job's convergence trace", responses=ERRORS)
def get_trace(
    job: JobDep,
    jobs: JobStoreDep,
    since: Annotated[
        int, Query(ge=0, description="Skip the first `since` points (pass the previous answer's `next`).")
    ] = 0,
) -> dict:
    """The convergence points recorded so far; they grow while the job runs."""
    points = jobs.trace(job.id, since)
    return {"job_id": job.id, "status": job.status, "points": points, "next": since + len(points)}


@router.delete(
    "/{job_id}",
    status_code=204,
    summary="Delete a finished job",
    responses={
        **ERRORS,
        409: {"model": ErrorResponse, "description": "The job is queued or running: cancel it first."},
    },
)
def delete_job(job: JobDep, jobs: JobStoreDep) -> Response:
    """Delete a finished job with its trace (its model stays; `GET /v1/models/{id}/trace` is then empty)."""
    job_id = job.id
    outcome = jobs.delete(job_id)
    if outcome is Deletion.NOT_FINISHED:
        raise ApiError(
            409,
            "job_not_finished",
            f"job {job_id} is {job.status.value}: cancel it first (POST /v1/jobs/{job_id}/cancel), then delete it",
            {"status": job.status.value},
        )
    if outcome is Deletion.NO_JOB:
        raise not_found("job", job_id)
    return Response(status_code=204)


@router.post(
    "/{job_id}/cancel",
    status_code=202,
    response_model=JobOut,
    summary="Cancel a job",
    responses={**ERRORS, 409: {"model": ErrorResponse, "description": "The job has already ended."}},
)
def cancel_job(request: Request, job: JobDep, jobs: JobStoreDep) -> JobOut:
    """Cancel: a queued job never runs; a running solver stops at its next iteration check and the job ends `canceled`."""
    job_id = job.id
    if job.status in FINAL_STATES:
        raise ApiError(409, "job_finished", f"job {job_id} has already ended ({job.status.value})")
    jobs.request_cancel(job_id)
    if jobs.transition(job_id, (JobStatus.queued,), JobStatus.canceled, finished_at=utc_now(), stop_reason="canceled"):
        # Already taken by a worker or gone: the worker sees the canceled status and skips it.
        request.app.state.job_queue.cancel(job.rq_job_id)
    return JobOut.model_validate(job_view(_current(jobs, job_id)))

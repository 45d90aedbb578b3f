"""GET /v1/jobs/{id}/events: a job's life as server-sent events (SSE), until it ends.

Events, each with an ``id`` that is the number of trace points sent so far:

* ``status``: the whole job (as GET /v1/jobs/{id}) when the stream starts and whenever its status changes;
* ``progress``: the job's ``progress`` object whenever it changes;
* ``trace``: one convergence point, with its ``index`` in the job's trace, in the order recorded;
* ``end``: the whole job in its final state; the stream closes after it.

Resuming: a client that reconnects with ``Last-Event-ID: N`` (browsers' EventSource does it by
itself) or ``?since=N`` gets the trace points from index N on, so every point is seen exactly once
and in order across reconnections. The stream reads Redis every ``POLL_S`` seconds (off the event
loop), and at once when the job ends (``service.api.job_wait``'s watcher hears the end published); a comment line
every ``KEEPALIVE_S`` seconds keeps proxies from closing an idle stream.
A job's final status is written after its last trace points, so ``end`` follows every point.
"""

from __future__ import annotations

import json
import time
from typing import Annotated

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from core.storage.jobs import FINAL_STATES, JobStore
from service.api import job_wait
from service.api.deps import JobIdPath, JobStoreDep, TenantDep
from service.api.errors import not_found, unprocessable
from service.api.routes.jobs import ERRORS, job_view

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])

POLL_S = 0.25
KEEPALIVE_S = 15.0
BATCH = 1000  # most trace points read from Redis per poll


def sse_event(kind: str, data: dict, event_id: int) -> str:
    """One server-sent event: its type, id and JSON data on one line."""
    return f"event: {kind}\nid: {event_id}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"


def resume_index(last_event_id: str | None, since: int | None) -> int:
    """Where the trace resumes: ``Last-Event-ID`` wins over ``since``; neither: from the start."""
    if last_event_id not in (None, ""):
        text = last_event_id.strip()
        if not text.isdigit() or len(text) > 18:
            raise unprocessable(
                f"Last-Event-ID must be the id of an event of this stream (a count), got {text[:40]!r}",
                ["header", "Last-Event-ID"],
            )
        return int(text)
    return since or 0


async def job_stream(request: Request, jobs: JobStore, job_id: str, start: int, poll_s: float = POLL_S):
    """The event stream of one job from trace index ``start`` on (see the module docstring)."""
    sent = start
    last_status = None
    last_progress = None
    last_write = time.monotonic()
    retry = "retry: 1000\n"  # reconnect after 1 s; sent with the first event (a block of its own is an empty event to some clients)
    while True:
        job = await run_in_threadpool(jobs.get, job_id)  # the status first: if final, the trace is complete
        if job is None:
            yield sse_event("end", {"id": job_id, "status": "deleted"}, sent)
            return
        final = job.status in FINAL_STATES
        while True:
            points = await run_in_threadpool(jobs.trace, job_id, sent, sent + BATCH - 1)
            for point in points:
                yield sse_event("trace", dict(point, index=sent), sent + 1)
                sent += 1
            if not points or len(points) < BATCH or not final:
                break
        view = job_view(job)
        if final:
            yield sse_event("end", view, sent)
            return
        if view["status"] != last_status:
            yield retry + sse_event("status", view, sent)
            retry = ""
            last_status, last_progress = view["status"], view["progress"]
            last_write = time.monotonic()
        elif view["progress"] != last_progress:
            yield sse_event("progress", view["progress"], sent)
            last_progress = view["progress"]
            last_write = time.monotonic()
        elif points:
            last_write = time.monotonic()
        elif time.monotonic() - last_write > KEEPALIVE_S:
            yield ": keep-alive\n\n"
            last_write = time.monotonic()
        if await request.is_disconnected():
            return
        # until the next look, or at once when the job ends (the long poll's watcher hears its end published)
        await job_wait.watcher(request).wait(request, job_id, time.monotonic() + poll_s)


SSE_STREAM = {
    "description": "Server-sent events as text, each a block of `field: value` lines ended by a blank line: `event` "
    "names it (status, progress, trace or end), `data` is its JSON on one line (a job, a progress or a trace point), "
    "`id` counts the trace points sent (resume with Last-Event-ID), `retry` the reconnection delay in milliseconds; "
    "a line starting with `:` is a keep-alive comment."
}
"""The stream as OpenAPI declares it: text/event-stream, with a schema of no type. Tools disagree on what the schema
of a stream describes: openapi-python-client applies it to the whole body (an object made it parse the text as
JSON; no type returns the text), schemathesis to each event (a string type fails every event, which is an object)."""


@router.get(
    "/{job_id}/events",
    summary="Follow a job as server-sent events",
    response_class=StreamingResponse,
    responses={
        **ERRORS,
        200: {
            "description": "An event stream: `status`, `progress`, `trace` (one per convergence point) and a last "
            "`end` event; ids count the trace points sent.",
            "content": {"text/event-stream": {"schema": SSE_STREAM}},
        },
        422: {"description": "Last-Event-ID is not an id of this stream."},
    },
)
async def job_events(
    request: Request,
    job_id: JobIdPath,
    since: Annotated[
        int | None, Query(ge=0, le=2**62, description="Start the trace at this index (Last-Event-ID wins).")
    ] = None,
    last_event_id: Annotated[
        str | None,
        Header(
            alias="Last-Event-ID",
            pattern=r"^[0-9]{1,18}$",
            description="Resume after this event id (a count of trace points).",
        ),
    ] = None,
    *,
    jobs: JobStoreDep,
    tenant: TenantDep,
) -> StreamingResponse:
    """Status changes, progress and every trace point as they happen, then the final state; resumable."""
    start = resume_index(last_event_id, since)
    job = await run_in_threadpool(jobs.get, job_id, tenant)
    if job is None:
        raise not_found("job", job_id)
    return StreamingResponse(
        job_stream(request, jobs, job_id, start),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )

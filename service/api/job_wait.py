"""The long poll of ``GET /v1/jobs/{id}?wait_s=N``: requests that wait for jobs to end, and the one watcher that
looks at their jobs for all of them.

A request that waits registers its job and sleeps on a future. One task per API process (``JobEndWatcher``)
reads, every ``CHECK_S``, the status of every job some request waits for, in one pipelined round trip to
Redis (``JobStore.statuses``), and wakes the requests whose job has ended (or is gone). A thousand waiting
requests cost one round trip per check, not a thousand. The task stops when nobody waits and starts again
with the next waiter. A waiting request also stops at its deadline, or when its client has gone (looked at
every ``DISCONNECT_CHECK_S``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from core.storage.jobs import FINAL_STATES, JobStore

log = logging.getLogger("hinge.api")

CHECK_S = 0.02
"""How often the watcher reads the statuses of the jobs waited for."""
DISCONNECT_CHECK_S = 0.5
"""How often a waiting request checks that its client is still there."""
_FINAL_STATUSES = frozenset(state.value for state in FINAL_STATES)


class JobEndWatcher:
    """Wakes the requests that wait for jobs to end (see the module docstring); one per API process."""

    def __init__(self, jobs: JobStore) -> None:
        self.jobs = jobs
        self._waiting: dict[str, set[asyncio.Future]] = {}
        self._task: asyncio.Task | None = None

    async def wait(self, request: Request, job_id: str, until: float) -> None:
        """Return once the job has ended or is gone, at ``until`` (``time.monotonic()``), or when the client
        has gone, whichever comes first."""
        loop = asyncio.get_running_loop()
        ended: asyncio.Future = loop.create_future()
        self._waiting.setdefault(job_id, set()).add(ended)
        if self._task is None or self._task.done() or self._task.get_loop() is not loop:  # (a test's new loop)
            self._task = loop.create_task(self._watch(), name="job-end-watcher")
        try:
            while not ended.done():
                left = until - time.monotonic()
                if left <= 0:
                    return
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(asyncio.shield(ended), min(left, DISCONNECT_CHECK_S))
                if not ended.done() and await request.is_disconnected():
                    return
        finally:
            waiters = self._waiting.get(job_id)
            if waiters is not None:
                waiters.discard(ended)
                if not waiters:
                    del self._waiting[job_id]

    async def _watch(self) -> None:
        while self._waiting:
            await asyncio.sleep(CHECK_S)
            job_ids = list(self._waiting)
            if not job_ids:
                break
            try:
                found = await run_in_threadpool(self.jobs.statuses, job_ids)
            except Exception:  # Redis away: the waiters keep waiting (their own deadlines still hold)
                log.warning("the job-end watcher could not read the jobs' statuses; it tries again", exc_info=True)
                await asyncio.sleep(DISCONNECT_CHECK_S)
                continue
            for job_id, (status, _rq_job_id) in zip(job_ids, found):
                if status is None or status in _FINAL_STATUSES:
                    for ended in list(self._waiting.get(job_id, ())):
                        if not ended.done() and ended.get_loop() is asyncio.get_running_loop():
                            ended.set_result(None)


def watcher(request: Request) -> JobEndWatcher:
    """The API process's watcher, over its job store (made with the first waiting request)."""
    state = request.app.state
    current = getattr(state, "job_end_watcher", None)
    if current is None:
        current = state.job_end_watcher = JobEndWatcher(state.jobs)
    return current

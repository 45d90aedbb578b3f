"""The long poll of ``GET /v1/jobs/{id}?wait_s=N``: requests that wait for jobs to end, and the one watcher that
hears of their ends for all of them.

A request that waits registers its job and sleeps on a future. Every job's end (and every deletion) is
published by the transition that makes it, on ``keys.job_ends_channel()``; one listener thread per API
process (``JobEndWatcher``) is subscribed to that channel and wakes the requests waiting for the job named,
within a millisecond or two of its end. Ends heard are remembered for at least ``RECENT_S`` seconds (the
older ones are dropped once more than 64 are kept), so that a request registering just after the message (its
job read as running a moment before) answers at once.

Messages are not stored: one published while the listener was not subscribed (its first subscription, or
Redis restarting) is lost. So a task of the same watcher also reads, every ``CHECK_S``, the status of every
job some request waits for, in one pipelined round trip to Redis (``JobStore.statuses``): a lost message
delays an answer by at most that. The task stops when nobody waits and starts again with the next waiter;
the listener leaves after ``LISTEN_IDLE_S`` without waiters. A waiting request also stops at its deadline,
or when its client has gone (looked at every ``DISCONNECT_CHECK_S``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from core.storage import keys
from core.storage.connection import text
from core.storage.jobs import FINAL_STATES, JobStore

log = logging.getLogger("hinge.api")

CHECK_S = 0.1
"""How often the watcher reads the statuses of the jobs waited for (what a lost message costs at most)."""
DISCONNECT_CHECK_S = 0.5
"""How often a waiting request checks that its client is still there."""
RECENT_S = 5.0
"""How long an end heard on the channel is remembered at least, for requests that register after it."""
LISTEN_IDLE_S = 30.0
"""The listener unsubscribes and its thread ends after this long without a waiting request."""
_LISTEN_TIMEOUT_S = 1.0
_FINAL_STATUSES = frozenset(state.value for state in FINAL_STATES)


class JobEndWatcher:
    """Wakes the requests that wait for jobs to end (see the module docstring); one per API process."""

    def __init__(self, jobs: JobStore) -> None:
        self.jobs = jobs
        self._waiting: dict[str, set[asyncio.Future]] = {}
        self._recent: dict[str, float] = {}  # job id -> time.monotonic() its end was heard
        self._task: asyncio.Task | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listener: threading.Thread | None = None
        self._last_waiter = time.monotonic()
        self._stopping = threading.Event()

    def stop(self) -> None:
        """The API is stopping (its Redis connections close next): the listener leaves at its next message or error
        instead of subscribing again."""
        self._stopping.set()

    async def wait(self, request: Request, job_id: str, until: float) -> None:
        """Return once the job has ended or is gone, at ``until`` (``time.monotonic()``), or when the client
        has gone, whichever comes first."""
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._last_waiter = time.monotonic()
        if self._listener is None or not self._listener.is_alive():
            self._listener = threading.Thread(target=self._listen, name="job-end-listener", daemon=True)
            self._listener.start()
        if job_id in self._recent:
            return
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
            self._last_waiter = time.monotonic()

    def _ended(self, job_id: str) -> None:
        """In the event loop: the job has ended or is gone; wake its waiters and remember it a while."""
        now = time.monotonic()
        self._recent[job_id] = now
        if len(self._recent) > 64:
            self._recent = {key: heard for key, heard in self._recent.items() if now - heard < RECENT_S}
        running = asyncio.get_running_loop()
        for ended in list(self._waiting.get(job_id, ())):
            if not ended.done() and ended.get_loop() is running:
                ended.set_result(None)

    def _listen(self) -> None:
        """The listener thread: hand every id published on the channel to the event loop, until idle."""
        pubsub = None
        try:
            while not self._stopping.is_set() and (
                self._waiting or time.monotonic() - self._last_waiter < LISTEN_IDLE_S
            ):
                try:
                    if pubsub is None:
                        pubsub = self.jobs.client.pubsub(ignore_subscribe_messages=True)
                        pubsub.subscribe(keys.job_ends_channel())
                    message = pubsub.get_message(timeout=_LISTEN_TIMEOUT_S)
                except Exception as exc:  # Redis away (or the app closing its connections as it stops): the
                    # statuses read every CHECK_S still answer the waiters, and warn if Redis stays away
                    if self._stopping.is_set() or (self._loop is not None and self._loop.is_closed()):
                        return  # the API has stopped: nobody waits, and "it subscribes again" would be untrue
                    log.info(
                        "the job-end listener lost its subscription (%s: %s); it subscribes again",
                        type(exc).__name__,
                        exc,
                    )
                    with contextlib.suppress(Exception):
                        if pubsub is not None:
                            pubsub.close()
                    pubsub = None
                    time.sleep(_LISTEN_TIMEOUT_S)
                    continue
                if message is None or message.get("type") != "message":
                    continue
                loop = self._loop
                if loop is None or loop.is_closed():
                    continue
                with contextlib.suppress(RuntimeError):  # the loop closed meanwhile (a test's)
                    loop.call_soon_threadsafe(self._ended, text(message["data"]))
        finally:
            if pubsub is not None:
                with contextlib.suppress(Exception):
                    pubsub.close()

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
                    self._ended(job_id)


def stop_watcher(app) -> None:
    """Tell the API process's watcher, if it has one, that the API is stopping (its lifespan, before Redis closes)."""
    current = getattr(app.state, "job_end_watcher", None)
    if current is not None:
        current.stop()


def watcher(request: Request) -> JobEndWatcher:
    """The API process's watcher, over its job store (made with the first waiting request)."""
    state = request.app.state
    current = getattr(state, "job_end_watcher", None)
    if current is None:
        current = state.job_end_watcher = JobEndWatcher(state.jobs)
    return current

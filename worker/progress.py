"""How a running job talks to Redis: buffered trace points and throttled cancel look-ups.

It also carries the worker's shutdown request to the solver: ``INTERRUPT`` is set by the worker's
SIGTERM handling (``worker.main``; in a forked work horse by its own SIGTERM handler) and the
cancel poller answers True as soon as it is set, so the solver stops at its next iteration check
exactly as for a cancel, and the job function stores the model with stop_reason ``interrupted``
(or puts the job back in the queue), well within a container's stop grace period.
"""

from __future__ import annotations

import logging
import threading
import time

import redis

INTERRUPT = threading.Event()
"""Set when this worker process was asked to stop (SIGTERM): running solvers stop at their next check."""

from service.storage.capacity import is_out_of_memory
from service.storage.jobs import JobStore

log = logging.getLogger("hinge.worker")
MAX_PENDING = 100_000
"""Most trace points a job keeps in memory while Redis is full (the oldest go first)."""


class TraceSink:
    """Collects convergence points and pushes them (with the job's progress) every ``flush_s`` seconds."""

    def __init__(self, jobs: JobStore, job_id: str, flush_s: float, subproblems: int):
        self.jobs = jobs
        self.job_id = job_id
        self.flush_s = flush_s
        self.subproblems = subproblems
        self.subproblem = 0
        self.run = 1  # run number of the job: points of a retried job carry `attempt` (from 2 on)
        self._pending: list[dict] = []
        self._last_flush = time.monotonic()
        self._latest: dict | None = None
        self._warned = False

    def add(self, point: dict) -> None:
        """Take one point from the solver (tagged with the binary problem it belongs to)."""
        if self.subproblems > 1:
            point = dict(point, subproblem=self.subproblem)
        if self.run > 1:
            point = dict(point, attempt=self.run)
        self._pending.append(point)
        self._latest = point
        if time.monotonic() - self._last_flush >= self.flush_s:
            self.flush()

    def progress(self) -> dict:
        """The job's progress as the latest point says."""
        latest = self._latest or {}
        return {
            "iteration": latest.get("iteration"),
            "elapsed_s": latest.get("elapsed_s"),
            "primal": latest.get("primal"),
            "gap": latest.get("gap"),
            "subproblem": self.subproblem,
            "subproblems": self.subproblems,
        }

    def flush(self) -> None:
        """Push pending points and the progress now.

        When Redis is full to its last byte the points stay here (up to MAX_PENDING) for the next
        flush, and training goes on; storing the model then tells whether the job can end well.
        """
        try:
            self.jobs.append_trace(self.job_id, self._pending, self.progress())
        except redis.exceptions.ResponseError as exc:
            if not is_out_of_memory(exc):
                raise
            if not self._warned:
                log.warning("Redis is full: trace points of job %s wait in the worker", self.job_id)
                self._warned = True
            del self._pending[:-MAX_PENDING]
            self._last_flush = time.monotonic()
            return
        self._pending = []
        self._last_flush = time.monotonic()


class CancelPoller:
    """Answers 'was a cancel requested?' from Redis at most every ``interval_s`` seconds."""

    def __init__(self, jobs: JobStore, job_id: str, interval_s: float):
        self.jobs = jobs
        self.job_id = job_id
        self.interval_s = interval_s
        self._next_look = 0.0
        self._canceled = False

    def __call__(self) -> bool:
        if self._canceled or INTERRUPT.is_set():
            return True
        now = time.monotonic()
        if now >= self._next_look:
            self._canceled = self.jobs.cancel_requested(self.job_id)
            self._next_look = now + self.interval_s
        return self._canceled

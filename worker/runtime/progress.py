"""How a running job talks to Redis: buffered trace points and throttled cancel look-ups.

It also carries the worker's shutdown request to the solver: ``INTERRUPT`` is set by the worker's
SIGTERM handling (``worker.runtime.main``; in a forked work horse by its own SIGTERM handler) and the
cancel poller answers True as soon as it is set, so the solver stops at its next iteration check
exactly as for a cancel, and the job function stores the model with stop_reason ``interrupted``
(or puts the job back in the queue), well within a container's stop grace period.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from typing import Any

import redis

from core.schemas.jobs import WAITING_FOR_COMPILATION
from core.schemas.solver_params import SolverParams
from core.solvers import spec_of
from core.storage.capacity import is_out_of_memory
from core.storage.jobs import JobStore

INTERRUPT = threading.Event()
"""Set when this worker process was asked to stop (SIGTERM): running solvers stop at their next check."""

log = logging.getLogger("hinge.worker")
MAX_PENDING = 100_000
"""Most trace points a job keeps in memory while Redis is full (the oldest go first)."""


PHASES = (
    WAITING_FOR_COMPILATION,
    "loading data",
    "waiting for a core",
    "training",
    "cross-validating",
    "refitting the best setting",
    "scoring training data",
    "storing model",
)
"""What a running job is doing, as ``progress.phase`` says (in this order; a search has the middle two)."""

FLOOR = 1e-300
ETA_STABLE_LOOKS = 3
ETA_STABLE_S = 1.5
ETA_STABLE_SPREAD = 0.25
"""An ETA is published once this many estimates over at least this many seconds predict ends within this
share of the time left of each other."""


def convergence_fraction(
    solver: str, params: SolverParams, point: dict, first: float | None
) -> tuple[float, float | None]:
    """How far one binary problem is from its stopping rule, in [0, 1], and the measure used.

    The measure is what the solver's stopping rule compares with its tolerance: the largest
    projected-gradient or KKT violation, the cut violation or the gap (against max(tol_abs, tol_rel *
    primal)), as the solver's spec says (``core.solvers``). The fraction is the log-scale distance covered
    from the first measure to the tolerance, log(first / now) / log(first / tol), so halving the
    violation counts the same early and late; iterations over ``max_iter`` give a floor. ``first``
    is the problem's first measure (None: this point is the first).
    """
    measure, target = _measure(solver, params, point)
    fraction = 0.0
    if measure is not None and target is not None and target > 0:
        start = first if first is not None else measure
        if measure <= target:
            fraction = 1.0
        elif start > target and start > measure:
            fraction = math.log(start / max(measure, FLOOR)) / math.log(start / target)
    max_iter = getattr(params, "max_iter", None)
    iteration = point.get("iteration")
    if max_iter and iteration:
        fraction = max(fraction, float(iteration) / float(max_iter))
    return min(max(fraction, 0.0), 1.0), measure


def _measure(solver: str, params: SolverParams, point: dict) -> tuple[float | None, float | None]:
    """(measure, target) of the solver's stopping rule at this point (its spec's ``progress``); None when the
    point lacks it."""
    return spec_of(solver).progress(params, point)


class ProblemsEstimator:
    """The fraction of a job made of binary problems: the mean of the problems' fractions (done ones count 1)."""

    def __init__(self, solver: str, params: SolverParams, problems: int):
        self.solver = solver
        self.params = params
        self.problems = max(1, problems)
        self.first: dict[int, float] = {}
        self.fractions: dict[int, float] = {}
        self.done: set[int] = set()

    def observe(self, k: int, point: dict) -> None:
        """Take a trace point of problem k."""
        fraction, measure = convergence_fraction(self.solver, self.params, point, self.first.get(k))
        if measure is not None and k not in self.first:
            self.first[k] = measure
        self.fractions[k] = max(self.fractions.get(k, 0.0), fraction)

    def problem_done(self, k: int) -> None:
        """Problem k returned (converged or not)."""
        self.done.add(k)

    def fraction(self) -> float:
        """Mean over the problems."""
        total = sum(1.0 if k in self.done else self.fractions.get(k, 0.0) for k in range(self.problems))
        return min(1.0, total / self.problems)


class TraceSink:
    """Collects convergence points and pushes them (with the job's progress) every ``flush_s`` seconds.

    The progress it publishes (``JobProgress``) has the latest point's figures, the ``phase``, the
    ``fraction`` done (the estimator's, mapped into the window [``base``, ``base + span``] that the
    training code sets: a search gives cross-validation and the refit their own parts) and
    ``eta_s``, extrapolated from how fast the fraction grew over the recent past.
    """

    def __init__(self, jobs: JobStore, job_id: str, flush_s: float, subproblems: int):
        self.jobs = jobs
        self.job_id = job_id
        self.flush_s = flush_s
        self.subproblems = subproblems
        self.subproblem = 0
        self.run = 1  # run number of the job: points of a retried job carry `attempt` (from 2 on)
        self.phase = "training"
        self.estimator: Any = None  # ProblemsEstimator or anything with fraction()
        self.base = 0.0
        self.span = 1.0
        self.tags: dict = {}  # added to every point (a search's fold, C, gamma)
        self.started = time.monotonic()
        self._history: list[tuple[float, float]] = []  # (time, fraction) of recent publications
        self._ends: list[tuple[float, float]] = []  # (time, predicted end) of recent estimates
        self._fraction = 0.0
        self._pending: list[dict] = []
        self._last_flush = time.monotonic()
        self._latest: dict | None = None
        self._warned = False

    def add(self, point: dict, subproblem: int | None = None) -> None:
        """Take one point from the solver (tagged with the binary problem it belongs to)."""
        k = self.subproblem if subproblem is None else subproblem
        if self.estimator is not None and hasattr(self.estimator, "observe"):
            self.estimator.observe(k, point)
        if self.subproblems > 1:
            point = dict(point, subproblem=k)
        if self.tags:
            point = dict(point, **self.tags)
        if self.run > 1:
            point = dict(point, attempt=self.run)
        self._pending.append(point)
        self._latest = point
        if time.monotonic() - self._last_flush >= self.flush_s:
            self.flush()

    def set_phase(self, phase: str, *, fraction: float | None = None) -> None:
        """Enter a phase of the job and publish the progress at once."""
        self.phase = phase
        if fraction is not None:
            self._fraction = max(self._fraction, fraction)
        self.flush()

    def fraction(self) -> float:
        """The job's fraction done: never goes back."""
        if self.estimator is not None:
            self._fraction = max(self._fraction, self.base + self.span * self.estimator.fraction())
        return min(1.0, self._fraction)

    def eta_s(self, fraction: float) -> float | None:
        """Seconds left at the rate the fraction grew over the recent past (the last third of the run,
        at least 3 s), once that estimate is stable: None while the fraction has not grown, and while the
        end it predicts still moves (see ``_stable``): a first guess from the first second of a run can be
        off by a factor of 100."""
        now = time.monotonic()
        if fraction >= 1.0:
            return 0.0
        self._history.append((now, fraction))
        window = max(3.0, (now - self.started) / 3.0)
        while len(self._history) > 2 and self._history[1][0] <= now - window:
            self._history.pop(0)
        t0, f0 = self._history[0]
        if fraction > f0 and now - t0 >= 0.5:
            eta = (now - t0) * (1.0 - fraction) / (fraction - f0)
            return eta if self._stable(now, eta) else None
        return None

    def _stable(self, now: float, eta: float) -> bool:
        """Whether the predicted end (now + eta) has held still: at least ETA_STABLE_LOOKS estimates over at
        least ETA_STABLE_S seconds, whose predicted ends lie within ETA_STABLE_SPREAD of the time left."""
        self._ends.append((now, now + eta))
        self._ends = [(t, end) for t, end in self._ends if t >= now - max(ETA_STABLE_S * 3, 5.0)]
        if len(self._ends) < ETA_STABLE_LOOKS or now - self._ends[0][0] < ETA_STABLE_S:
            return False
        ends = [end for _, end in self._ends[-ETA_STABLE_LOOKS:]]
        return max(ends) - min(ends) <= ETA_STABLE_SPREAD * max(eta, 1.0)

    def progress(self) -> dict:
        """The job's progress as the latest point says."""
        latest = self._latest or {}
        fraction = self.fraction()
        eta = self.eta_s(fraction)
        return {
            "phase": self.phase,
            "fraction": round(fraction, 4),
            "eta_s": None if eta is None else round(eta, 1),
            "iteration": latest.get("iteration"),
            "elapsed_s": latest.get("elapsed_s"),
            "primal": latest.get("primal"),
            "dual": latest.get("dual", latest.get("lower_bound")),
            "gap": latest.get("gap"),
            "gap_rel": _relative_gap(latest),
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


def _relative_gap(point: dict) -> float | None:
    """The point's relative gap: its own ``gap_rel``, else gap / |primal| (None without both)."""
    if point.get("gap_rel") is not None:
        return point["gap_rel"]
    gap, primal = point.get("gap"), point.get("primal")
    if gap is None or not primal:
        return None
    return round(float(gap) / abs(float(primal)), 8)


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

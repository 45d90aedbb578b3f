"""The subtask runner: one job's independent pieces (one-vs-rest classes, C or gamma values, folds) in parallel.

Processes are forked from the worker with the data set already mapped in memory (the arrays are
memory-mapped copies of the worker's cached .npy files), so every subtask reads the same pages and
nothing is pickled per subtask but its small description and its result. numba's 'workqueue'
threading layer (set by the worker before numba is imported) makes forking safe, and each child
limits numba to cores // processes threads, so processes x threads <= cores.

Every subtask gets a SolverControl whose deadline is the job's and whose cancel flag is a shared
Event that the parent sets when a cancel is requested (the parent polls Redis; children do not
connect). Trace points travel back through a queue and reach the job's trace tagged with the
subtask. A subtask that raises fails the job: the parent stops the others and re-raises. The pool
is terminated in ``finally`` and children die with the worker (PR_SET_PDEATHSIG), so no process
outlives its job.

With one process everything runs in the calling process, with the same code path for results.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from dataclasses import dataclass
from typing import Any, Callable

_shared: dict = {}
"""What forked children inherit: the task function, the data and the channels (set before forking)."""


class SubtaskError(RuntimeError):
    """A subtask raised; the message names the subtask and the original error."""


@dataclass(frozen=True)
class SubtaskContext:
    """Handed to each subtask: its control pieces and a way to record trace points."""

    index: int
    deadline: float | None
    cancel_requested: Callable[[], bool]
    record_point: Callable[[dict], None]


def available_cores() -> int:
    """Cores one job of this worker may use: ``HINGE_WORKER_CORES`` when set (``hinge serve`` sets cores //
    workers, so that workers x threads <= cores and two jobs never fight over one core), else the cores
    this process may run on."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    from service.config import get_settings

    limit = get_settings().worker_cores
    return max(1, min(cores, limit)) if limit else cores


def _child_init(threads: int) -> None:
    # A forked child inherits the worker's Python signal handlers (SIGTERM asks the worker to stop
    # gracefully, SIGALRM is RQ's timeout): a subtask process must simply die when told to.
    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGALRM):
        signal.signal(number, signal.SIG_DFL)
    from service.ingest.entry import die_with_parent

    die_with_parent()
    try:
        import numba

        numba.set_num_threads(max(1, min(threads, numba.config.NUMBA_NUM_THREADS)))
    except Exception:  # pragma: no cover - numba missing or layer refuses
        pass


def _child_run(index: int):
    function = _shared["function"]
    points = _shared["points"]
    event = _shared["cancel_event"]
    context = SubtaskContext(
        index=index,
        deadline=_shared["deadline"],
        cancel_requested=event.is_set,
        record_point=lambda point: points.put((index, point)),
    )
    try:
        return index, function(_shared["tasks"][index], context), None
    except BaseException as exc:  # reported to the parent, which fails the job
        return index, None, f"{type(exc).__name__}: {exc}"


def run_subtasks(
    function: Callable[[Any, SubtaskContext], Any],
    tasks: list,
    *,
    n_processes: int,
    deadline: float | None,
    cancel_requested: Callable[[], bool],
    on_point: Callable[[int, dict], None],
    on_done: Callable[[int, Any], None] | None = None,
    poll_s: float = 0.05,
) -> list:
    """Run ``function(task, context)`` for every task; results in task order.

    ``on_point(i, point)`` receives trace points; ``on_done(i, result)`` is called as each subtask
    ends (in the parent, in completion order). Raises SubtaskError if a subtask raised.
    """
    n_processes = max(1, min(n_processes, len(tasks)))
    results: list = [None] * len(tasks)
    if n_processes == 1:
        for index, task in enumerate(tasks):
            context = SubtaskContext(index, deadline, cancel_requested, lambda point, i=index: on_point(i, point))
            results[index] = function(task, context)
            if on_done is not None:
                on_done(index, results[index])
        return results

    ctx = multiprocessing.get_context("fork")
    points = ctx.SimpleQueue()  # no feeder thread: a point is in the pipe when put() returns
    event = ctx.Event()
    _shared.update(function=function, tasks=tasks, deadline=deadline, points=points, cancel_event=event)
    threads = max(1, available_cores() // n_processes)
    pool = ctx.Pool(n_processes, initializer=_child_init, initargs=(threads,))
    try:
        pending = pool.imap_unordered(_child_run, range(len(tasks)))
        remaining = len(tasks)
        while remaining:
            _drain(points, on_point)
            if not event.is_set() and cancel_requested():
                event.set()
            try:
                index, result, error = pending.next(timeout=poll_s)
            except multiprocessing.TimeoutError:
                continue
            if error is not None:
                event.set()
                raise SubtaskError(f"subtask {index} failed: {error}")
            results[index] = result
            remaining -= 1
            _drain(points, on_point)
            if on_done is not None:
                on_done(index, result)
        _drain(points, on_point)
        return results
    finally:
        pool.terminate()
        pool.join()
        _shared.clear()


def _drain(points, on_point) -> None:
    while not points.empty():
        index, point = points.get()
        on_point(index, point)


def now() -> float:
    """The monotonic clock deadlines are measured on (shared by forked children)."""
    return time.monotonic()

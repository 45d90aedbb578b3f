"""The subtask runner: one job's independent pieces (one-vs-rest classes, C or gamma values, folds) in parallel.

Processes are forked from the worker with the data set already mapped in memory (the arrays are
memory-mapped copies of the worker's cached .npy files), so every subtask reads the same pages and
nothing is pickled per subtask but its small description and its result. numba's 'workqueue'
threading layer (set by the worker before numba is imported) makes forking safe, and each child
limits numba to cores // processes threads, so processes x threads <= cores.

Every subtask gets a SolverControl whose deadline is the job's and whose cancel flag is a shared
Event that the parent sets when a cancel is requested (the parent polls Redis; children do not
connect). Trace points travel back through a pipe in batches (one message per task and tenth of a
second) and reach the job's trace tagged with the subtask; the parent sleeps until a result or a batch
arrives, so a job's coordinating process costs next to nothing while its subtasks run. Tasks start
within the job's share of the machine's cores (``worker.core_budget``), asked again between tasks. A subtask that raises fails the job: the parent stops the others and re-raises. The pool
is terminated in ``finally`` and children die with the worker (PR_SET_PDEATHSIG), so no process
outlives its job.

With one process everything runs in the calling process, with the same code path for results.

``run_task_graph`` is the same runner for work whose pieces are only known as it goes: a finished
task may hand follow-up tasks to the scheduler (a model-selection path passes its warm start to the
fit at the next C), and the ready tasks run in priority order, at most one more at a time than there
are processes (so a free process never waits for the parent, and a follow-up usually runs in the
process that just ran its predecessor).
"""

from __future__ import annotations

import functools
import heapq
import multiprocessing
import multiprocessing.connection
import os
import queue
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

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
    """Cores one job of this worker may use at most: what its core lease wanted (``worker.core_budget``), else
    ``HINGE_WORKER_CORES`` when set, else the cores this process may run on."""
    from core.config import get_settings
    from core.processes import usable_cores
    from worker import core_budget

    lease = core_budget.current()
    if lease is not None:
        return lease.wanted
    cores = usable_cores()
    limit = get_settings().worker_cores
    return max(1, min(cores, limit)) if limit else cores


def _concurrency(n_processes: int) -> Callable[[int], int]:
    """How many tasks may run now, given how many run (``in_use``): the job's share of the cores when it
    holds a lease (``worker.core_budget``), else every process. One more than the processes may be
    handed to a full pool (it waits in the pool's queue, so a free process never waits for the parent);
    below that, exactly the share runs."""
    from worker import core_budget

    lease = core_budget.current()

    def limit(in_use: int) -> int:
        share = n_processes if lease is None else min(n_processes, lease.allowed(min(in_use, n_processes)))
        return share + 1 if share >= n_processes else share

    return limit


_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGALRM)


def _child_init(threads: int) -> None:
    # A forked child inherits the worker's Python signal handlers (SIGTERM asks the worker to stop
    # gracefully, SIGALRM is RQ's timeout): a subtask process must simply die when told to. It was
    # forked with these signals blocked (``_forked_pool``), so one sent before this line stays pending and
    # kills it on the unblock below, instead of reaching the inherited handler and being lost.
    for number in _STOP_SIGNALS:
        signal.signal(number, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
    from core.processes import die_with_parent
    from worker import core_budget

    core_budget.forget()  # the job's process follows the lease and starts this one's tasks

    die_with_parent()
    try:
        import numba

        pool_size = numba.config.NUMBA_NUM_THREADS  # type: ignore[attr-defined]  # set when numba is imported
        numba.set_num_threads(max(1, min(threads, pool_size)))
    except Exception:  # pragma: no cover - numba missing or layer refuses
        pass


def _forked_pool(ctx, n_processes: int, threads: int):
    """A fork-context Pool whose children start with the stop signals blocked until ``_child_init``.

    ``Pool.terminate`` SIGTERMs every child and then joins it. A child forked just before (the pool's
    worker-handler thread replaces children as they go) could get that SIGTERM before its initializer
    ran; the worker's inherited handler swallowed it, the child then waited forever for a task, and the
    join never returned: a job stayed `running` with every subtask done (seen under load, in the
    check_estimator test and in a client session). The signals are blocked in this thread while the
    pool is created, so its children and its handler threads (which fork the replacements) inherit the
    mask; this thread's mask is restored at once, and the worker's own signals still arrive."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    try:
        return ctx.Pool(n_processes, initializer=_child_init, initargs=(threads,))
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


POINT_BATCH_S = 0.1
"""A subtask process sends its trace points to the parent in batches, at most this often (and at its task's end)."""
POLL_S = 0.2
"""The parent waits this long at most for a result or points, then looks for a cancel (it wakes at once for either)."""


class _PointBatch:
    """A task's trace points on their way to the parent: one message per ``POINT_BATCH_S``, the rest at the end."""

    def __init__(self, points, index: int) -> None:
        self.points = points
        self.index = index
        self.buffer: list[dict] = []
        self.sent = time.monotonic()

    def add(self, point: dict) -> None:
        self.buffer.append(point)
        if time.monotonic() - self.sent >= POINT_BATCH_S:
            self.flush()

    def flush(self) -> None:
        if self.buffer:
            self.points.put((self.index, self.buffer))
            self.buffer = []
        self.sent = time.monotonic()


def _child_run_payload(index: int, payload):
    function = _shared["function"]
    event = _shared["cancel_event"]
    batch = _PointBatch(_shared["points"], index)
    context = SubtaskContext(
        index=index, deadline=_shared["deadline"], cancel_requested=event.is_set, record_point=batch.add
    )
    try:
        return index, function(payload, context), None
    except BaseException as exc:  # reported to the parent, which fails the job
        return index, None, f"{type(exc).__name__}: {exc}"
    finally:
        batch.flush()  # before the result: the parent reads every point of a task before its result


def run_subtasks(
    function: Callable[[Any, SubtaskContext], Any],
    tasks: list,
    *,
    n_processes: int,
    deadline: float | None,
    cancel_requested: Callable[[], bool],
    on_point: Callable[[int, dict], None],
    on_done: Callable[[int, Any], None] | None = None,
) -> list:
    """Run ``function(task, context)`` for every task; results in task order.

    ``on_point(i, point)`` receives trace points; ``on_done(i, result)`` is called as each subtask
    ends (in the parent, in completion order). Raises SubtaskError if a subtask raised. With several
    processes, a task not started because of a cancel has the result None.
    """
    n_processes = max(1, min(n_processes, len(tasks)))
    results: list = [None] * len(tasks)
    if n_processes == 1:
        for index, task in enumerate(tasks):
            context = SubtaskContext(index, deadline, cancel_requested, functools.partial(on_point, index))
            results[index] = function(task, context)
            if on_done is not None:
                on_done(index, results[index])
        return results

    def finished(index: int, result) -> list:
        results[index] = result
        if on_done is not None:
            on_done(index, result)
        return []

    run_task_graph(
        lambda index, context: function(tasks[index], context),
        [(index, index) for index in range(len(tasks))],  # dispatched in order: the context's index is the task's
        n_processes=n_processes,
        deadline=deadline,
        cancel_requested=cancel_requested,
        on_done=finished,
        on_point=on_point,
    )
    return results


def run_task_graph(
    function: Callable[[Any, SubtaskContext], Any],
    tasks: list[tuple[Any, Any]],
    *,
    n_processes: int,
    deadline: float | None,
    cancel_requested: Callable[[], bool],
    on_done: Callable[[Any, Any], list[tuple[Any, Any]]],
    on_point: Callable[[int, dict], None] | None = None,
) -> None:
    """Run ``function(payload, context)`` for every task; a finished task may add follow-ups.

    ``tasks`` are ``(priority, payload)`` pairs (lower priority runs first; priorities must be
    comparable and distinct). ``on_done(payload, result)`` runs in the parent as each task ends and
    returns the follow-up tasks it makes ready. Payloads travel to the processes by pickling, so a
    warm start can ride along. After a cancel no new task starts; the running ones see the cancel
    flag. Raises SubtaskError if a task raised.

    The parent sleeps until a result or a batch of trace points arrives (or ``POLL_S`` passes, to look
    for a cancel): it does not poll. It starts tasks within the job's share of the cores
    (``worker.core_budget``), which it asks again between tasks.
    """
    on_point = on_point or (lambda index, point: None)
    ready: list = []
    counter = 0

    def push(new_tasks) -> None:
        nonlocal counter
        for priority, payload in new_tasks:
            heapq.heappush(ready, (priority, counter, payload))
            counter += 1

    push(tasks)
    if n_processes <= 1:
        index = 0
        while ready and not cancel_requested():
            _priority, _order, payload = heapq.heappop(ready)
            context = SubtaskContext(index, deadline, cancel_requested, functools.partial(on_point, index))
            push(on_done(payload, function(payload, context)))
            index += 1
        return

    ctx = multiprocessing.get_context("fork")
    points = ctx.SimpleQueue()
    event = ctx.Event()
    _shared.update(function=function, deadline=deadline, points=points, cancel_event=event)
    threads = max(1, available_cores() // n_processes)
    concurrency = _concurrency(n_processes)
    wake_read, wake_write = os.pipe()  # the pool's result thread writes a byte here with each result
    finished: queue.SimpleQueue = queue.SimpleQueue()

    def arrived(message: tuple) -> None:
        finished.put(message)
        os.write(wake_write, b"x")

    pool = _forked_pool(ctx, n_processes, threads)
    running: dict[int, Any] = {}
    index = 0
    try:
        while ready or running:
            limit = concurrency(len(running))
            while ready and len(running) < limit and not event.is_set():
                _priority, _order, payload = heapq.heappop(ready)
                running[index] = payload
                pool.apply_async(
                    _child_run_payload,
                    (index, payload),
                    callback=arrived,
                    error_callback=functools.partial(_put_failure, arrived, index),
                )
                index += 1
            if event.is_set() and not running:
                break
            if not event.is_set() and cancel_requested():
                event.set()
            woken = multiprocessing.connection.wait([points._reader, wake_read], timeout=POLL_S)  # type: ignore[attr-defined]
            if wake_read in woken:
                os.read(wake_read, 4096)
            _drain(points, on_point)  # every point a task sent comes before its result
            while True:
                try:
                    done_index, result, error = finished.get_nowait()
                except queue.Empty:
                    break
                if error is not None:
                    event.set()
                    raise SubtaskError(f"subtask {done_index} failed: {error}")
                payload = running.pop(done_index)
                follow_ups = on_done(payload, result)
                if not event.is_set():
                    push(follow_ups)
        _drain(points, on_point)
    finally:
        pool.terminate()
        pool.join()
        _shared.clear()
        os.close(wake_read)
        os.close(wake_write)


def _put_failure(arrived: Callable[[tuple], None], index: int, exc: BaseException) -> None:
    """A task that raised in the pool: (index, no result, the error) for the parent."""
    arrived((index, None, f"{type(exc).__name__}: {exc}"))


def _drain(points, on_point) -> None:
    while not points.empty():
        index, batch = points.get()
        for point in batch:
            on_point(index, point)


SHARED_ROWS_MAX_BYTES = 256 << 20
"""Largest ``SharedRows`` made (above it, results travel back by pickling as any other)."""


class SharedRows:
    """One float64 row per task, in memory that forked subtask processes share with the parent: a task writes
    its large result vector there instead of sending it back through the result pipe.

    Why: one-vs-rest on sector sends back 105 weight vectors of 55,197 values (46 MB), and while the pool's
    result pipe holds unread data its worker-handler thread wakes in a loop (it waits on that pipe too),
    which cost the job's process a fifth of its CPU while its subtasks ran. A search's warm starts (dual
    variables, one row per path) travel from fit to fit the same way. Make it before the processes are
    forked (they inherit the mapping).

    A row holds any vector of at most ``n_columns`` values; ``take`` gives back as many as were put."""

    def __init__(self, n_rows: int, n_columns: int) -> None:
        import mmap

        import numpy as np

        size = n_rows * n_columns * 8
        self._map = mmap.mmap(-1, size + n_rows * 8)  # anonymous and shared: forked children write the parent's pages
        self.values = np.frombuffer(self._map, dtype=np.float64, count=n_rows * n_columns).reshape(n_rows, n_columns)
        self.lengths = np.frombuffer(self._map, dtype=np.int64, count=n_rows, offset=size)
        self.lengths[:] = -1

    @staticmethod
    def fits(n_rows: int, n_columns: int) -> bool:
        """Whether rows this large are worth sharing (at most ``SHARED_ROWS_MAX_BYTES``)."""
        return 0 < n_rows * n_columns * 8 <= SHARED_ROWS_MAX_BYTES

    def put(self, row: int, vector) -> bool:
        """Write the 1-D ``vector`` as row ``row`` (in a subtask process); False when it does not fit the row."""
        if vector is None or vector.ndim != 1 or vector.size > self.values.shape[1]:
            return False
        self.values[row, : vector.size] = vector
        self.lengths[row] = vector.size
        return True

    def take(self, row: int):
        """A copy of what was put in row ``row``, else None (in the parent once the task ended, or in the
        process that runs the task after it)."""
        vector = self.view(row)
        return None if vector is None else vector.copy()

    def view(self, row: int):
        """What was put in row ``row`` without a copy (it keeps the shared memory alive), else None: for rows
        nothing writes again. Sector's 105 weight vectors (46 MB) took 30-130 ms to copy out, while the
        model's matrix copies them once more anyway."""
        length = int(self.lengths[row])
        return self.values[row, :length] if length >= 0 else None


def now() -> float:
    """The monotonic clock deadlines are measured on (shared by forked children)."""
    return time.monotonic()

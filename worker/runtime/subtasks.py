"""The subtask runner: one job's independent pieces (one-vs-rest classes, C or gamma values, folds) in parallel.

Processes are forked from the worker with the data set already mapped in memory (the arrays are
memory-mapped copies of the worker's cached .npy files), so every subtask reads the same pages and
nothing is pickled per subtask but its small description and its result. numba's 'workqueue'
threading layer (set by the worker before numba is imported) makes forking safe, and each child
limits numba to cores // processes threads, so processes x threads <= cores.

Every subtask gets a SolverControl whose deadline is the job's and whose cancel flag is a shared
Event that the parent sets when a cancel is requested (the parent polls Redis; children do not
connect). Each process has a pipe of its own to the parent: a task goes down it, and its trace points
come back up it in batches (one message per task and tenth of a second), the last ones with its result; the points reach
the job's trace tagged with the subtask. The parent's one thread sleeps until a result or a batch arrives
(no handler threads, no shared queues), so a job's coordinating process costs next to nothing while its
subtasks run. Tasks start within the job's share of the machine's cores (``worker.runtime.core_budget``), asked
again between tasks. A subtask that raises, or whose process dies, fails the job: the parent stops the
others and re-raises. The processes are stopped in ``finally``: idle ones are parked and told to exit at the
job's end (``reap_retired``) or when the job's next graph starts, still-busy ones get SIGTERM. They die with
the worker (PR_SET_PDEATHSIG), so no process outlives its job.

With one process everything runs in the calling process, with the same code path for results.

``run_task_graph`` is the same runner for work whose pieces are only known as it goes: a finished
task may hand follow-up tasks to the scheduler (a model-selection path passes its warm start to the
fit at the next C), and the ready tasks run in priority order, each in the next idle process (so a
follow-up usually runs in the process that just ran its predecessor, while the others are busy).
"""

from __future__ import annotations

import functools
import heapq
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
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
    """Cores one job of this worker may use at most: what its core lease wanted (``worker.runtime.core_budget``), else
    ``HINGE_WORKER_CORES`` when set, else the cores this process may run on."""
    from core.config import get_settings
    from core.processes import usable_cores
    from worker.runtime import core_budget

    lease = core_budget.current()
    if lease is not None:
        return lease.wanted
    cores = usable_cores()
    limit = get_settings().worker_cores
    return max(1, min(cores, limit)) if limit else cores


def _concurrency(n_processes: int) -> Callable[[int], int]:
    """How many tasks may run now, given how many run (``in_use``): the job's share of the cores when it
    holds a lease (``worker.runtime.core_budget``), else every process."""
    from worker.runtime import core_budget

    lease = core_budget.current()

    def limit(in_use: int) -> int:
        return n_processes if lease is None else min(n_processes, lease.allowed(min(in_use, n_processes)))

    return limit


_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGALRM)


def _own_numba_launch_lock() -> None:
    """In a forked process: forget numba's lock around its thread pool's start, so that a fresh one is made here.

    That lock is a multiprocessing lock, shared with the parent through the fork: a process killed while holding
    it (a subtask process or an RQ work horse stopped during its start) left it held for good, and every later
    fork of the worker (and the worker itself, at its next parallel region) hung on it (tests/test_subtasks.py)."""
    parallel = sys.modules.get("numba.np.ufunc.parallel")
    if parallel is not None:
        parallel._backend_init_process_lock = None  # type: ignore[attr-defined]


os.register_at_fork(after_in_child=_own_numba_launch_lock)


def _child_init(threads: int) -> None:
    # A forked child inherits the worker's Python signal handlers (SIGTERM asks the worker to stop
    # gracefully, SIGALRM is RQ's timeout): a subtask process must simply die when told to. It was
    # forked with these signals blocked (``_forked_pool``), so one sent before this line stays pending and
    # kills it on the unblock below, instead of reaching the inherited handler and being lost.
    for number in _STOP_SIGNALS:
        signal.signal(number, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
    from core.processes import die_with_parent
    from worker.runtime import core_budget

    core_budget.forget()  # the job's process follows the lease and starts this one's tasks

    die_with_parent()
    try:
        import numba

        pool_size = numba.config.NUMBA_NUM_THREADS  # type: ignore[attr-defined]  # set when numba is imported
        numba.set_num_threads(max(1, min(threads, pool_size)))
    except Exception:  # pragma: no cover - numba missing or layer refuses
        pass


class _Processes:
    """The forked processes of one task graph, each with a pipe of its own: the parent writes a task to an
    idle process's pipe, and the process writes back the task's trace points and then its result.

    Why not ``multiprocessing.Pool``: its three handler threads in the parent (feeding tasks, reading
    results, watching the processes) woke with every message and took about as much CPU as the
    coordinating thread itself (a9a search, 2 processes: 35-55 ms of the parent's 60-90 ms per search),
    and its shared queues cost a lock per message. Here the parent's one thread waits on the busy
    processes' pipes and nothing else runs in it.

    The processes are forked with the stop signals blocked in this thread (and restored at once), so that a
    SIGTERM sent to a process before ``_child_init`` ran stays pending and kills it on the unblock there,
    instead of reaching the worker's inherited handler and being swallowed (the process would live on).
    """

    def __init__(self, ctx, n_processes: int, threads: int) -> None:
        _release_parked()  # the idle processes of an earlier graph of the job: not inherited by the new ones
        _retired[:] = [process for process in _retired if process.exitcode is None]  # reaps those that exited
        self.ctx = ctx
        self.threads = threads
        self.connections: list = [None] * n_processes
        self.processes: list = [None] * n_processes

    def send(self, number: int, message) -> None:
        """Send ``message`` to process ``number``, forking it first if it has not run yet: each process is forked
        as it gets its first task, so the first task starts without waiting for the other forks (7 ms each from
        a warm worker)."""
        if self.processes[number] is None:
            self.start(number)
        self.connections[number].send(message)

    def start(self, number: int) -> None:
        """Fork process ``number``, with the stop signals blocked meanwhile (see the class docstring)."""
        previous = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
        try:
            mine, theirs = self.ctx.Pipe(duplex=True)
            inherited = [connection for connection in self.connections if connection is not None]
            process = self.ctx.Process(target=_child_main, args=(theirs, self.threads, inherited), daemon=True)
            try:
                process.start()
            except BaseException:
                mine.close()
                raise
            finally:
                theirs.close()
            self.connections[number] = mine
            self.processes[number] = process
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)

    def close(self, busy) -> None:
        """Stop every process: idle ones are parked, to be told to exit at the job's end (``reap_retired``) or
        when the next graph starts, whichever comes first; ``busy`` ones (still in a task after a cancel or a
        failure) get SIGTERM and are waited for.

        Why parked: tearing down a forked process's memory took 11-15 ms of CPU a process. Waited for, it
        delayed every search's end; told to exit at once, it ran on the cores while the job scored its training
        rows and stored its model (a9a search, 2 processes: 8 ms from the end of training to the model stored,
        against 2 ms with one process)."""
        busy = set(busy)
        for number, (connection, process) in enumerate(zip(self.connections, self.processes)):
            if process is None:  # never given a task: never forked
                continue
            if number not in busy and process.is_alive():
                _parked.append((connection, process))
                continue
            process.terminate()
            process.join()
            connection.close()


_parked: list = []
"""(connection, process) of idle processes of finished task graphs, not yet told to exit."""
_retired: list = []
"""Processes told to exit, not yet waited for."""


def _release_parked() -> None:
    """Tell the parked processes to exit (without waiting for them)."""
    while _parked:
        connection, process = _parked.pop()
        try:
            connection.send(None)
        except OSError:  # it has gone already
            pass
        connection.close()
        _retired.append(process)


def reaping(job_function: Callable) -> Callable:
    """An RQ job function that tells the subtask processes it parked to exit, and waits for them, when it ends
    (``worker.runtime.jobs.train``, and a distributed search's settings and finish)."""

    @functools.wraps(job_function)
    def run(*args, **kwargs):
        try:
            return job_function(*args, **kwargs)
        finally:
            reap_retired()

    return run


def reap_retired() -> None:
    """Tell the parked processes of finished task graphs to exit and wait for every retired one (at the end of
    a job, once its outcome is recorded: no process outlives it)."""
    _release_parked()
    while _retired:
        _retired.pop().join()


def _child_main(connection, threads: int, inherited: list) -> None:
    """A subtask process: run the tasks its pipe brings until it brings None (or closes)."""
    for other in inherited:  # the parent's ends of the processes forked before this one
        other.close()
    _child_init(threads)
    while True:
        try:
            message = connection.recv()
        except EOFError:
            return
        if message is None:
            return
        index, payload = message
        _, result, error, points = _child_run_payload(index, payload, connection)
        try:  # the task's last trace points ride with its result: one message, and one wake-up of the parent
            connection.send(("done", index, result, error, points))
        except Exception as exc:  # a result that cannot be pickled: nothing of it was written
            connection.send(("done", index, None, f"{type(exc).__name__}: {exc}", points))


POINT_BATCH_S = 0.1
"""A subtask process sends its trace points to the parent in batches, at most this often (the rest with its result)."""
POLL_S = 0.2
"""The parent waits this long at most for a result or points, then looks for a cancel (it wakes at once for either)."""


class _PointBatch:
    """A task's trace points on their way to the parent: one message per ``POINT_BATCH_S``, the rest with its result."""

    def __init__(self, connection, index: int) -> None:
        self.connection = connection
        self.index = index
        self.buffer: list[dict] = []
        self.sent = time.monotonic()

    def add(self, point: dict) -> None:
        self.buffer.append(point)
        if time.monotonic() - self.sent >= POINT_BATCH_S:
            self.flush()

    def flush(self) -> None:
        if self.buffer:
            self.connection.send(("points", self.index, self.buffer))
            self.buffer = []
        self.sent = time.monotonic()


def _child_run_payload(index: int, payload, connection):
    function = _shared["function"]
    event = _shared["cancel_event"]
    batch = _PointBatch(connection, index)
    context = SubtaskContext(
        index=index, deadline=_shared["deadline"], cancel_requested=event.is_set, record_point=batch.add
    )
    try:
        return index, function(payload, context), None, batch.buffer
    except BaseException as exc:  # reported to the parent, which fails the job
        return index, None, f"{type(exc).__name__}: {exc}", batch.buffer


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
    start_after_deadline: bool = True,
) -> None:
    """Run ``function(payload, context)`` for every task; a finished task may add follow-ups.

    ``tasks`` are ``(priority, payload)`` pairs (lower priority runs first; priorities must be
    comparable and distinct). ``on_done(payload, result)`` runs in the parent as each task ends and
    returns the follow-up tasks it makes ready. Payloads travel to the processes by pickling, so a
    warm start can ride along. After a cancel no new task starts, nor once the deadline has passed
    when ``start_after_deadline`` is False (a search: a fit started then would stop at once, after its
    set-up and before its result was worth anything; the binary problems of one model all start, since
    the model needs each); the running ones see the cancel flag and the deadline. Raises SubtaskError if
    a task raised.

    The parent sleeps until a result or a batch of trace points arrives (or ``POLL_S`` passes, to look
    for a cancel): it does not poll. It starts tasks within the job's share of the cores
    (``worker.runtime.core_budget``), which it asks again between tasks.
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

    def past_deadline() -> bool:
        return not start_after_deadline and deadline is not None and time.monotonic() >= deadline

    if n_processes <= 1:
        index = 0
        while ready and not cancel_requested() and not past_deadline():
            _priority, _order, payload = heapq.heappop(ready)
            context = SubtaskContext(index, deadline, cancel_requested, functools.partial(on_point, index))
            push(on_done(payload, function(payload, context)))
            index += 1
        return

    ctx = multiprocessing.get_context("fork")
    event = ctx.Event()
    _shared.update(function=function, deadline=deadline, cancel_event=event)
    threads = max(1, available_cores() // n_processes)
    concurrency = _concurrency(n_processes)
    processes = _Processes(ctx, n_processes, threads)
    idle = list(range(n_processes - 1, -1, -1))  # processes without a task (the last one is given the next)
    busy: dict[int, int] = {}  # process -> the task it runs
    running: dict[int, Any] = {}  # task -> its payload
    index = 0
    try:
        while ready or running:
            limit = concurrency(len(running))
            while ready and idle and len(running) < limit and not event.is_set() and not past_deadline():
                _priority, _order, payload = heapq.heappop(ready)
                process = idle.pop()
                processes.send(process, (index, payload))
                busy[process] = index
                running[index] = payload
                index += 1
            if (event.is_set() or past_deadline()) and not running:
                break
            if not event.is_set() and cancel_requested():
                event.set()
            waiting = {processes.connections[process]: process for process in busy}
            for woken in multiprocessing.connection.wait(list(waiting), timeout=POLL_S):
                process = waiting[woken]
                connection = processes.connections[process]
                while busy.get(process) is not None and connection.poll():
                    message = _received(connection, processes.processes[process], busy[process])
                    if message[0] == "points":  # every point a task sent comes before its result
                        for point in message[2]:
                            on_point(message[1], point)
                        continue
                    _, done_index, result, error, points = message
                    for point in points:  # the task's last points, sent with its result
                        on_point(done_index, point)
                    del busy[process]
                    idle.append(process)
                    if error is not None:
                        event.set()
                        raise SubtaskError(f"subtask {done_index} failed: {error}")
                    follow_ups = on_done(running.pop(done_index), result)
                    if not event.is_set():
                        push(follow_ups)
    finally:
        processes.close(busy=busy)
        _shared.clear()


def _received(connection, process, task: int) -> tuple:
    """The next message of a busy process; SubtaskError when its pipe closed (the process died in the task)."""
    try:
        return connection.recv()
    except (EOFError, OSError):
        process.join(timeout=1.0)
        raise SubtaskError(
            f"subtask {task} failed: its process ended (exit code {process.exitcode}) before it finished"
        ) from None


SHARED_ROWS_MAX_BYTES = 256 << 20
"""Largest ``SharedRows`` made (above it, results travel back by pickling as any other)."""


class SharedRows:
    """One float64 row per task, in memory that forked subtask processes share with the parent: a task writes
    its large result vector there instead of sending it back through the result pipe.

    Why: one-vs-rest on sector sends back 105 weight vectors of 55,197 values (46 MB): through the result
    pipes they cost the job's process a fifth of its CPU while its subtasks ran (measured with the
    ``multiprocessing.Pool`` the runner used then). A search's warm starts (dual
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

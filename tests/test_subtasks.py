"""The subtask runner: order, progress, trace points, failures, cancel and deadline, no process left."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from tests.cluster import alive, descendants
from worker.runtime import subtasks
from worker.runtime.subtasks import SubtaskError, run_subtasks, run_task_graph


def square(task, context):
    context.record_point({"iteration": 1, "elapsed_s": 0.0, "task": task})
    return task * task, os.getpid()


def _running_children() -> set[int]:
    """This process's descendants that still run, once the runner's retired processes are waited for (a job's
    end does that: ``reap_retired``); zombies left unreaped would be listed by ``descendants`` too."""
    subtasks.reap_retired()
    assert not subtasks._retired and not subtasks._parked
    return {pid for pid in descendants(os.getpid()) if alive(pid)}


def _on_two_processes(function, tasks, on_point, on_done):
    return run_subtasks(
        function,
        tasks,
        n_processes=2,
        deadline=None,
        cancel_requested=lambda: False,
        on_point=on_point,
        on_done=on_done,
    )


def test_the_processes_of_a_finished_run_wait_until_told_and_then_exit_by_themselves():
    """They are parked after the run (their teardown would compete with the job's last steps), told to exit by
    the next run or the job's end (``reap_retired``), and end without a signal."""
    subtasks.reap_retired()
    results = _on_two_processes(square, list(range(4)), lambda i, p: None, None)
    first = {pid for _, pid in results}
    assert len(subtasks._parked) == 2 and all(alive(pid) for pid in first), "parked, alive"
    parked = [process for _, process in subtasks._parked]
    results = _on_two_processes(square, list(range(4)), lambda i, p: None, None)
    assert not {pid for _, pid in results} & first, "a new run has its own processes"
    assert len(subtasks._parked) == 2 and not set(parked) & {p for _, p in subtasks._parked}
    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in first) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not any(alive(pid) for pid in first), "the new run told the first run's processes to exit"
    retired = parked + [process for _, process in subtasks._parked]
    subtasks.reap_retired()
    assert not subtasks._parked and not subtasks._retired
    assert [process.exitcode for process in retired] == [0, 0, 0, 0]  # exited, not killed


def test_a_process_is_forked_with_its_first_task():
    """Two processes allowed, one task: one process is forked (the first task does not wait for the others)."""
    subtasks.reap_retired()
    results = []
    run_task_graph(
        square,
        [(0, 3)],
        n_processes=2,
        deadline=None,
        cancel_requested=lambda: False,
        on_done=lambda payload, result: results.append(result[0]) or [],
    )
    assert results == [9]
    assert len(subtasks._parked) == 1
    subtasks.reap_retired()


def test_a_reaping_job_function_leaves_no_process_behind():
    """Job functions other than ``train`` (a distributed search's settings and its finish) reap as they end."""
    subtasks.reap_retired()

    @subtasks.reaping
    def job_function():
        return {pid for _, pid in _on_two_processes(square, list(range(4)), lambda i, p: None, None)}

    pids = job_function()
    assert len(pids) == 2 and not subtasks._parked and not subtasks._retired
    assert not any(alive(pid) for pid in pids)


def test_results_in_order_with_points_and_progress():
    points, done = [], []
    results = _on_two_processes(
        square, list(range(7)), lambda i, p: points.append((i, p["task"])), lambda i, r: done.append(i)
    )
    assert [r[0] for r in results] == [t * t for t in range(7)]
    assert sorted(done) == list(range(7))
    assert sorted(points) == [(t, t) for t in range(7)]
    assert all(pid != os.getpid() for _, pid in results), "ran in child processes"
    assert not _running_children() & {r[1] for r in results}


def test_one_process_runs_in_place():
    results = run_subtasks(
        square, [3], n_processes=4, deadline=None, cancel_requested=lambda: False, on_point=lambda i, p: None
    )
    assert results == [(9, os.getpid())]


def fail_on_three(task, context):
    if task == 3:
        raise ValueError("bad fold")
    return task


def test_a_failing_subtask_fails_the_run_and_leaves_no_process():
    before = _running_children()
    with pytest.raises(SubtaskError, match="subtask 3 failed: ValueError: bad fold"):
        _on_two_processes(fail_on_three, list(range(6)), lambda i, p: None, None)
    after = _running_children()
    assert after <= before


def wait_for_stop(task, context):
    start = time.monotonic()
    while time.monotonic() - start < 30:
        if context.cancel_requested():
            return "canceled"
        if context.deadline is not None and time.monotonic() >= context.deadline:
            return "deadline"
        time.sleep(0.01)
    return "ran out"


def test_cancel_reaches_every_subtask():
    asked = time.monotonic() + 0.3
    start = time.monotonic()
    results = run_subtasks(
        wait_for_stop,
        [0, 1],
        n_processes=2,
        deadline=None,
        cancel_requested=lambda: time.monotonic() > asked,
        on_point=lambda i, p: None,
    )
    assert results == ["canceled", "canceled"]
    assert time.monotonic() - start < 5


def test_deadline_reaches_every_subtask():
    results = run_subtasks(
        wait_for_stop,
        [0, 1, 2],
        n_processes=2,
        deadline=time.monotonic() + 0.3,
        cancel_requested=lambda: False,
        on_point=lambda i, p: None,
    )
    assert results == ["deadline"] * 3


def countdown(payload, context):
    chain, step, carried = payload
    context.record_point({"chain": chain, "step": step})
    if chain == 2 and step == 1 and carried is None:
        raise ValueError("bad step")
    return carried + [os.getpid()], step


@pytest.mark.parametrize("processes", [1, 2])
def test_task_graph_runs_follow_ups_with_what_their_predecessor_handed_over(processes):
    """Three chains of four steps: each step gets its predecessor's result; steps run in priority order."""
    finished, points = [], []

    def on_done(payload, result):
        chain, step, _ = payload
        carried, _ = result
        finished.append((chain, step, len(carried)))
        return [((step + 1, chain), (chain, step + 1, carried))] if step < 3 else []

    run_task_graph(
        countdown,
        [((0, c), (c, 0, [])) for c in range(3)],
        n_processes=processes,
        deadline=None,
        cancel_requested=lambda: False,
        on_done=on_done,
        on_point=lambda i, p: points.append(p),
    )
    assert sorted(finished) == [(c, s, s + 1) for c in range(3) for s in range(4)], "each step saw its chain's history"
    assert len(points) == 12
    if processes == 1:
        assert finished == [(c, s, s + 1) for s in range(4) for c in range(3)], "breadth first by priority"


def test_task_graph_failure_fails_the_run_and_leaves_no_process():
    before = _running_children()

    def on_done(payload, result):
        chain, step, _ = payload
        return [((step + 1, chain), (chain, step + 1, None if chain == 2 else result[0]))] if step < 2 else []

    with pytest.raises(SubtaskError, match="ValueError: bad step"):
        run_task_graph(
            countdown,
            [((0, c), (c, 0, [])) for c in range(3)],
            n_processes=2,
            deadline=None,
            cancel_requested=lambda: False,
            on_done=on_done,
        )
    after = _running_children()
    assert after <= before


def test_task_graph_cancel_stops_running_tasks_and_starts_no_new_one():
    asked = time.monotonic() + 0.3
    done = []

    def on_done(payload, result):
        done.append(result)
        return [(1, "never")]

    start = time.monotonic()
    run_task_graph(
        wait_for_stop,
        [(0, "a"), (1, "b"), (2, "c"), (3, "d")],
        n_processes=2,
        deadline=None,
        cancel_requested=lambda: time.monotonic() > asked,
        on_done=on_done,
    )
    assert time.monotonic() - start < 5
    assert 1 <= len(done) <= 3 and set(done) == {"canceled"}, done


_REAL_CHILD_INIT = subtasks._child_init


def _slow_init(threads: int) -> None:
    time.sleep(1.0)  # the window a SIGTERM can arrive in, before the child resets its handlers
    _REAL_CHILD_INIT(threads)


def test_a_child_told_to_stop_before_its_initializer_ran_still_dies(monkeypatch):
    # the runner SIGTERMs a process still in a task; one forked just before could get the signal while it
    # still had the worker's inherited handler, which swallowed it: the process lived on and the join hung
    import multiprocessing
    import signal

    swallowed: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda number, _frame: swallowed.append(number))
    monkeypatch.setattr(subtasks, "_child_init", _slow_init)
    try:
        processes = subtasks._Processes(multiprocessing.get_context("fork"), 1, 1)
        processes.start(0)
        child = processes.processes[0]
        time.sleep(0.2)
        os.kill(child.pid, signal.SIGTERM)  # during its initializer's sleep
        child.join(timeout=10)
        assert child.exitcode == -signal.SIGTERM, child.exitcode
        processes.close(busy=[])
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert not swallowed  # and the parent's own handler saw nothing
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == set()  # the parent's mask is back as it was


def _exit_in_task(task, context):
    if task == 1:
        os._exit(3)  # as the kernel's OOM killer or a crash in compiled code would end it
    time.sleep(0.05)
    return task


def test_a_process_that_dies_in_a_task_fails_the_run_and_leaves_no_process():
    before = _running_children()
    with pytest.raises(SubtaskError, match="subtask 1 failed: its process ended \\(exit code 3\\)"):
        _on_two_processes(_exit_in_task, [0, 1, 2, 3], lambda i, p: None, None)
    assert _running_children() <= before


def _unpicklable(task, context):
    return (lambda: task) if task == 2 else task


def test_a_result_that_cannot_travel_fails_the_run_naming_the_task():
    with pytest.raises(SubtaskError, match="subtask 2 failed: .*pickle"):
        _on_two_processes(_unpicklable, [0, 1, 2, 3], lambda i, p: None, None)


def many_points(task, context):
    for k in range(200):
        context.record_point({"iteration": k + 1, "elapsed_s": 0.0, "task": task})
        if k % 50 == 0:
            time.sleep(0.06)  # some batches leave while the task runs, the rest with its end
    return task


def test_every_point_of_a_task_arrives_in_order_and_before_its_result():
    events: list[tuple[str, int, int]] = []
    _on_two_processes(
        many_points,
        list(range(6)),
        lambda i, p: events.append(("point", i, p["iteration"])),
        lambda i, r: events.append(("done", i, 0)),
    )
    for task in range(6):
        mine = [e for e in events if e[1] == task]
        assert [e[2] for e in mine[:-1]] == list(range(1, 201)), "all points, in order"
        assert mine[-1][0] == "done", "the result after every point"


def _put_row(task, context):
    return _SHARED.put(task, np.full(5, float(task))) and os.getpid()


_SHARED: subtasks.SharedRows


def test_tasks_write_their_vectors_into_rows_the_parent_reads(monkeypatch):
    global _SHARED
    _SHARED = subtasks.SharedRows(4, 5)
    pids = run_subtasks(
        _put_row, [0, 1, 2, 3], n_processes=2, deadline=None, cancel_requested=lambda: False, on_point=lambda i, p: None
    )
    assert all(pid and pid != os.getpid() for pid in pids), "written by the subtask processes"
    for row in range(4):
        np.testing.assert_array_equal(_SHARED.take(row), np.full(5, float(row)))
    assert not _SHARED.put(0, np.zeros(6)), "a vector longer than a row is not taken"
    assert _SHARED.put(1, np.arange(3.0)), "a shorter one is"
    np.testing.assert_array_equal(_SHARED.take(1), np.arange(3.0))
    fresh = subtasks.SharedRows(2, 5)
    assert fresh.take(1) is None, "a row nobody wrote"
    assert subtasks.SharedRows.fits(105, 55197) and not subtasks.SharedRows.fits(105, 10**6)


def test_a_process_killed_holding_numbas_launch_lock_hangs_no_later_process():
    """numba's lock around its thread pool's start is shared with forked processes: a subtask process killed while
    holding it (stopped during its start) had left it held, and every later subtask process hung on it (seen once
    in the full suite, after the test above that stops a process before its initializer ran)."""
    import signal

    from numba.np.ufunc import parallel

    parallel._launch_threads()  # this process's lock exists
    lock = parallel._backend_init_process_lock
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        lock.acquire()
        os._exit(0)  # dies holding it
    os.waitpid(pid, 0)

    def too_long(signum, frame):
        raise TimeoutError("the subtask processes hung on numba's launch lock")

    previous = signal.signal(signal.SIGALRM, too_long)
    signal.alarm(60)
    try:
        results = []
        _on_two_processes(square, [1, 2, 3], lambda i, p: None, lambda i, r: results.append(r))
        assert sorted(result[0] for result in results) == [1, 4, 9]
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        parallel._backend_init_process_lock = None  # this process's own lock is held for good: a fresh one

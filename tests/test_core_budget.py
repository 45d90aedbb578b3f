"""The machine's cores leased by jobs through Redis (worker.runtime.core_budget): a lone job gets every core it can use,
jobs side by side share them, nobody holds more than the cores, the dead are forgotten, and the subtask
runner starts tasks only within its share."""

from __future__ import annotations

import random
import time

import pytest
import redis

from core.storage import keys
from tests.conftest import Database, database_url
from worker.runtime import core_budget, subtasks
from worker.runtime.core_budget import CoreLease

pytestmark = pytest.mark.service  # the kinds of tests: tests/conftest.py, TEST_KINDS


@pytest.fixture()
def client(redis_server):
    # a database of its own (the URL's database wins over a `db` argument: name it in the URL)
    connection = redis.Redis.from_url(database_url(redis_server.url, Database.CORE_BUDGET))
    assert connection.connection_pool.connection_kwargs["db"] == Database.CORE_BUDGET
    connection.flushdb()
    yield connection
    connection.flushdb()
    connection.close()


def _lease(client, worker: str, wanted: int, *, total: int = 2, alive: bool = True, changes=None) -> CoreLease:
    if alive:
        client.set(keys.worker_alive(worker), "{}")
    on_change = None if changes is None else changes.append
    return CoreLease(client, worker, wanted, "test", machine_cores=total, machine="m-test", on_change=on_change)


def _held(client) -> dict[str, int]:
    return {k.decode(): int(v.split(b":")[0]) for k, v in client.hgetall(keys.core_leases("m-test")).items()}


def _never() -> bool:
    return False


def test_a_lone_job_gets_every_core_it_wants_and_a_second_job_gets_its_share_once_one_is_free(client):
    changes: list[dict] = []
    a = _lease(client, "wa", 2, changes=changes)
    assert a.acquire(_never, on_wait=lambda share: None)
    assert a.share == 2 and _held(client) == {"wa": 2}
    assert changes[-1]["cores"] == 2 and changes[-1]["reason"].endswith("free")

    b = _lease(client, "wb", 1)
    waited = []
    assert b._call("lease", 0).cores == 0, "no core free: b waits"
    assert client.hget(keys.core_waiters("m-test"), "wb") == b"1:"

    assert a.allowed(2) == 1, "a job waits: a's share is half the cores"
    assert _held(client) == {"wa": 2}, "but a holds both while its two tasks run"
    assert "wait for a core" in changes[-1]["reason"]
    assert a.allowed(1) == 1 and _held(client) == {"wa": 1}, "a task ended: the core goes back at once"

    assert b.acquire(_never, on_wait=waited.append) and b.share == 1 and not waited
    assert _held(client) == {"wa": 1, "wb": 1}
    assert client.hlen(keys.core_waiters("m-test")) == 0

    b.release()
    a._next_look = 0.0
    assert a.allowed(1) == 2, "alone again: a grows into the free core"
    assert _held(client) == {"wa": 2}
    a.release()
    assert _held(client) == {}


def test_a_job_waits_for_a_core_and_gives_up_when_told_to_stop(client):
    a = _lease(client, "wa", 2)
    assert a.acquire(_never, on_wait=lambda share: None)
    b = _lease(client, "wb", 1)
    waits: list = []
    started = time.monotonic()
    assert not b.acquire(lambda: time.monotonic() - started > 0.3, on_wait=waits.append)
    assert len(waits) == 1 and waits[0].held_by_others == 2
    assert client.hlen(keys.core_waiters("m-test")) == 0, "a job that gave up no longer waits"
    assert _held(client) == {"wa": 2}


def test_the_cores_of_a_dead_worker_are_forgotten(client):
    dead = _lease(client, "gone", 2)
    assert dead.acquire(_never, on_wait=lambda share: None)
    client.delete(keys.worker_alive("gone"))  # its heartbeat key expired: the worker died holding 2 cores
    fresh = _lease(client, "new", 2)
    assert fresh.acquire(_never, on_wait=lambda share: None) and fresh.share == 2
    assert _held(client) == {"new": 2}


def test_the_cores_of_a_job_that_no_longer_runs_are_forgotten(client):
    """A work horse killed while its job held cores: the worker lives on (idle), its job is no longer running."""
    client.hset(keys.job("job_x"), mapping={"status": "running", "worker": "wx"})
    client.set(keys.worker_alive("wx"), "{}")
    held = CoreLease(client, "wx", 2, "test", job_id="job_x", machine_cores=2, machine="m-test")
    assert held.acquire(_never, on_wait=lambda share: None)
    other = _lease(client, "wy", 1)
    assert other._call("lease", 0).cores == 0, "job_x runs: its cores are taken"
    client.hset(keys.job("job_x"), mapping={"status": "queued"})  # the reaper put it back in the queue
    assert other.acquire(_never, on_wait=lambda share: None) and other.share == 1
    assert _held(client) == {"wy": 1}


def test_held_cores_never_exceed_the_machine_whatever_the_jobs_do(client):
    """Random jobs on 3 cores: leases, waits, refreshes with tasks starting within the share and ending,
    releases. At every step the cores the jobs use sum to at most 3, and waiting jobs get a core eventually."""
    total = 3
    rng = random.Random(7)
    workers = [f"w{k}" for k in range(5)]
    leases = {w: _lease(client, w, rng.choice([1, 2, 3]), total=total) for w in workers}
    using = dict.fromkeys(workers, 0)  # tasks running per job (what it uses)
    state = dict.fromkeys(workers, "idle")
    served = set()
    for _step in range(3000):
        w = rng.choice(workers)
        lease = leases[w]
        lease._next_look = 0.0
        if state[w] in ("idle", "waiting"):
            share = lease._call("lease", 0)
            if share.cores:
                lease.share, lease.holding, state[w] = share.cores, share.cores, "running"
                using[w] = share.cores
                served.add(w)
            else:
                state[w] = "waiting"
        elif rng.random() < 0.05:
            lease.release()
            using[w], state[w] = 0, "idle"
        else:
            if using[w] and rng.random() < 0.5:
                using[w] -= 1  # a task ended
            allowed = lease.allowed(using[w])
            if using[w] < allowed:
                using[w] += 1  # a task started within the share
        assert sum(using.values()) <= total, (using, _held(client))
        assert all(using[x] <= int(_held(client).get(x, 0)) for x in workers), "a job holds what it uses"
    assert served == set(workers)


class _FakeLease:
    """A lease whose share follows a script (1 core, then 2), recording what the runner said it used."""

    def __init__(self) -> None:
        self.wanted = 2
        self.in_use: list[int] = []
        self.started = time.monotonic()

    def allowed(self, in_use=None) -> int:
        self.in_use.append(in_use)
        return 1 if time.monotonic() - self.started < 1.0 else 2


def _sleep_and_time(payload, context):
    start = time.monotonic()
    time.sleep(0.25)
    return start, time.monotonic()


def test_the_runner_starts_tasks_within_the_jobs_share(monkeypatch):
    lease = _FakeLease()
    monkeypatch.setattr(core_budget, "_current", lease)
    spans: list[tuple[float, float]] = []
    subtasks.run_task_graph(
        _sleep_and_time,
        [(k, k) for k in range(10)],
        n_processes=2,
        deadline=None,
        cancel_requested=lambda: False,
        on_done=lambda payload, result: spans.append(result) or [],
    )
    assert len(spans) == 10
    first_second = [s for s in spans if s[0] < lease.started + 0.95]
    late = [s for s in spans if s[0] > lease.started + 1.3]

    def overlapping(group) -> int:
        return max(sum(1 for a, b in group if a <= t < b) for t, _ in group)

    assert overlapping(first_second) == 1, "one core: one task at a time"
    assert late and overlapping(late) == 2, "two cores: two tasks side by side"
    assert max(used for used in lease.in_use if used is not None) <= 2


def test_a_job_says_how_many_cores_it_got_and_why(http):
    from core.processes import usable_cores
    from tests.helpers import sparse_problem, to_svmlight, upload, wait_job

    dataset = upload(http, to_svmlight(*sparse_problem(400, 30, 5, seed=3))).json()

    def run(params: dict, data: dict = dataset) -> dict:
        response = http.post("/v1/jobs", json={"dataset_id": data["id"], "solver": "dcd", "params": params})
        assert response.status_code == 202, response.text
        job = wait_job(http, response.json()["id"])
        assert job["status"] == "succeeded", job
        return job["cores"]

    machine = usable_cores()
    single = run({"C": 1.0})
    assert single["wanted"] == 1 and single["cores"] == 1 and single["machine_cores"] == machine
    assert "one binary problem: dcd runs on one core" in single["reason"]

    search = run({"search": {"C": [0.1, 1.0], "cv_folds": 3}})
    assert search["wanted"] == machine and 1 <= search["cores"] <= machine
    assert "a search runs its fits side by side" in search["reason"]

    capped = run({"search": {"C": [0.1, 1.0], "cv_folds": 3}, "n_processes": 1})
    assert capped["wanted"] == 1 and capped["cores"] == 1 and "n_processes 1 requested" in capped["reason"]

    # one-vs-rest on 400 rows fits its problems in the job's own process; on 1,200 rows side by side
    few = upload(http, to_svmlight(*sparse_problem(400, 30, 5, seed=3, n_classes=3))).json()
    many = upload(http, to_svmlight(*sparse_problem(1200, 30, 5, seed=3, n_classes=3))).json()
    small = run({"C": 1.0}, few)
    assert small["wanted"] == 1 and "400 rows, too few to gain from a process per problem" in small["reason"]
    side_by_side = run({"C": 1.0}, many)
    assert side_by_side["wanted"] == min(machine, 3) and "3 binary problems side by side" in side_by_side["reason"]


def test_small_data_wants_one_core_unless_processes_are_asked_for():
    from core.solvers import solver_params

    def wanted(params: dict, rows: int, nonzeros: int, problems: int = 3) -> int:
        return core_budget.wanted_cores("dcd", solver_params("dcd", params), problems, 4, rows=rows, nonzeros=nonzeros)[
            0
        ]

    assert wanted({}, 150, 600) == 1  # iris: a fork per class would cost more than the three fits
    assert wanted({"probability": True}, 150, 600, problems=1) == 1
    assert wanted({}, 999, 19_999) == 1
    assert wanted({}, 1_000, 600) == 3 and wanted({}, 150, 20_000) == 3  # not small: a process per problem
    assert wanted({"n_processes": 2}, 150, 600) == 2  # asked for: given
    assert wanted({"search": {"C": [0.1, 1.0]}}, 150, 600) == 4  # a search shares its processes over many fits

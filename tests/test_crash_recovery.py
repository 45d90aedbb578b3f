"""Faults injected into real processes (kill -9 of workers, the API and Redis; SIGTERM of a worker).

Each test says what it broke and checks what the service did and that nothing was lost. The
cluster runs with a 0.3 s heartbeat, a 2 s lease and a 0.3 s reaper interval (the defaults are
2 s, 10 s and 2 s): detection latencies below scale with those settings. Measured latencies are
written to tests/benchmarks/results/crash_latency.json by the tests that measure them when
HINGE_RECORD_RESULTS=1 (a plain test run leaves the repository unchanged).
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import numpy as np
import pytest

from tests.cluster import Cluster, alive, descendants
from tests.helpers import sparse_problem, to_svmlight, upload, wait_for, wait_job

pytestmark = pytest.mark.service  # the kinds of tests: tests/conftest.py, TEST_KINDS

SLOW = {"C": 1000.0, "tol": 1e-12, "max_iter": 10_000_000, "shrinking": False}
LATENCY_FILE = Path(__file__).resolve().parent / "benchmarks" / "results" / "crash_latency.json"
latencies: dict[str, float] = {}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    running = Cluster(tmp_path_factory.mktemp("crash")).start(workers=2)
    try:
        yield running
    finally:
        running.stop()
        if latencies and os.environ.get("HINGE_RECORD_RESULTS"):
            LATENCY_FILE.parent.mkdir(parents=True, exist_ok=True)
            LATENCY_FILE.write_text(
                json.dumps(
                    {
                        "what": "seconds from kill -9 of a worker to its job leaving `running` (reaper decision)",
                        "settings": {
                            k: v
                            for k, v in running.env.items()
                            if k in ("HINGE_HEARTBEAT_S", "HINGE_WORKER_LEASE_S", "HINGE_REAP_INTERVAL_S")
                        },
                        "latencies_s": latencies,
                    },
                    indent=2,
                )
                + "\n"
            )


@pytest.fixture(scope="module")
def datasets(cluster):
    with cluster.http() as http:
        slow = upload(http, to_svmlight(*sparse_problem(6000, 400, 12, seed=7, random_labels=True)), name="slow").json()
        small = upload(http, to_svmlight(*sparse_problem(300, 20, 5, seed=1)), name="small").json()
        three = upload(
            http, to_svmlight(*sparse_problem(3000, 200, 10, seed=5, n_classes=3, random_labels=True)), name="three"
        ).json()
    return {"slow": slow, "small": small, "three": three}


def submit(http, dataset, **params):
    response = http.post("/v1/jobs", json={"dataset_id": dataset["id"], "solver": "dcd", "params": params})
    assert response.status_code == 202, response.text
    return response.json()


def wait_running_with_trace(http, job_id: str, points: int = 2) -> None:
    wait_job(http, job_id, statuses=("running",), timeout=120)
    wait_for(
        lambda: len(http.get(f"/v1/jobs/{job_id}/trace").json()["points"]) >= points,
        timeout=60,
        message=f"{points} trace points",
    )


def replace_worker(cluster: Cluster, proc, execution: str = "inline") -> None:
    cluster.forget_worker(proc)
    cluster.start_worker(execution)
    cluster.wait_workers(2)


def test_sigkill_worker_mid_job_is_retried_on_another_worker(cluster, datasets):
    """kill -9 of a worker (its process only): noticed at once, job retried elsewhere, no process left."""
    with cluster.http() as http:
        job = submit(http, datasets["slow"], max_seconds=4.0, retries=1, **SLOW)
        wait_running_with_trace(http, job["id"])
        victim = cluster.worker_running(job["id"])
        family = descendants(victim.pid)
        assert family, "the worker has its heartbeat process"
        killed = time.monotonic()
        cluster.kill_worker(victim, signal.SIGKILL)
        wait_for(
            lambda: (
                cluster.job_record(job["id"]).get("attempts") == "2"
                or cluster.job_record(job["id"])["status"] != "running"
            ),
            timeout=30,
            interval=0.02,
            message="the lost job noticed",
        )
        latencies["kill_worker_process"] = round(time.monotonic() - killed, 3)
        final = wait_job(http, job["id"], timeout=120)
        assert final["status"] == "succeeded", final
        assert final["stop_reason"] == "deadline"
        record = cluster.job_record(job["id"])
        assert record["attempts"] == "2" and record["lost"] == "1"
        assert int(record["worker"].split(".")[-2]) != victim.pid
        points = http.get(f"/v1/jobs/{job['id']}/trace").json()["points"]
        assert any(p.get("attempt") == 2 for p in points), "the retry's points are marked"
        assert http.get(f"/v1/models/{final['model_id']}").status_code == 200
        wait_for(
            lambda: not any(alive(pid) for pid in family), timeout=10, message="no process of the dead worker left"
        )
    replace_worker(cluster, victim)


def test_sigkill_worker_and_its_children_without_retries_fails_worker_lost(cluster, datasets):
    """kill -9 of the whole process group (no heartbeat process to say goodbye): lease expiry, then worker_lost."""
    with cluster.http() as http:
        job = submit(http, datasets["slow"], retries=0, **SLOW)
        wait_running_with_trace(http, job["id"])
        victim = cluster.worker_running(job["id"])
        killed = time.monotonic()
        cluster.kill_worker(victim, signal.SIGKILL, group=True)
        final = wait_job(http, job["id"], statuses=("failed",), timeout=30)
        latencies["kill_worker_process_group"] = round(time.monotonic() - killed, 3)
        assert final["error"]["code"] == "worker_lost"
        assert "retries (0)" in final["error"]["message"]
        assert http.get(f"/v1/jobs/{job['id']}/trace").json()["points"], "the trace so far is kept"
        metrics = http.get("/metrics").text
        assert 'hinge_job_events_total{event="lost"}' in metrics
    replace_worker(cluster, victim)


def test_fork_mode_worker_killed_leaves_no_work_horse(cluster, datasets):
    """Fork execution: kill -9 of the worker kills its work horse too (PDEATHSIG) and the job is retried."""
    for proc in list(cluster.workers):  # only a fork-mode worker may take the next job
        cluster.kill_worker(proc, signal.SIGTERM, group=True)
        assert cluster.forget_worker(proc) == 0
    fork_worker = cluster.start_worker("fork")
    cluster.wait_workers(1)
    with cluster.http() as http:
        job = submit(http, datasets["slow"], max_seconds=3.0, retries=1, **SLOW)
        wait_running_with_trace(http, job["id"])
        assert cluster.worker_running(job["id"]) is fork_worker
        family = descendants(fork_worker.pid)
        assert len(family) >= 2, "heartbeat process and work horse"
        cluster.kill_worker(fork_worker, signal.SIGKILL)
        wait_for(lambda: not any(alive(pid) for pid in family), timeout=10, message="work horse and heartbeat gone")
        cluster.forget_worker(fork_worker)
        cluster.start_worker()
        cluster.start_worker()
        final = wait_job(http, job["id"], timeout=120)
        assert final["status"] == "succeeded" and cluster.job_record(job["id"])["attempts"] == "2"
    cluster.wait_workers(2)


def test_sigterm_checkpoints_the_running_job(cluster, datasets):
    """docker stop: SIGTERM reaches the solver; the job ends with its best model, stop_reason interrupted."""
    with cluster.http() as http:
        job = submit(http, datasets["slow"], **SLOW)
        wait_running_with_trace(http, job["id"], points=3)
        victim = cluster.worker_running(job["id"])
        asked = time.monotonic()
        cluster.kill_worker(victim, signal.SIGTERM, group=True)
        final = wait_job(http, job["id"], timeout=30)
        took = time.monotonic() - asked
        assert final["status"] == "succeeded" and final["stop_reason"] == "interrupted", final
        model = http.get(f"/v1/models/{final['model_id']}").json()
        assert model["stop_reason"] == "interrupted" and np.isfinite(model["objective"])
        assert cluster.forget_worker(victim, timeout=30) == 0, "the worker exits cleanly"
        assert took < 30, "within the compose file's stop_grace_period"
        latencies["sigterm_to_checkpoint"] = round(took, 3)
        answer = http.post(f"/v1/models/{final['model_id']}/predict", json={"instances": [[0.0] * 400]})
        assert answer.status_code == 200
    cluster.start_worker()
    cluster.wait_workers(2)


def test_sigterm_with_requeue_policy_hands_the_job_back(cluster, datasets):
    """shutdown_policy=requeue: SIGTERM puts the running job back in the queue; another worker runs it; no retry used."""
    for proc in list(cluster.workers):  # only the requeue-policy worker may take the job
        cluster.kill_worker(proc, signal.SIGTERM, group=True)
        assert cluster.forget_worker(proc) == 0
    stopping = cluster.start_worker(env={"HINGE_SHUTDOWN_POLICY": "requeue"})
    cluster.wait_workers(1)
    with cluster.http() as http:
        job = submit(http, datasets["slow"], max_seconds=3.0, **SLOW)
        wait_running_with_trace(http, job["id"], points=1)
        cluster.kill_worker(stopping, signal.SIGTERM, group=True)
        assert cluster.forget_worker(stopping, timeout=30) == 0
        assert http.get(f"/v1/jobs/{job['id']}").json()["status"] == "queued"
        cluster.start_worker()
        cluster.start_worker()
        final = wait_job(http, job["id"], timeout=120)
        assert final["status"] == "succeeded" and final["stop_reason"] == "deadline", final
        record = cluster.job_record(job["id"])
        assert record["attempts"] == "2" and record.get("lost", "0") == "0", "a hand-back uses no retry"
    cluster.wait_workers(2)


def test_api_killed_and_restarted_loses_nothing(cluster, datasets):
    """kill -9 of the API while a job runs and another waits: workers go on; after restart all is there."""
    with cluster.http() as http:
        running = submit(http, datasets["slow"], max_seconds=2.0, **SLOW)
        wait_job(http, running["id"], statuses=("running",), timeout=60)
        queued = [submit(http, datasets["small"]) for _ in range(3)]
    cluster.api.send_signal(signal.SIGKILL)
    cluster.api.wait(10)
    with cluster.client() as client:  # the workers go on without the API
        wait_for(
            lambda: all(client.hget(f"hinge:job:{j['id']}", "status") == b"succeeded" for j in [running, *queued]),
            timeout=120,
            message="jobs finished while the API was down",
        )
    before = cluster.snapshot()
    cluster.start_api()
    with cluster.http() as http:
        for job in [running, *queued]:
            got = http.get(f"/v1/jobs/{job['id']}").json()
            assert got["status"] == "succeeded"
            assert http.get(f"/v1/models/{got['model_id']}").status_code == 200
        assert http.get(f"/v1/datasets/{datasets['slow']['id']}").json()["sha256"] == datasets["slow"]["sha256"]
    assert cluster.snapshot() == before


def test_redis_killed_and_restarted_loses_nothing(cluster, datasets):
    """kill -9 of Redis with finished, running and queued jobs: append-only file keeps all; everything completes."""
    with cluster.http() as http:
        done = submit(http, datasets["small"])
        done = wait_job(http, done["id"])
        prediction = http.post(f"/v1/models/{done['model_id']}/predict", json={"instances": [[1.0] * 20]}).json()
        blockers = [submit(http, datasets["slow"], max_seconds=3.0, **SLOW) for _ in range(2)]
        for blocker in blockers:
            wait_job(http, blocker["id"], statuses=("running",), timeout=60)
        queued = [submit(http, datasets["small"], seed=i) for i in range(3)]
        fresh = upload(http, to_svmlight(*sparse_problem(200, 10, 3, seed=11)), name="just-before").json()
    before = {k: v for k, v in cluster.snapshot().items()}
    finished_keys = {
        k: v
        for k, v in before.items()
        if k.startswith(("hinge:dataset:", "hinge:model:"))
        or k == f"hinge:job:{done['id']}"
        or k == f"hinge:job:{done['id']}:trace"
    }
    cluster.redis.kill()
    time.sleep(1.0)
    with cluster.http() as http:
        down = http.get(f"/v1/jobs/{done['id']}")
        assert down.status_code == 503 and down.json()["error"]["code"] == "storage_unavailable"
    cluster.redis.start()
    after = cluster.snapshot()
    for key, value in finished_keys.items():
        assert after.get(key) == value, f"{key} changed or vanished across the Redis crash"
    with cluster.http() as http:
        for job in [*blockers, *queued]:
            final = wait_job(http, job["id"], timeout=180)
            assert final["status"] == "succeeded", final
        assert (
            http.post(f"/v1/models/{done['model_id']}/predict", json={"instances": [[1.0] * 20]}).json() == prediction
        )
        assert http.get(f"/v1/datasets/{fresh['id']}").json()["sha256"] == fresh["sha256"]
        assert len(http.get(f"/v1/jobs/{done['id']}/trace").json()["points"]) >= 1
    cluster.wait_workers(2, timeout=60)

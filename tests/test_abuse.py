"""The service used the way people really do (issue 9): lying and stalled clients, a full Redis, a full
worker disk, jobs deleted by hand or by their time-to-live.

One cluster of its own (tests/cluster.py) with short settings: request bodies must keep arriving
within 1 s (HINGE_BODY_TIMEOUT_S) at 200 bytes/s or more after that (HINGE_BODY_MIN_RATE), finished
jobs live 3 s (HINGE_JOB_TTL_S) where a test asks for it, and Redis has a maxmemory the tests move
with CONFIG SET to fill it.
"""

from __future__ import annotations

import json
import select
import socket
import subprocess
import time

import pytest
import redis

from tests.cluster import Cluster
from tests.helpers import assert_error, sparse_problem, to_svmlight, upload, wait_for, wait_job

pytestmark = pytest.mark.service  # the kinds of tests: tests/conftest.py, TEST_KINDS

SLOW = {"C": 1000.0, "tol": 1e-12, "max_iter": 10_000_000, "shrinking": False}
SETTINGS = {"HINGE_BODY_TIMEOUT_S": "1", "HINGE_BODY_MIN_RATE": "200", "HINGE_WORKER_CACHE_BYTES": str(50 * 2**20)}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    running = Cluster(tmp_path_factory.mktemp("abuse"), env_extra=SETTINGS, redis_maxmemory=512 * 2**20).start(
        workers=1
    )
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def small(cluster):
    with cluster.http() as http:
        return upload(http, to_svmlight(*sparse_problem(300, 20, 5, seed=1)), name="small").json()


def raw_exchange(
    port: int, head: bytes, body: bytes, byte_every_s: float | None = None, limit_s: float = 120.0
) -> tuple[int, dict, dict, float]:
    """Send a request by hand (all at once, or one byte every ``byte_every_s``); returns status, headers, JSON, seconds."""
    begin = time.monotonic()
    with socket.create_connection(("127.0.0.1", port), timeout=limit_s) as sock:
        sock.sendall(head)
        if byte_every_s is None:
            sock.sendall(body)
        else:
            for i in range(len(body)):
                if select.select([sock], [], [], 0)[0] or time.monotonic() - begin > limit_s:
                    break  # the server answered (or gave up on us)
                sock.sendall(body[i : i + 1])
                time.sleep(byte_every_s)
        raw = b""
        while True:
            try:
                piece = sock.recv(65536)
            except (TimeoutError, ConnectionResetError):
                break
            if not piece:
                break
            raw += piece
            if b"\r\n\r\n" in raw:
                head_part, _, rest = raw.partition(b"\r\n\r\n")
                length = [
                    int(line.split(b":")[1])
                    for line in head_part.split(b"\r\n")
                    if line.lower().startswith(b"content-length")
                ]
                if length and len(rest) >= length[0]:
                    break
    seconds = time.monotonic() - begin
    head_part, _, rest = raw.partition(b"\r\n\r\n")
    lines = head_part.decode().split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
    return int(lines[0].split()[1]), headers, json.loads(rest), seconds


# -- item 3: clients that lie or stall ------------------------------------------------------------------


@pytest.mark.parametrize(
    "path, content_type",
    [
        ("/v1/datasets", "multipart/form-data; boundary=xyz"),
        ("/v1/jobs", "application/json"),
        ("/v1/models/mdl_x/predict", "application/json"),
    ],
)
def test_a_body_shorter_than_its_content_length_gets_408(cluster, path, content_type):
    head = (
        f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: {content_type}\r\nContent-Length: 1000000000\r\n\r\n"
    ).encode()
    limit = 10**9 if path == "/v1/datasets" else None
    if limit is None:  # JSON routes refuse a 1 GB Content-Length at once (413): lie with a smaller one
        head = head.replace(b"1000000000", b"1000")
    status, headers, body, _ = raw_exchange(cluster.port, head, b"--xyz\r\nabc")
    assert status == 408, body
    assert body["error"]["code"] == "request_timeout"
    assert "stopped arriving" in body["error"]["message"]
    assert headers.get("connection") == "close"
    with cluster.http() as http:  # and it cost nothing: the service answers as before
        assert http.get("/healthz").status_code == 200


def test_a_client_sending_a_byte_at_a_time_gets_408(cluster):
    part = b'--xyz\r\nContent-Disposition: form-data; name="file"; filename="a.svm"\r\n\r\n' + b"1 1:1\n" * 200
    body = part + b"\r\n--xyz--\r\n"
    head = (
        f"POST /v1/datasets HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=xyz\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    status, _, answer, _ = raw_exchange(cluster.port, head, body, byte_every_s=0.02)
    assert status == 408, answer
    assert "too slow" in answer["error"]["message"] and answer["error"]["details"]["limit"] == "body_min_rate"
    assert not list((cluster.root / "data" / "uploads").glob("*")), "the spooled part of the body was removed"


def test_a_slow_but_steady_upload_is_accepted(cluster):
    body = to_svmlight(*sparse_problem(50, 5, 2, seed=3))
    with cluster.http() as http:

        def pieces():
            for start in range(0, len(body), 400):
                yield body[start : start + 400]
                time.sleep(0.5)  # 800 bytes/s: above the 200 bytes/s floor

        files = {"file": ("steady.svm", b"".join(pieces()), "application/octet-stream")}
        assert http.post("/v1/datasets", files=files).status_code == 201


# -- item 4: Redis full ---------------------------------------------------------------------------------


def _used(client: redis.Redis) -> int:
    return int(client.info("memory")["used_memory"])


def test_uploads_need_room_in_redis_for_their_record_only_and_a_full_redis_refuses_them_whole(cluster, small):
    """Shards go to the object store: Redis with a few MB to spare takes a data set of several MB (its record is a
    few hundred bytes); Redis full to its reserve refuses the upload with 507 before a shard is written."""
    objects = cluster.root / "data" / "objects" / "datasets"
    with cluster.http() as http:
        job = http.post("/v1/jobs", json={"dataset_id": small["id"], "solver": "dcd"}).json()
        model_id = wait_job(http, job["id"])["model_id"]
        big = to_svmlight(*sparse_problem(20_000, 200, 20, seed=2))  # about 4.8 MB of arrays
        with cluster.client() as client:
            client.config_set("maxmemory", _used(client) + 2 * 2**20)  # room for 2 MB only (reserve 0.1 of it)
            try:
                fits = upload(http, big, name="bigger-than-the-room")
                assert fits.status_code == 201, fits.text
                assert _used(client) < int(client.config_get("maxmemory")["maxmemory"])
                shards_before = sorted(objects.rglob("*.shard"))
                count_before = http.get("/v1/datasets").json()["total"]
                # a tenth of the limit is the reserve: an upload's record must leave it free, and cannot
                client.config_set("maxmemory", int(_used(client) / 0.95))
                response = upload(http, big, name="too-big")
                error = assert_error(response, 507, "storage_full", "HINGE_REDIS_MAXMEMORY")
                assert error["details"]["needed_bytes"] > error["details"]["available_bytes"]
                # nothing half-stored: no record, no shard
                assert http.get("/v1/datasets").json()["total"] == count_before
                assert sorted(objects.rglob("*.shard")) == shards_before
                # and the service keeps working: predictions
                assert http.post(f"/v1/models/{model_id}/predict", json={"instances": [[0.5] * 20]}).status_code == 200
            finally:
                client.config_set("maxmemory", 512 * 2**20)
        again = http.post("/v1/jobs", json={"dataset_id": fits.json()["id"], "solver": "ocas"}).json()
        assert wait_job(http, again["id"])["status"] == "succeeded"
        assert upload(http, big, name="fits-now").status_code == 201


def test_a_model_that_does_not_fit_fails_its_job_with_storage_full(cluster, small):
    with cluster.http() as http:
        # One row names feature 1,000,000: a linear model of this data set weighs 8 MB.
        text = to_svmlight(*sparse_problem(3000, 400, 12, seed=7, random_labels=True)) + b"1 1000000:0.001\n"
        wide = upload(http, text, name="wide").json()
        job = http.post("/v1/jobs", json={"dataset_id": wide["id"], "solver": "dcd", "params": SLOW}).json()
        wait_for(
            lambda: len(http.get(f"/v1/jobs/{job['id']}/trace").json()["points"]) >= 2,
            timeout=120,
            message="trace points",
        )
        with cluster.client() as client:
            client.config_set("maxmemory", _used(client) + 4 * 2**20)  # room for traces and records, not the model
            try:
                assert http.post(f"/v1/jobs/{job['id']}/cancel").status_code == 202
                final = wait_job(http, job["id"])
            finally:
                client.config_set("maxmemory", 512 * 2**20)
            assert not list(client.scan_iter("hinge:model:*:array:weights:*", count=10_000)) or all(
                client.exists(key.decode().split(":array:")[0]) for key in client.scan_iter("hinge:model:*:array:*")
            )
        assert final["status"] == "failed", final
        assert final["error"]["code"] == "storage_full", final
        assert final.get("model_id") is None, final
        # the worker goes on
        assert (
            wait_job(http, http.post("/v1/jobs", json={"dataset_id": small["id"], "solver": "dcd"}).json()["id"])[
                "status"
            ]
            == "succeeded"
        )


# -- item 7: deleting jobs, and their time-to-live ------------------------------------------------------


def test_delete_a_job(cluster, small):
    with cluster.http() as http:
        slow = upload(
            http, to_svmlight(*sparse_problem(3000, 400, 12, seed=8, random_labels=True)), name="slow2"
        ).json()
        job = http.post("/v1/jobs", json={"dataset_id": slow["id"], "solver": "dcd", "params": SLOW}).json()
        wait_job(http, job["id"], statuses=("running",))
        refused = http.delete(f"/v1/jobs/{job['id']}")
        assert assert_error(refused, 409, "job_not_finished", "cancel it first")["details"] == {"status": "running"}
        http.post(f"/v1/jobs/{job['id']}/cancel")
        model_id = wait_job(http, job["id"])["model_id"]
        stats_before = {k: v for k, v in _job_stats(cluster).items() if not k.startswith("event:")}
        assert http.delete(f"/v1/jobs/{job['id']}").status_code == 204
        assert http.get(f"/v1/jobs/{job['id']}").status_code == 404
        assert http.delete(f"/v1/jobs/{job['id']}").status_code == 404
        assert job["id"] not in [j["id"] for j in http.get("/v1/jobs", params={"limit": 1000}).json()["items"]]
        with cluster.client() as client:
            assert not list(client.scan_iter(f"hinge:job:{job['id']}*"))
        stats_after = _job_stats(cluster)
        assert stats_after["canceled"] == stats_before["canceled"] - 1
        # the model stays and still predicts; its trace is gone with the job
        assert http.post(f"/v1/models/{model_id}/predict", json={"instances": [[0.0] * 400]}).status_code == 200
        assert http.get(f"/v1/models/{model_id}/trace").json()["points"] == []


def _job_stats(cluster) -> dict:
    with cluster.client() as client:
        return {k.decode(): int(v) for k, v in client.hgetall("hinge:stats:jobs").items()}


def test_finished_jobs_expire_after_their_ttl(tmp_path, small):
    ttl = Cluster(tmp_path / "ttl", env_extra={"HINGE_JOB_TTL_S": "3"})
    ttl.redis.start()
    ttl.start_api()  # the API's reaper expires jobs; no worker is needed for jobs canceled while queued
    try:
        with ttl.http() as http:
            dataset = upload(http, to_svmlight(*sparse_problem(100, 5, 2, seed=4))).json()
            ids = [
                http.post("/v1/jobs", json={"dataset_id": dataset["id"], "solver": "dcd"}).json()["id"]
                for _ in range(3)
            ]
            for job_id in ids[:2]:
                assert http.post(f"/v1/jobs/{job_id}/cancel").json()["status"] == "canceled"
            wait_for(
                lambda: all(http.get(f"/v1/jobs/{j}").status_code == 404 for j in ids[:2]),
                timeout=60,
                message="the finished jobs to expire",
            )
            assert http.get(f"/v1/jobs/{ids[2]}").json()["status"] == "queued", "a queued job never expires"
            assert http.get("/v1/jobs").json()["total"] == 1
        with ttl.client() as client:
            assert int(client.hget("hinge:stats:jobs", "canceled")) == 0
            assert client.zcard("hinge:jobs:finished") == 0
    finally:
        ttl.stop()


# -- item 5: the worker's disk is full --------------------------------------------------------------------


def _unshare_works() -> bool:
    try:
        return subprocess.run(["unshare", "-Urm", "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.mark.skipif(not _unshare_works(), reason="needs `unshare -Urm` (user and mount namespaces) for a small tmpfs")
def test_worker_disk_full_fails_the_job_clearly_and_the_worker_goes_on(cluster, small):
    cache = cluster.root / "data" / "cache" / "datasets"
    cache.mkdir(parents=True, exist_ok=True)
    # A second worker whose data-set cache is a 24 MB tmpfs (its own mount namespace): 16 MB of it stay free
    # for other files, so a copy needs to fit in 8 MB.
    wrapper = ["unshare", "-Urm", "sh", "-c", f'mount -t tmpfs -o size=24m tmpfs "{cache}" && exec "$0" "$@"']
    with cluster.http() as http:
        big = upload(http, to_svmlight(*sparse_problem(60_000, 200, 15, seed=11)), name="10MB").json()
        for proc in list(cluster.workers):  # only the small-disk worker takes jobs
            cluster.kill_worker(proc, group=True)
            cluster.forget_worker(proc)
        small_disk = cluster.start_worker(wrapper=wrapper)
        cluster.wait_workers(1)
        failed = wait_job(http, http.post("/v1/jobs", json={"dataset_id": big["id"], "solver": "dcd"}).json()["id"])
        assert failed["status"] == "failed", failed
        assert failed["error"]["code"] == "worker_disk_full"
        assert "needs" in failed["error"]["message"] and "free" in failed["error"]["message"]
        # the same worker goes on with a job whose data fit
        ok = wait_job(http, http.post("/v1/jobs", json={"dataset_id": small["id"], "solver": "dcd"}).json()["id"])
        assert ok["status"] == "succeeded", ok
        # (not a count of heartbeats: the killed workers' keys live on until their lease ends)
        assert small_disk.poll() is None, "the worker whose disk was full exited"
        ran_by = {int(cluster.job_record(j)["worker"].split(".")[-2]) for j in (failed["id"], ok["id"])}
        assert ran_by == {small_disk.pid}, "unshare and sh exec the worker: the same process ran both jobs"


# -- found by the soak run: a worker killed between RQ's dequeue and the job's start --------------------


def test_a_job_whose_worker_died_between_dequeue_and_start_is_queued_again(tmp_path):
    from core.config import Settings
    from core.lifecycle import Reaper
    from core.queueing import JobQueue
    from core.schemas.jobs import JobStatus
    from core.storage.job_record import JobRecord
    from core.storage.jobs import JobStore
    from service.embedded_redis import EmbeddedRedis

    server = EmbeddedRedis(tmp_path / "redis").start()
    try:
        client = redis.Redis.from_url(server.url)
        settings = Settings(redis_url=server.url, worker_lease_s=0.2)
        jobs, queue = JobStore(client), JobQueue(client, settings)
        ids = []
        for n in range(3):
            job_id = f"job_rescue{n}"
            jobs.create(
                JobRecord(
                    id=job_id,
                    tenant="t",
                    status=JobStatus.queued,
                    dataset_id="ds_x",
                    solver="dcd",
                    params={},
                    created_at="now",
                )
            )
            queue.enqueue(job_id, "t")
            ids.append(job_id)
        rq_queue = queue.tenant_queue("t")
        # job 0: taken by a worker that died right after RQ's dequeue (still in the intermediate list)
        client.lmove(rq_queue.key, f"{rq_queue.key}:intermediate", "LEFT", "RIGHT")
        # job 1: taken, in the started registry of a worker whose heartbeat is gone
        first = client.lpop(rq_queue.key).decode()
        client.hset(f"rq:job:{first}", "worker_name", "gone-host.4242.abcdef")
        client.zadd(rq_queue.started_job_registry.key, {f"{first}:exec1": time.time() + 600})
        # job 2: its RQ job is in no list at all (a Redis restart in that window, then RQ's own clean-up)
        client.lpop(rq_queue.key)
        assert client.llen(rq_queue.key) == 0
        reaper = Reaper(client, settings)
        wait_for(lambda: int(client.info("server")["uptime_in_seconds"]) >= 1, timeout=10, message="Redis uptime")
        reaper.pass_once()  # notes the three jobs no worker will take
        time.sleep(0.3)  # longer than the (0.2 s) lease
        reaper.pass_once()
        for job_id in ids:
            job = jobs.get(job_id)
            assert job is not None and job.status is JobStatus.queued and job.attempts == 0, job
            assert job.rq_job_id == f"{job_id}_r2", job  # enqueued again under a new RQ job id
        waiting = [raw.decode() for raw in client.lrange(rq_queue.key, 0, -1)]
        assert sorted(waiting) == sorted(f"{j}_r2" for j in ids)
        assert client.llen(f"{rq_queue.key}:intermediate") == 0
        assert client.zcard(rq_queue.started_job_registry.key) == 0
        assert int(client.hget("hinge:stats:jobs", "event:rescued")) == 3
        time.sleep(0.3)
        reaper.pass_once()  # nothing more to do: they wait in the queue again
        assert int(client.hget("hinge:stats:jobs", "event:rescued")) == 3
        client.close()
    finally:
        server.stop()

"""The service on a real S3 server (SeaweedFS, started here): data sets larger than Redis, and the store going
away in the middle of an upload and before a job, with the API and workers as separate processes."""

from __future__ import annotations

import threading
import time

import httpx
import numpy as np
import pytest

from core.storage.objects import StoreUnavailable
from tests.cluster import Cluster
from tests.helpers import assert_error, sparse_problem, to_svmlight, upload, wait_for, wait_job
from tests.s3_server import SeaweedS3

pytestmark = pytest.mark.service  # the kinds of tests: tests/conftest.py, TEST_KINDS

REDIS_MAXMEMORY = 16 * 2**20


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    server = SeaweedS3(tmp_path_factory.mktemp("seaweedfs-service")).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, s3):
    env = dict(s3.env(), HINGE_SHARD_BYTES="1048576", HINGE_FOLLOW_UPLOAD_BYTES="4096", HINGE_STORE_RETRY_S="120")
    running = Cluster(tmp_path_factory.mktemp("s3-service"), env_extra=env, redis_maxmemory=REDIS_MAXMEMORY)
    running.start(workers=1)
    try:
        yield running
    finally:
        running.stop()


def s3_keys(s3: SeaweedS3, prefix: str = "datasets/") -> set[str]:
    return {info.key for info in s3.store().list(prefix)}


def test_a_data_set_larger_than_redis_uploads_trains_and_predicts(cluster, s3):
    indptr, indices, data, y = sparse_problem(150_000, 2000, 16, seed=3)
    text = to_svmlight(indptr, indices, data, y)
    arrays_bytes = indices.size * 4 + indices.size * 4 + y.size * 16
    assert arrays_bytes > REDIS_MAXMEMORY, "the data set is larger than Redis's memory"
    with cluster.http() as http, cluster.client() as client:
        created = upload(http, text, name="larger-than-redis")
        assert created.status_code == 201, created.text
        dataset = created.json()
        assert dataset["nnz"] == indices.size and dataset["n_samples"] == 150_000
        assert len([k for k in s3_keys(s3) if dataset["id"] in k]) >= 5, "several shards"
        models, loads = {}, {}
        for solver in ("dcd", "ocas"):
            job = http.post("/v1/jobs", json={"dataset_id": dataset["id"], "solver": solver, "params": {"C": 1}})
            done = wait_job(http, job.json()["id"], timeout=300)
            assert done["status"] == "succeeded", done
            models[solver] = http.get(f"/v1/models/{done['model_id']}").json()
            assert models[solver]["train_accuracy"] > 0.8
            loads[solver] = done["data_load"]
        shard_bytes = sum(shard["bytes"] for shard in cluster.dataset_record(dataset["id"])["shards"])
        assert loads["dcd"]["fetched_bytes"] == shard_bytes and not loads["dcd"]["cached"], loads
        assert loads["ocas"] == dict(loads["ocas"], fetched_bytes=0, cached=True), "the second job read the cache"
        rows = {"instances": [{"1": 0.5, "7": -1.0}, {"12": 2.0}]}
        assert len(http.post(f"/v1/models/{models['dcd']['id']}/predict", json=rows).json()["labels"]) == 2
        report = http.post(f"/v1/models/{models['ocas']['id']}/evaluate", json={"dataset_id": dataset["id"]})
        assert report.status_code == 200 and report.json()["accuracy"] == pytest.approx(
            models["ocas"]["train_accuracy"]
        )
        info = client.info("memory")
        assert info["used_memory_peak"] < REDIS_MAXMEMORY, "Redis never held the data set"
        ready = http.get("/readyz").json()
        assert ready["status"] == "ok" and ready["object_store"] == "ok"


def multipart_in_two_parts(text: bytes, pause: threading.Event, resume: threading.Event):
    """A multipart body whose second half waits until ``resume`` is set (``pause`` is set when it waits)."""
    boundary = "hinge-test-boundary"
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="cut.svm"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode()
    tail = f"\r\n--{boundary}--\r\n".encode()
    middle = text.rfind(b"\n", 0, len(text) // 2) + 1

    def body():
        yield head
        for start in range(0, middle, 1 << 16):
            yield text[start : min(middle, start + (1 << 16))]
        pause.set()
        resume.wait(60)
        for start in range(middle, len(text), 1 << 16):
            yield text[start : start + (1 << 16)]
        yield tail

    length = len(head) + len(text) + len(tail)
    headers = {"Content-Type": f"multipart/form-data; boundary={boundary}", "Content-Length": str(length)}
    return body(), headers


def test_the_store_stopped_mid_upload_refuses_it_whole_and_the_next_upload_works(cluster, s3):
    text = to_svmlight(*sparse_problem(40_000, 500, 16, seed=4))
    with cluster.http() as http:
        before = http.get("/v1/datasets").json()["total"]
        pause, resume = threading.Event(), threading.Event()
        body, headers = multipart_in_two_parts(text, pause, resume)
        answer: dict = {}

        def send():
            answer["response"] = httpx.post(
                f"{cluster.base_url}/v1/datasets", content=body, headers=headers, timeout=120
            )

        sender = threading.Thread(target=send)
        sender.start()
        assert pause.wait(60)
        time.sleep(1.0)  # the first half is parsed and its shards are written
        s3.stop()
        try:
            resume.set()
            sender.join(120)
            response = answer["response"]
            error = assert_error(response, 503, "store_unavailable", "object store", "nothing was stored")
            assert response.headers.get("Retry-After") == "5"
            assert s3.endpoint in error["details"]["store"]
            assert http.get("/v1/datasets").json()["total"] == before
            degraded = http.get("/readyz").json()
            assert degraded["status"] == "degraded" and degraded["object_store"].startswith("unavailable")
        finally:
            s3.start()
        ok = upload(http, text, name="after-the-outage")
        assert ok.status_code == 201, ok.text
        # what the cut upload wrote and could not delete is collected (grace 0 here: it is old enough)
        assert cluster.run_hinge("store", "gc", "--grace-s", "0").returncode == 0
        owned = {
            shard["key"]
            for dataset in http.get("/v1/datasets?limit=1000").json()["items"]
            for shard in cluster.dataset_record(dataset["id"])["shards"]
        }
        assert s3_keys(s3) == owned


def test_a_job_waits_for_the_store_and_succeeds_once_it_is_back(cluster, s3):
    with cluster.http() as http:
        dataset = upload(http, to_svmlight(*sparse_problem(5000, 100, 10, seed=5)), name="uncached").json()
        s3.stop()
        try:
            job = http.post("/v1/jobs", json={"dataset_id": dataset["id"], "solver": "dcd"}).json()
            waiting = wait_for(
                lambda: (
                    (http.get(f"/v1/jobs/{job['id']}").json().get("progress") or {}).get("phase")
                    == "waiting for the object store"
                ),
                timeout=60,
                message="the job to say it waits for the store",
            )
            assert waiting
        finally:
            s3.start()
        done = wait_job(http, job["id"], timeout=120)
        assert done["status"] == "succeeded", done


def test_a_store_that_refuses_the_credentials_is_named_by_readiness_and_uploads(cluster, s3):
    """A second API on the same Redis with a wrong secret: /readyz says not ready and why, uploads answer 503
    `store_misconfigured`, and the secret appears nowhere."""
    from service.embedded_redis import free_port
    from tests.conftest import _terminate, start_api

    port = free_port()
    env = dict(cluster.env, HINGE_S3_SECRET_ACCESS_KEY="wrong-secret-value")
    api = start_api(env, port)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_for(lambda: _answers(base), timeout=60, message="the second API")
        ready = httpx.get(f"{base}/readyz", timeout=10)
        error = assert_error(ready, 503, "not_ready", "object store")
        assert error["details"]["object_store"].startswith("refused") and "wrong-secret-value" not in ready.text
        response = httpx.post(
            f"{base}/v1/datasets", files={"file": ("a.svm", b"1 1:1\n-1 2:1\n", "text/plain")}, timeout=30
        )
        assert_error(response, 503, "store_misconfigured", "HINGE_S3_SECRET_ACCESS_KEY")
        assert "wrong-secret-value" not in response.text
    finally:
        _terminate(api)


def _answers(base: str) -> bool:
    try:
        return httpx.get(f"{base}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def test_unavailable_is_what_a_stopped_store_raises(s3):
    """(The error kind the service's 503 and the job's wait rest on.)"""
    s3.stop()
    try:
        with pytest.raises(StoreUnavailable):
            s3.store(retry_s=0.5).put("datasets/ds_x/a.shard", np.zeros(4).data)
    finally:
        s3.start()

"""Per-tenant limits and fairness, on a cluster of its own: a flood of one tenant does not starve another.

Also the running-jobs cap, checked on a real Redis without workers: the job transition refuses a
tenant's extra running job and a worker's dequeue list leaves a capped tenant out.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.cluster import Cluster
from tests.helpers import assert_error, sparse_problem, to_svmlight, upload, wait_job

pytestmark = pytest.mark.service  # the kinds of tests: tests/conftest.py, TEST_KINDS

KEYS = {"key-alice": "alice", "key-bob": "bob", "key-carol": "carol"}
SLOW = {"C": 1000.0, "tol": 1e-12, "max_iter": 10_000_000, "shrinking": False}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    running = Cluster(
        tmp_path_factory.mktemp("fair"), {"HINGE_API_KEYS": json.dumps(KEYS), "HINGE_MAX_QUEUED_JOBS_PER_TENANT": "6"}
    ).start(workers=2)
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def slow_ids(cluster):
    """The same slow data set uploaded by each tenant (ids are per tenant)."""
    text = to_svmlight(*sparse_problem(4000, 300, 10, seed=7, random_labels=True))
    ids = {}
    for key, tenant in KEYS.items():
        with cluster.http(key) as http:
            ids[tenant] = upload(http, text, name="slow").json()["id"]
    return ids


def submit(http, dataset_id, **params):
    return http.post("/v1/jobs", json={"dataset_id": dataset_id, "solver": "dcd", "params": params})


def test_queued_jobs_limit_answers_429(cluster, slow_ids):
    with cluster.http("key-alice") as alice, cluster.http("key-carol") as carol:
        blockers = [submit(alice, slow_ids["alice"], max_seconds=30, **SLOW).json() for _ in range(2)]
        for blocker in blockers:
            wait_job(alice, blocker["id"], statuses=("running",), timeout=60)
        accepted = [submit(carol, slow_ids["carol"], max_seconds=1, **SLOW) for _ in range(6)]
        assert all(r.status_code == 202 for r in accepted), [r.text for r in accepted]
        refused = submit(carol, slow_ids["carol"], max_seconds=1, **SLOW)
        err = assert_error(refused, 429, "too_many_queued_jobs", "HINGE_MAX_QUEUED_JOBS_PER_TENANT", "6")
        assert err["details"] == {
            "limit": "max_queued_jobs_per_tenant",
            "value": 6,
            "setting": "HINGE_MAX_QUEUED_JOBS_PER_TENANT",
        }
        assert refused.headers["retry-after"]
        assert submit(alice, slow_ids["alice"], max_seconds=1, **SLOW).status_code == 202, "other tenants unaffected"
        carol.post(f"/v1/jobs/{accepted[0].json()['id']}/cancel")
        assert submit(carol, slow_ids["carol"], max_seconds=1, **SLOW).status_code == 202, "room again after a cancel"
        for job in carol.get("/v1/jobs").json()["items"]:
            carol.post(f"/v1/jobs/{job['id']}/cancel")
        for job in alice.get("/v1/jobs").json()["items"]:
            alice.post(f"/v1/jobs/{job['id']}/cancel")
        for job in alice.get("/v1/jobs").json()["items"]:
            wait_job(alice, job["id"], timeout=60)


def test_a_flooding_tenant_does_not_starve_another(cluster, slow_ids):
    """alice queues 6 one-second jobs on 2 workers; bob's single job starts at the next free slot, not last."""
    with cluster.http("key-alice") as alice, cluster.http("key-bob") as bob:
        flood = [submit(alice, slow_ids["alice"], max_seconds=1.0, **SLOW).json() for _ in range(6)]
        wait_job(alice, flood[0]["id"], statuses=("running",), timeout=60)
        wait_job(alice, flood[1]["id"], statuses=("running",), timeout=60)
        lone = submit(bob, slow_ids["bob"], max_seconds=1.0, **SLOW).json()
        bob_done = wait_job(bob, lone["id"], timeout=120)
        assert bob_done["status"] == "succeeded"
        starts = [wait_job(alice, job["id"], timeout=120)["started_at"] for job in flood]
    before_bob = sum(1 for started in starts if started < bob_done["started_at"])
    after_bob = sum(1 for started in starts if started > bob_done["started_at"])
    # FIFO would start all six of alice's jobs first; fair service starts bob's when a worker frees up.
    assert before_bob <= 3, (before_bob, starts, bob_done["started_at"])
    assert after_bob >= 3


def test_running_jobs_cap_refuses_a_second_running_job(cluster):
    """max_running_jobs_per_tenant: the transition to running is refused and the tenant leaves the dequeue list."""
    from rq import SimpleWorker
    from rq.serializers import JSONSerializer

    from core.config import get_settings
    from core.queueing import JobQueue
    from core.schemas.jobs import JobStatus
    from core.storage.job_record import JobRecord
    from core.storage.jobs import JobStore, Transition
    from worker.runtime.main import make_worker_class

    queued, running, succeeded = JobStatus.queued, JobStatus.running, JobStatus.succeeded
    with cluster.client() as client:
        jobs = JobStore(client)
        for job_id in ("job_capA", "job_capB"):
            assert jobs.create(
                JobRecord(
                    id=job_id,
                    tenant="dave",
                    status=queued,
                    dataset_id="ds_x",
                    solver="dcd",
                    params={},
                    created_at="now",
                )
            )
        # no `worker` field: the cluster's reaper releases a running job whose worker has no heartbeat, and under
        # load one of its passes fell between these lines (job_capA must stay running to the end of the test)
        assert (
            jobs.transition_code("job_capA", (queued,), running, running_cap=1, started_ts=time.time())
            is Transition.DONE
        )
        assert jobs.transition_code("job_capB", (queued,), running, running_cap=1) is Transition.AT_RUNNING_CAP
        capped = jobs.get("job_capB")
        assert capped is not None and capped.status is queued and jobs.count_in("dave", "running") == 1

        import os

        os.environ["REDIS_URL"] = cluster.redis.url
        os.environ["HINGE_MAX_RUNNING_JOBS_PER_TENANT"] = "1"
        get_settings.cache_clear()
        try:
            settings = get_settings()
            queue = JobQueue(client, settings)
            client.sadd(f"hinge:fair:{settings.queue_name}:tenants", "dave", "erin")
            worker = make_worker_class(SimpleWorker)(
                [queue.base_queue()],
                connection=client,
                serializer=JSONSerializer,
                name="cap-check",
                prepare_for_work=False,
            )
            worker.hinge_queue = queue
            worker.refresh_queues()
            names = [q.name for q in worker.queues]
            assert queue.tenant_queue("erin").name in names and queue.tenant_queue("dave").name not in names
        finally:
            os.environ.pop("HINGE_MAX_RUNNING_JOBS_PER_TENANT")
            get_settings.cache_clear()
        assert jobs.transition("job_capA", (running,), succeeded)
        assert jobs.transition_code("job_capB", (queued,), running, running_cap=1) is Transition.DONE
        jobs.transition("job_capB", (running,), succeeded)


# -- access: API keys kept hashed in Redis, managed by `hinge keys`; tenant isolation on every route -----


def hinge(cluster, *args) -> subprocess.CompletedProcess:
    import sys

    from tests.conftest import ROOT

    return subprocess.run(
        [sys.executable, "-m", "service.cli", *args],
        env=cluster.env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_keys_command_creates_lists_and_revokes(cluster):
    made = hinge(cluster, "keys", "create", "--tenant", "frank", "--name", "ci", "--json")
    assert made.returncode == 0, made.stderr
    created = json.loads(made.stdout)
    key, key_id = created["key"], created["key_id"]
    assert key.startswith(f"hinge_{key_id}_") and len(key) > 50
    with cluster.client() as client:
        stored = {k.decode(): v.decode() for k, v in client.hgetall(f"hinge:apikey:{key_id}").items()}
        assert key not in json.dumps(stored) and len(stored["sha256"]) == 64, "only a digest is stored"
        every_value = b"".join(
            v for k in client.scan_iter("hinge:*") if client.type(k) == b"string" for v in [client.get(k) or b""]
        )
        assert key.encode() not in every_value
    listed = hinge(cluster, "keys", "list", "--json")
    records = {r["key_id"]: r for r in json.loads(listed.stdout)}
    assert records[key_id]["tenant"] == "frank" and records[key_id]["active"] and "sha256" not in records[key_id]
    assert key not in listed.stdout
    with cluster.http(key) as frank:
        assert frank.get("/v1/datasets").status_code == 200
        assert frank.get("/v1/datasets").json()["total"] == 0
    with cluster.http(key[:-1] + ("A" if key[-1] != "A" else "B")) as forged:
        assert_error(forged.get("/v1/datasets"), 401, "unauthorized")
    assert hinge(cluster, "keys", "revoke", key_id).returncode == 0
    with cluster.http(key) as frank:
        assert_error(frank.get("/v1/datasets"), 401, "unauthorized")
    assert hinge(cluster, "keys", "revoke", "0000000000000000").returncode == 1
    assert hinge(cluster, "keys", "create", "--tenant", "no spaces").returncode == 2


def minimal_body(schema: dict, document: dict, ids: dict):
    """A small valid instance of a request-body schema, naming the victim's ids wherever a field is an id."""
    if "$ref" in schema:
        return minimal_body(document["components"]["schemas"][schema["$ref"].split("/")[-1]], document, ids)
    if "discriminator" in schema:
        mapping = schema["discriminator"]["mapping"]
        return minimal_body({"$ref": mapping.get("dcd", next(iter(mapping.values())))}, document, ids)
    for key in ("oneOf", "anyOf"):
        if key in schema:
            return minimal_body(schema[key][0], document, ids)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        out = {}
        for name in schema.get("required", []):
            out[name] = (
                ids[name]
                if name in ids
                else ([[0.0] * 6] if name == "instances" else minimal_body(schema["properties"][name], document, ids))
            )
        return out
    return {"string": "x", "integer": 1, "number": 1.0, "boolean": True, "array": []}.get(kind, None)


def test_every_operation_refuses_another_tenants_ids(cluster):
    """Walk ALL operations of the OpenAPI document as bob with alice's ids: 404 everywhere, nothing leaks."""
    made = json.loads(hinge(cluster, "keys", "create", "--tenant", "alice2", "--json").stdout)
    owner_key = made["key"]
    with cluster.http(owner_key) as owner:
        dataset = upload(owner, to_svmlight(*sparse_problem(120, 6, 3, seed=3))).json()
        job = owner.post("/v1/jobs", json={"dataset_id": dataset["id"], "solver": "dcd"}).json()
        job = wait_job(owner, job["id"])
        model_id = job["model_id"]
        document = owner.get("/openapi.json").json()
    ids = {"dataset_id": dataset["id"], "job_id": job["id"], "model_id": model_id}
    walked = []
    with cluster.http("key-bob") as bob:
        for path, operations in document["paths"].items():
            for method in operations:
                url = path
                for name, value in ids.items():
                    url = url.replace("{" + name + "}", value)
                assert "{" not in url, f"unknown path parameter in {path}"
                if method == "post" and path == "/v1/datasets":
                    continue  # creates bob's own data set; nothing of alice's to name
                body = None
                content = operations[method].get("requestBody", {}).get("content", {})
                if "application/json" in content:
                    body = minimal_body(content["application/json"]["schema"], document, ids)
                response = bob.request(method.upper(), url, json=body)
                walked.append((method.upper(), path, response.status_code))
                names_an_id = any("{" + name + "}" in path for name in ids) or (
                    isinstance(body, dict) and any(name in body for name in ids)
                )
                if names_an_id:
                    assert response.status_code == 404, (method, path, response.text)
                    assert response.json()["error"]["code"].endswith("_not_found")
                else:
                    for value in ids.values():
                        assert value not in response.text, (method, path, "leaks", value)
    assert len(walked) == sum(len(ops) for ops in document["paths"].values()) - 1, walked
    with cluster.http(owner_key) as owner:
        assert owner.get(f"/v1/datasets/{dataset['id']}").status_code == 200
        assert owner.get(f"/v1/jobs/{job['id']}").json()["status"] == "succeeded"
        assert owner.get(f"/v1/models/{model_id}").status_code == 200, "bob's DELETEs changed nothing"


# -- observability ------------------------------------------------------------------------------------


def test_metrics_report_requests_jobs_queue_workers_solver_seconds_and_datasets(cluster, slow_ids):
    """What it reads comes from its own data sets (``slow_ids``: one a tenant, and one more) and job: the module's
    other tests may have run on another pytest worker, with another cluster."""
    with cluster.http("key-alice") as alice:
        small = upload(alice, to_svmlight(*sparse_problem(200, 20, 5, seed=1)), name="small").json()["id"]
        assert wait_job(alice, submit(alice, small).json()["id"])["status"] == "succeeded"
        alice.get("/v1/jobs/job_nope")
        text = alice.get("/metrics").text

    def value(name: str) -> float:
        match = [line for line in text.splitlines() if line.startswith(name + " ") or line.startswith(name + "{")]
        assert match, f"{name} missing from /metrics"
        return float(match[0].rsplit(" ", 1)[1])

    assert 'hinge_http_requests_total{method="GET",route="/v1/jobs/{job_id}",status="401"}' not in text
    assert 'route="/v1/jobs/{job_id}",status="404"' in text, "route templates, not raw paths"
    assert "job_nope" not in text
    assert "hinge_http_request_duration_seconds_bucket" in text
    assert value('hinge_jobs{status="succeeded"}') >= 1
    assert value("hinge_queue_depth") >= 0
    assert value("hinge_workers") == 2
    assert value('hinge_solver_seconds_total{solver="dcd"}') > 0
    assert value("hinge_datasets") >= 3 and value("hinge_dataset_object_bytes") > 0
    assert value("hinge_dataset_bytes") == 0, "no data set keeps its arrays in Redis"
    assert value("hinge_redis_up") == 1


def test_logs_are_json_with_request_id_and_job_id(cluster, tmp_path):
    import subprocess
    import sys

    from service.embedded_redis import free_port
    from tests.conftest import ROOT, _terminate, wait_ready

    port = free_port()
    log_path = tmp_path / "api.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "service.cli", "api", "--port", str(port), "--log-level", "info"],
            env=cluster.env,
            cwd=ROOT,
            start_new_session=True,
            stderr=log,
            stdout=log,
        )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_ready(base, proc, path="/healthz", timeout=120)
        import httpx

        answer = httpx.get(
            base + "/v1/datasets", headers={"X-Request-ID": "trace-me-42", "Authorization": "Bearer key-bob"}
        )
        assert answer.headers["x-request-id"] == "trace-me-42"
        # without one, each answer gets a new id of 16 hex digits
        made = {httpx.get(base + "/v1/datasets", headers={"Authorization": "Bearer key-bob"}).headers["x-request-id"]
                for _ in range(3)}  # fmt: skip
        assert len(made) == 3 and all(len(rid) == 16 and int(rid, 16) >= 0 for rid in made), made
    finally:
        _terminate(proc)
    lines = [json.loads(line) for line in log_path.read_text().splitlines() if line.startswith("{")]
    assert any(line.get("request_id") == "trace-me-42" for line in lines), lines[-5:]
    # a job of this test's own: the module's other tests may run on another pytest worker (another cluster)
    with cluster.http("key-bob") as http:
        dataset = upload(http, to_svmlight(*sparse_problem(50, 5, 2, seed=4)), name="logged").json()["id"]
        job = http.post("/v1/jobs", json={"dataset_id": dataset, "solver": "dcd"}).json()
        assert wait_job(http, job["id"])["status"] == "succeeded"
    worker_lines = [
        json.loads(line)
        for proc in cluster.workers
        for line in Path(proc.log_path).read_text().splitlines()
        if line.startswith("{")
    ]
    started = [line for line in worker_lines if line["message"].startswith("job started")]
    assert started and all(line["job_id"].startswith("job_") for line in started)

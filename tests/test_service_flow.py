"""End to end over HTTP against real processes: upload, train, poll, trace, predict, cancel, deadline."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from core.schemas.solver_params import DcdParams
from tests.helpers import gzipped, sparse_problem, to_svmlight, upload, wait_for, wait_job


@pytest.fixture(scope="module")
def small_problem():
    return sparse_problem(400, 30, 6, seed=1)


@pytest.fixture(scope="module")
def small_dataset(service, small_problem):
    with service.client() as http:
        response = upload(http, gzipped(to_svmlight(*small_problem)), filename="small.svm.gz", name="small")
        assert response.status_code == 201, response.text
        return response.json()


@pytest.fixture(scope="module")
def slow_dataset(service):
    """Random labels and a huge C: dcd needs very many passes, so the job runs until stopped."""
    problem = sparse_problem(6000, 400, 12, seed=7, random_labels=True)
    with service.client() as http:
        response = upload(http, to_svmlight(*problem), name="slow")
        assert response.status_code == 201, response.text
        return response.json()


def test_upload_describes_the_data(small_dataset, small_problem):
    indptr, indices, data, y = small_problem
    assert small_dataset["id"].startswith("ds_")
    assert small_dataset["name"] == "small"
    assert small_dataset["n_samples"] == y.size
    assert small_dataset["nnz"] == indices.size
    assert small_dataset["n_features"] == indices.max() + 1
    assert small_dataset["labels"] == {"-1": int((y < 0).sum()), "1": int((y > 0).sum())}
    assert small_dataset["compressed"] is True
    assert small_dataset["has_qid"] is False
    assert len(small_dataset["sha256"]) == 64


def test_dataset_listed_fetched_and_deleted(http, small_problem):
    created = upload(http, to_svmlight(*small_problem), name="to-delete").json()
    assert http.get(f"/v1/datasets/{created['id']}").json()["name"] == "to-delete"
    assert created["id"] in [d["id"] for d in http.get("/v1/datasets").json()["items"]]
    assert http.delete(f"/v1/datasets/{created['id']}").status_code == 204
    missing = http.get(f"/v1/datasets/{created['id']}")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "dataset_not_found"


def test_train_poll_trace_predict(http, small_dataset, small_problem):
    response = http.post(
        "/v1/jobs", json={"dataset_id": small_dataset["id"], "solver": "dcd", "params": {"C": 1.0, "tol": 0.001}}
    )
    assert response.status_code == 202, response.text
    job = response.json()
    assert job["status"] == "queued"
    assert response.headers["location"] == f"/v1/jobs/{job['id']}"
    done = wait_job(http, job["id"])
    assert done["status"] == "succeeded", done
    assert done["stop_reason"] == "converged"
    assert done["progress"]["iteration"] >= 1

    trace = http.get(f"/v1/jobs/{job['id']}/trace").json()
    assert trace["points"], "a finished job has convergence points"
    first, last = trace["points"][0], trace["points"][-1]
    assert first["iteration"] == 1 and last["iteration"] >= first["iteration"]
    assert last["gap"] >= -1e-9 and last["primal"] >= last["dual"] - 1e-9
    assert trace["next"] == len(trace["points"])
    assert http.get(f"/v1/jobs/{job['id']}/trace", params={"since": trace["next"]}).json()["points"] == []

    model = http.get(f"/v1/models/{done['model_id']}").json()
    assert model["labels"] == [-1, 1] and model["converged"] is True
    assert model["n_features"] == small_dataset["n_features"]
    assert model["train_accuracy"] > 0.9
    assert abs(model["objective"] - last["primal"]) <= 1e-9 * max(1.0, abs(last["primal"]))
    assert http.get(f"/v1/models/{done['model_id']}/trace").json()["points"] == trace["points"]

    indptr, indices, data, y = small_problem
    X = sp.csr_matrix((data, indices, indptr)).toarray()
    dense_rows = X[:50].tolist()
    sparse_rows = [{str(j + 1): float(X[i, j]) for j in np.flatnonzero(X[i])} for i in range(50)]
    dense = http.post(f"/v1/models/{done['model_id']}/predict", json={"instances": dense_rows}).json()
    sparse = http.post(f"/v1/models/{done['model_id']}/predict", json={"instances": sparse_rows}).json()
    assert dense["labels"] == sparse["labels"]
    assert np.allclose(dense["scores"], sparse["scores"])
    assert all(label in (-1, 1) for label in dense["labels"])
    assert [1 if s > 0 else -1 for s in dense["scores"]] == dense["labels"]
    assert np.mean(np.array(dense["labels"]) == y[:50]) > 0.85


def test_trace_grows_while_running_and_cancel_returns_a_model(http, slow_dataset):
    params = {"C": 1000.0, "tol": 1e-12, "max_iter": 10_000_000, "shrinking": False}
    job = http.post("/v1/jobs", json={"dataset_id": slow_dataset["id"], "solver": "dcd", "params": params}).json()
    wait_job(http, job["id"], statuses=("running",), timeout=60)
    seen = wait_for(
        lambda: len(http.get(f"/v1/jobs/{job['id']}/trace").json()["points"]) >= 2,
        timeout=30,
        message="trace points while running",
    )
    assert seen
    first_look = http.get(f"/v1/jobs/{job['id']}/trace").json()
    assert first_look["status"] == "running"
    later = wait_for(
        lambda: (lambda t: t if len(t["points"]) > len(first_look["points"]) else None)(
            http.get(f"/v1/jobs/{job['id']}/trace").json()
        ),
        timeout=30,
        message="more trace points",
    )
    assert later["status"] == "running"
    progress = http.get(f"/v1/jobs/{job['id']}").json()["progress"]
    assert progress["iteration"] >= 1 and progress["primal"] is not None

    import time

    asked = time.monotonic()
    canceled = http.post(f"/v1/jobs/{job['id']}/cancel")
    assert canceled.status_code == 202
    final = wait_job(http, job["id"], timeout=30)
    assert final["status"] == "canceled"
    assert time.monotonic() - asked < 5.0, "cancel honoured within a few seconds"
    assert final["stop_reason"] == "canceled"
    model = http.get(f"/v1/models/{final['model_id']}").json()
    assert model["stop_reason"] == "canceled" and model["converged"] is False
    again = http.post(f"/v1/jobs/{job['id']}/cancel")
    assert again.status_code == 409 and again.json()["error"]["code"] == "job_finished"


def test_max_seconds_returns_best_model_so_far(http, slow_dataset):
    params = {"C": 1000.0, "tol": 1e-12, "max_iter": 10_000_000, "max_seconds": 1.0, "shrinking": False}
    job = http.post("/v1/jobs", json={"dataset_id": slow_dataset["id"], "solver": "dcd", "params": params}).json()
    final = wait_job(http, job["id"], timeout=60)
    assert final["status"] == "succeeded"
    assert final["stop_reason"] == "deadline"
    model = http.get(f"/v1/models/{final['model_id']}").json()
    assert model["stop_reason"] == "deadline" and model["converged"] is False
    assert model["training_seconds"] < 5.0
    assert np.isfinite(model["objective"])


def test_multiclass_one_vs_rest(http):
    problem = sparse_problem(600, 20, 8, seed=3, n_classes=3)
    dataset = upload(http, to_svmlight(*problem)).json()
    assert dataset["labels"] == {
        "1": int((problem[3] == 1).sum()),
        "2": int((problem[3] == 2).sum()),
        "3": int((problem[3] == 3).sum()),
    }
    job = http.post("/v1/jobs", json={"dataset_id": dataset["id"], "solver": "dcd"}).json()
    final = wait_job(http, job["id"])
    assert final["status"] == "succeeded", final
    model = http.get(f"/v1/models/{final['model_id']}").json()
    assert model["labels"] == [1, 2, 3] and len(model["objectives"]) == 3
    trace = http.get(f"/v1/jobs/{job['id']}/trace").json()["points"]
    assert {p["subproblem"] for p in trace} == {0, 1, 2}
    answer = http.post(f"/v1/models/{final['model_id']}/predict", json={"instances": [{"1": 1.0}, [0.0] * 20]}).json()
    assert len(answer["scores"]) == 2 and len(answer["scores"][0]) == 3
    assert all(label in (1, 2, 3) for label in answer["labels"])


def test_cancel_a_queued_job_never_runs(service, http, small_dataset):
    """With every worker busy, a queued job is canceled before any worker takes it."""
    slow = {"C": 1000.0, "tol": 1e-12, "max_iter": 10_000_000, "max_seconds": 8.0}
    blockers = [
        http.post("/v1/jobs", json={"dataset_id": small_dataset["id"], "solver": "dcd", "params": slow}).json()
        for _ in range(len(service.workers))
    ]
    for blocker in blockers:
        wait_job(http, blocker["id"], statuses=("running", "succeeded"), timeout=60)
    queued = http.post("/v1/jobs", json={"dataset_id": small_dataset["id"], "solver": "dcd"}).json()
    answer = http.post(f"/v1/jobs/{queued['id']}/cancel").json()
    assert answer["status"] == "canceled"
    for blocker in blockers:
        http.post(f"/v1/jobs/{blocker['id']}/cancel")
        wait_job(http, blocker["id"], timeout=30)
    job = http.get(f"/v1/jobs/{queued['id']}").json()
    assert job["status"] == "canceled" and job.get("started_at") is None and job.get("model_id") is None


def test_worker_restart_between_jobs(service, http, small_dataset):
    first = http.post("/v1/jobs", json={"dataset_id": small_dataset["id"], "solver": "dcd"}).json()
    assert wait_job(http, first["id"])["status"] == "succeeded"
    old = list(service.workers)
    for proc in old:
        service.stop_worker(proc)
    wait_for(lambda: service.live_workers() == 0, timeout=30, message="workers gone")
    waiting = http.post("/v1/jobs", json={"dataset_id": small_dataset["id"], "solver": "dcd"}).json()
    assert http.get(f"/v1/jobs/{waiting['id']}").json()["status"] == "queued"
    for _ in old:
        service.start_worker()
    assert wait_job(http, waiting["id"], timeout=300)["status"] == "succeeded"


def test_jobs_listed_newest_first(http, small_dataset):
    a = http.post("/v1/jobs", json={"dataset_id": small_dataset["id"], "solver": "dcd"}).json()
    b = http.post("/v1/jobs", json={"dataset_id": small_dataset["id"], "solver": "dcd"}).json()
    ids = [j["id"] for j in http.get("/v1/jobs", params={"limit": 1000}).json()["items"]]
    assert ids.index(b["id"]) < ids.index(a["id"])
    wait_job(http, a["id"])
    wait_job(http, b["id"])
    succeeded = http.get("/v1/jobs", params={"status": "succeeded", "limit": 1000}).json()["items"]
    assert a["id"] in [j["id"] for j in succeeded]


def test_model_deleted(http, small_dataset):
    job = http.post("/v1/jobs", json={"dataset_id": small_dataset["id"], "solver": "dcd"}).json()
    model_id = wait_job(http, job["id"])["model_id"]
    assert http.post(f"/v1/models/{model_id}/predict", json={"instances": [{"1": 1.0}]}).status_code == 200
    assert model_id in [m["id"] for m in http.get("/v1/models", params={"limit": 1000}).json()["items"]]
    assert http.delete(f"/v1/models/{model_id}").status_code == 204
    assert http.get(f"/v1/models/{model_id}").status_code == 404
    assert http.post(f"/v1/models/{model_id}/predict", json={"instances": [{"1": 1.0}]}).status_code == 404


def test_binary_values_are_stored_once_and_train_as_written(service, http):
    """A data set whose values are all 1 keeps one value per shard (see core.storage.shard_format), its column indices
    as gaps in the bytes they need; the worker's copy, the API's evaluation and the model are those of the values
    written out."""
    import json as jsonlib

    import redis

    from core.storage import keys
    from core.storage.objects import LocalDirectoryStore
    from core.storage.shard_format import decode_shard
    from worker.solvers.dcd import solve_dcd

    rng = np.random.default_rng(11)
    n_rows, n_features, per_row = 3000, 300, 8
    indices = np.concatenate([np.sort(rng.choice(n_features, per_row, replace=False)) for _ in range(n_rows)])
    indptr = np.arange(0, per_row * (n_rows + 1), per_row, dtype=np.int64)
    X = sp.csr_matrix((np.ones(indices.size), indices, indptr), shape=(n_rows, n_features))
    y = np.where(X @ rng.normal(size=n_features) + 0.1 * rng.normal(size=n_rows) > 0, 1.0, -1.0)
    lines = [
        f"{int(y[i])} " + " ".join(f"{j + 1}:1" for j in indices[indptr[i] : indptr[i + 1]]) for i in range(n_rows)
    ]
    dataset = upload(http, ("\n".join(lines) + "\n").encode(), name="binary").json()
    assert dataset["nnz"] == indices.size and dataset["value_dtype"] == "float32"
    conn = redis.Redis.from_url(service.redis_url)
    try:
        record = jsonlib.loads(conn.get(keys.dataset(dataset["id"])))
    finally:
        conn.close()
    objects = LocalDirectoryStore(service.data_dir / "objects")
    assert [shard["rows"] for shard in record["shards"]] == [n_rows]
    shard = decode_shard(objects.get(record["shards"][0]["key"]), record["shards"][0]["sha256"])
    assert shard.entries["data"]["encoding"] == "fill" and shard.entries["data"]["bytes"] == 0
    assert shard.entries["data"]["fill"] == np.float32(1).tobytes().hex()
    # 300 features: 2 bytes an index, but the gaps within a row (8 of 300 columns) fit in 1
    assert shard.entries["indices"]["encoding"] == "gaps" and shard.entries["indices"]["width"] == 1

    params = {"C": 1.0, "tol": 1e-3}
    job = http.post("/v1/jobs", json={"dataset_id": dataset["id"], "solver": "dcd", "params": params}).json()
    done = wait_job(http, job["id"])
    assert done["status"] == "succeeded", done
    model = http.get(f"/v1/models/{done['model_id']}").json()
    direct = solve_dcd(X.indptr.astype(np.int64), X.indices.astype(np.int32), X.data.astype(np.float32), y, n_features=n_features, params=DcdParams(C=1.0, tol=1e-3, tol_rel=None))  # fmt: skip
    assert model["objective"] == pytest.approx(direct.objective, rel=1e-9)
    report = http.post(f"/v1/models/{done['model_id']}/evaluate", json={"dataset_id": dataset["id"]}).json()
    assert report["accuracy"] == pytest.approx(model["train_accuracy"]) and report["accuracy"] > 0.8

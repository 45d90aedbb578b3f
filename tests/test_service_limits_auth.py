"""Limits (413 naming the limit) and API keys (401 without, 404 across tenants) on a second API process."""

from __future__ import annotations

import gzip

import httpx

from tests.helpers import assert_error, sparse_problem, to_svmlight, upload, wait_job


def client(base, key=None):
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.Client(base_url=base, headers=headers, timeout=60)


def test_missing_or_wrong_key_is_401(strict_api):
    with client(strict_api) as anonymous:
        assert_error(anonymous.get("/v1/datasets"), 401, "unauthorized", "API key")
    with client(strict_api, "wrong") as wrong:
        assert_error(wrong.get("/v1/jobs"), 401, "unauthorized", "invalid")
    with client(strict_api) as anonymous:
        assert anonymous.get("/healthz").status_code == 200


def test_tenants_see_only_their_own(strict_api):
    problem = sparse_problem(100, 10, 3, seed=4)
    with client(strict_api, "key-alice") as alice, client(strict_api, "key-bob") as bob:
        dataset = upload(alice, to_svmlight(*problem)).json()
        job = alice.post("/v1/jobs", json={"dataset_id": dataset["id"], "solver": "dcd"}).json()
        model_id = wait_job(alice, job["id"])["model_id"]
        assert alice.get(f"/v1/models/{model_id}").status_code == 200
        for method, url, body in [
            ("GET", f"/v1/datasets/{dataset['id']}", None),
            ("DELETE", f"/v1/datasets/{dataset['id']}", None),
            ("POST", "/v1/jobs", {"dataset_id": dataset["id"], "solver": "dcd"}),
            ("GET", f"/v1/jobs/{job['id']}", None),
            ("GET", f"/v1/jobs/{job['id']}/trace", None),
            ("POST", f"/v1/jobs/{job['id']}/cancel", None),
            ("GET", f"/v1/models/{model_id}", None),
            ("GET", f"/v1/models/{model_id}/trace", None),
            ("POST", f"/v1/models/{model_id}/predict", {"instances": [[0.0] * 10]}),
            ("DELETE", f"/v1/models/{model_id}", None),
        ]:
            response = bob.request(method, url, json=body)
            assert response.status_code == 404, (method, url, response.text)
        assert dataset["id"] not in [d["id"] for d in bob.get("/v1/datasets").json()["items"]]
        assert job["id"] not in [j["id"] for j in bob.get("/v1/jobs").json()["items"]]
        assert model_id not in [m["id"] for m in bob.get("/v1/models").json()["items"]]
        assert alice.get(f"/v1/models/{model_id}").status_code == 200, "bob's attempts changed nothing"


def test_upload_limits(strict_api):
    with client(strict_api, "key-alice") as alice:
        err = assert_error(upload(alice, b"1 1:1\n" * 5000), 413, "payload_too_large", "HINGE_MAX_UPLOAD_BYTES")
        assert err["details"]["limit"] == "max_upload_bytes" and err["details"]["setting"] == "HINGE_MAX_UPLOAD_BYTES"
        assert "max_upload_bytes" not in err["message"]  # the variable an operator sets, not our internal name
        bomb = gzip.compress(b"1 1:1\n" * 100000)
        assert len(bomb) < 20000
        assert_error(upload(alice, bomb), 413, "payload_too_large", "HINGE_MAX_DECOMPRESSED_BYTES")
        assert_error(upload(alice, b"1 1:1\n" * 301), 413, "payload_too_large", "HINGE_MAX_ROWS")
        assert_error(upload(alice, b"1 1:1 1001:1\n-1 2:1\n"), 413, "payload_too_large", "HINGE_MAX_FEATURES")
        assert alice.get("/v1/datasets").json()["total"] == len(alice.get("/v1/datasets").json()["items"])


def test_json_and_predict_limits(strict_api):
    with client(strict_api, "key-alice") as alice:
        big = {"dataset_id": "x" * 5000, "solver": "dcd"}
        assert_error(alice.post("/v1/jobs", json=big), 413, "payload_too_large", "HINGE_MAX_JSON_BODY_BYTES")
        dataset = upload(alice, to_svmlight(*sparse_problem(50, 4, 2, seed=5))).json()
        assert_error(
            alice.post("/v1/jobs", json={"dataset_id": dataset["id"], "solver": "dcd", "params": {"max_seconds": 61}}),
            422,
            "validation_error",
            "60",
            "HINGE_MAX_SECONDS_CEILING",
        )
        job = alice.post("/v1/jobs", json={"dataset_id": dataset["id"], "solver": "dcd"}).json()
        model_id = wait_job(alice, job["id"])["model_id"]
        assert_error(
            alice.post(f"/v1/models/{model_id}/predict", json={"instances": [[0.0] * 4] * 6}),
            413,
            "payload_too_large",
            "HINGE_MAX_PREDICT_INSTANCES",
        )

"""Bad input of every kind: a 4xx in the one error shape, naming what and where; nothing stored; still up."""

from __future__ import annotations

import gzip

import pytest
import redis

from tests.helpers import assert_error, sparse_problem, to_svmlight, upload, wait_job


def dataset_keys(service) -> set:
    client = redis.Redis.from_url(service.redis_url)
    try:
        return {k for k in client.scan_iter("hinge:dataset:*")}
    finally:
        client.close()


BAD_SVMLIGHT = [
    (b"1 1:0.5 2:abc\n", 1, "2:abc"),
    (b"1 1:0.5\n-1 3:nan\n", 2, "3:nan"),
    (b"1 1:0.5\n1 2:1 2:3\n", 2, "duplicate"),
    (b"1 1:0.5\n1 3:1 2:3\n", 2, "3:1 2:3"),
    (b"1 1:0.5\n\n1:3 2:1\n", 3, "1:3"),
    (b"x 1:1\n", 1, "x"),
    (b"1 1:1\n1 2 3\n", 2, "2"),
    (b"inf 1:1\n", 1, "inf"),
    (b"1 qid:1 1:1\n1 2:1\n", 2, "qid"),
]


@pytest.mark.parametrize("content,line,fragment", BAD_SVMLIGHT)
def test_malformed_svmlight_names_line_and_column(service, http, content, line, fragment):
    before = dataset_keys(service)
    count = http.get("/v1/datasets").json()["total"]
    error = assert_error(upload(http, content), 422, "parse_error", f"line {line}")
    assert error["details"]["line"] == line and error["details"]["column"] >= 1
    assert dataset_keys(service) == before, "nothing stored"
    assert http.get("/v1/datasets").json()["total"] == count


def test_one_based_refuses_index_zero(http):
    error = assert_error(upload(http, b"1 0:1 2:1\n", zero_based="false"), 422, "parse_error", "line 1")
    assert error["details"]["column"] == 3


def test_gzip_truncated_and_garbage(http):
    whole = gzip.compress(b"1 1:1\n" * 10000)
    assert_error(upload(http, whole[: len(whole) // 2]), 422, "parse_error")
    assert_error(upload(http, b"\x00\x01\x02garbage\xff\n"), 422, "parse_error", "line 1")
    assert_error(upload(http, b""), 422, "parse_error")


def test_csv_errors(http):
    ok = upload(http, b"a,b,label\n1,0,1\n0,2.5,-1\n", format="csv", label_column="label")
    assert ok.status_code == 201, ok.text
    assert ok.json()["feature_names"] == ["a", "b"] and ok.json()["nnz"] == 2
    assert_error(upload(http, b"a,b,label\n1,2,1\n1,2\n", format="csv"), 422, "parse_error", "line 3")
    assert_error(upload(http, b"a,b,y\n1,2,1\n", format="csv"), 422, "parse_error", "label")
    assert_error(upload(http, b"a,b,label\n1,zz,1\n", format="csv"), 422, "parse_error", "line 2")


def test_upload_needs_multipart_with_file(http):
    assert_error(
        http.post("/v1/datasets", content=b"1 1:1\n", headers={"content-type": "text/plain"}),
        415,
        "unsupported_media_type",
        "multipart/form-data",
    )
    response = http.post("/v1/datasets", files={"other": ("x", b"1 1:1\n")})
    error = assert_error(response, 422, "validation_error", "file")
    assert error["details"][0]["loc"] == ["body", "file"]
    assert_error(
        http.post("/v1/datasets", params={"format": "xml"}, files={"file": ("x", b"1 1:1\n")}),
        422,
        "validation_error",
        "format",
    )


@pytest.fixture(scope="module")
def dataset(http_module):
    return upload(http_module, to_svmlight(*sparse_problem(100, 10, 3, seed=2))).json()


@pytest.fixture(scope="module")
def http_module(service):
    with service.client() as client:
        yield client


def test_job_request_validation(http, dataset):
    post = lambda body: http.post("/v1/jobs", json=body)  # noqa: E731
    err = assert_error(post({"dataset_id": dataset["id"], "solver": "nope"}), 422, "validation_error", "solver")
    assert err["details"]
    err = assert_error(
        post({"dataset_id": dataset["id"], "solver": "dcd", "params": {"C": -1}}), 422, "validation_error", "params.C"
    )
    assert err["details"][0]["loc"][-1] == "C"
    assert_error(
        post({"dataset_id": dataset["id"], "solver": "dcd", "params": {"Cc": 1}}), 422, "validation_error", "params.Cc"
    )
    assert_error(
        post({"dataset_id": dataset["id"], "solver": "dcd", "params": {"loss": "log"}}),
        422,
        "validation_error",
        "params.loss",
    )
    assert_error(post({"dataset_id": dataset["id"], "solver": "dcd", "extra": 1}), 422, "validation_error", "extra")
    assert_error(post({"dataset_id": "ds_missing", "solver": "dcd"}), 404, "dataset_not_found", "ds_missing")
    assert_error(
        post({"dataset_id": dataset["id"], "solver": "dcd", "params": {"class_weight": {"7": 2}}}),
        422,
        "validation_error",
        "class_weight",
    )
    assert_error(
        post({"dataset_id": dataset["id"], "solver": "dcd", "params": {"max_seconds": 1e12}}),
        422,
        "validation_error",
        "max_seconds",
    )
    assert_error(
        http.post("/v1/jobs", content=b"{not json", headers={"content-type": "application/json"}),
        422,
        "validation_error",
    )
    assert_error(http.get("/v1/jobs/job_nope"), 404, "job_not_found")
    assert_error(http.get("/v1/jobs/job_nope/trace"), 404, "job_not_found")
    assert_error(http.post("/v1/jobs/job_nope/cancel"), 404, "job_not_found")


def test_single_label_dataset_refused(http):
    one = upload(http, b"1 1:1\n1 2:1\n").json()
    assert_error(http.post("/v1/jobs", json={"dataset_id": one["id"], "solver": "dcd"}), 422, "validation_error", "two")


def test_predict_validation(http, dataset):
    job = http.post("/v1/jobs", json={"dataset_id": dataset["id"], "solver": "dcd"}).json()
    model_id = wait_job(http, job["id"])["model_id"]
    url = f"/v1/models/{model_id}/predict"
    assert_error(
        http.post(url, json={"instances": [[1.0, 2.0]]}), 422, "validation_error", "instances[0]", "10 features"
    )
    assert_error(http.post(url, json={"instances": [{"a": 1.0}]}), 422, "validation_error", "instances[0]")
    assert_error(http.post(url, json={"instances": [{"1": 1.0}, {"0": 1.0}]}), 422, "validation_error", "instances[1]")
    assert_error(http.post(url, json={"instances": "x"}), 422, "validation_error", "instances")
    assert_error(http.post(url, json={"rows": []}), 422, "validation_error")
    # A sparse index beyond the model's 10 features: refused, naming the row and the index (issue 9) ...
    err = assert_error(
        http.post(url, json={"instances": [{"1": 1.0}, {"1": 1.0, "999": 5.0}]}),
        422,
        "validation_error",
        "instances[1]",
        "999",
        "ignore_unknown_features",
    )
    assert err["details"][0]["loc"] == ["body", "instances", 1, "999"]
    # ... unless the caller says to ignore such features: then they weigh nothing.
    ok = http.post(url, json={"instances": [{"1": 1.0, "999": 5.0}], "ignore_unknown_features": True})
    assert ok.status_code == 200, ok.text
    assert ok.json() == http.post(url, json={"instances": [{"1": 1.0}]}).json()
    assert http.post(url, json={"instances": [{"10": 1.0}]}).status_code == 200  # the last feature (one-based)
    # Unknown query parameters are named, not ignored (`?probability=true` used to answer 200).
    err = assert_error(
        http.post(url + "?probability=true", json={"instances": [{"1": 1.0}]}), 422, "validation_error", "probability"
    )
    assert err["details"] == [
        {"loc": ["query", "probability"], "msg": "unknown query parameter", "type": "extra_forbidden"}
    ]
    assert_error(http.get("/v1/datasets?limit=5&ofset=2"), 422, "validation_error", "ofset", "offset")
    assert http.get("/v1/datasets?limit=5&offset=0").status_code == 200
    assert http.get("/docs/oauth2-redirect?code=x&state=y").status_code == 200  # pages for people are not checked
    assert_error(http.post("/v1/models/mdl_nope/predict", json={"instances": [[1.0]]}), 404, "model_not_found")


def test_unknown_route_and_method(http):
    assert_error(http.get("/v1/nothing"), 404, "not_found")
    assert_error(http.put("/v1/datasets"), 405, "method_not_allowed")


def test_still_up_after_all_that(service, http):
    """A burst of bad input of every kind (made here, so the test holds whatever ran before it), then the
    service still answers and still trains: same API process, healthy, a good upload and job succeed."""
    whole = gzip.compress(b"1 1:1\n" * 1000)
    for content, _line, _fragment in BAD_SVMLIGHT:
        assert upload(http, content).status_code == 422
    assert upload(http, whole[: len(whole) // 2]).status_code == 422
    assert upload(http, b"\x00\x01\x02garbage\xff\n").status_code == 422
    assert http.post("/v1/jobs", content=b"{not json", headers={"content-type": "application/json"}).status_code == 422
    assert http.post("/v1/jobs", json={"dataset_id": "ds_missing", "solver": "dcd"}).status_code == 404
    assert http.post("/v1/models/mdl_nope/predict", json={"instances": [[1.0]]}).status_code == 404
    assert http.put("/v1/datasets").status_code == 405
    assert service.api.poll() is None, "the API process is still the one started"
    assert http.get("/healthz").json()["status"] == "ok"
    assert http.get("/readyz").status_code == 200
    good = upload(http, to_svmlight(*sparse_problem(60, 5, 2, seed=4)))
    assert good.status_code == 201, good.text
    job = http.post("/v1/jobs", json={"dataset_id": good.json()["id"], "solver": "dcd"})
    assert job.status_code in (201, 202), job.text
    assert wait_job(http, job.json()["id"])["status"] == "succeeded"


def test_every_kind_of_details_is_a_documented_shape():
    """The details of 507 storage_full, 507 disk_full, 409 job_not_finished, 408 and 503 not_ready validate
    against ErrorBody."""
    import errno
    import json

    from core.schemas.base import (
        ErrorBody,
        JobStateDetails,
        ReadinessDetails,
        SpoolDetails,
        StorageDetails,
        TimeoutDetails,
    )
    from core.storage.capacity import StorageFull
    from service.api.errors import BodyTimeout
    from service.api.routes.health import _not_ready
    from service.api.uploads import disk_full

    full = StorageFull("data set", needed=10, available=3, maxmemory=100)
    spooled = disk_full(OSError(errno.ENOSPC, "No space left on device"), 4096)
    for details, shape in (
        (full.details(), StorageDetails),
        (spooled.details, SpoolDetails),
        ({"status": "running"}, JobStateDetails),
        (BodyTimeout(10, 2.5, 1000.0, slow=False).details(), TimeoutDetails),
        (BodyTimeout(10, 2.5, 1000.5, slow=True).details(), TimeoutDetails),
        (
            json.loads(_not_ready("Redis does not answer", status="unavailable", redis=False).body)["error"]["details"],
            ReadinessDetails,
        ),
    ):
        body = ErrorBody.model_validate({"code": "x", "message": "y", "details": details})
        assert isinstance(body.details, shape), (details, body.details)
        assert body.model_dump()["details"] == details

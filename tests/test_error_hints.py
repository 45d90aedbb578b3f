"""Errors that say how to fix the request, as a new user meets them (issue 12, item 8)."""

from __future__ import annotations

import pytest

from tests.helpers import assert_error, sparse_problem, to_svmlight, upload, wait_job


@pytest.fixture(scope="module")
def dataset(service):
    with service.client() as http:
        return upload(http, to_svmlight(*sparse_problem(60, 5, 2, seed=21))).json()


def test_csv_sent_without_format_csv_says_send_format_csv(http):
    err = assert_error(
        upload(http, b"label,a,b\n1,0.5,2\n-1,1,0\n", filename="data.csv"),
        422,
        "parse_error",
        "line 1, column 1",
        "CSV header",
        "send format=csv",
    )
    assert err["details"]["line"] == 1
    # headerless CSV too
    assert_error(upload(http, b"1,0.5,2\n-1,1,0\n", filename="data.csv"), 422, "parse_error", "send format=csv")
    # an svmlight mistake does not get the CSV hint
    err = assert_error(upload(http, b"x 1:1\n"), 422, "parse_error", "bad label")
    assert "format=csv" not in err["message"]


def test_empty_upload_says_empty_without_line_zero(http):
    err = assert_error(upload(http, b""), 422, "parse_error", "empty")
    assert "line 0" not in err["message"] and "column 0" not in err["message"]
    assert err["details"]["line"] is None


def test_json_without_content_type_names_the_missing_header(http, dataset):
    body = b'{"dataset_id": "%s", "solver": "dcd"}' % dataset["id"].encode()
    err = assert_error(
        http.post("/v1/jobs", content=body),
        422,
        "validation_error",
        "Content-Type: application/json",
        "no Content-Type header",
    )
    assert "valid dictionary" not in err["message"]
    assert_error(
        http.post("/v1/jobs", content=body, headers={"Content-Type": "text/plain"}),
        422,
        "validation_error",
        "'text/plain'",
        "Content-Type: application/json",
    )


def test_bad_json_says_where(http):
    err = assert_error(
        http.post(
            "/v1/jobs", content=b'{"dataset_id": "x",\n "solver": dcd}', headers={"Content-Type": "application/json"}
        ),
        422,
        "validation_error",
        "line 2, column 12",
    )
    assert "JSON decode error" not in err["message"] and "not valid JSON" in err["message"]


def test_unknown_params_suggest_the_right_field(http, dataset):
    def post(params, solver="smo"):
        return http.post("/v1/jobs", json={"dataset_id": dataset["id"], "solver": solver, "params": params})

    assert_error(post({"gamma": 0.5}), 422, "validation_error", "params.gamma", "did you mean params.kernel.gamma?")
    assert_error(post({"max_iters": 5}), 422, "validation_error", "did you mean 'max_iter'?")
    assert_error(post({"kernel": {"type": "rbf", "gama": 1}}), 422, "validation_error", "did you mean 'gamma'?")
    assert_error(post({"cv_folds": 3}, solver="dcd"), 422, "validation_error", "did you mean params.search.cv_folds?")


def test_limits_are_named_by_their_environment_variables(service):
    # the service's default JSON limit is 64 MiB: a declared length over it is refused before the body is read
    import http.client
    import json
    from urllib.parse import urlparse

    url = urlparse(service.base_url)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    try:
        connection.putrequest("POST", "/v1/jobs")
        connection.putheader("Content-Type", "application/json")
        connection.putheader("Content-Length", str(65 * 1024 * 1024))
        connection.endheaders()
        response = connection.getresponse()
        status, body = response.status, json.loads(response.read())
    finally:
        connection.close()
    assert status == 413
    assert "HINGE_MAX_JSON_BODY_BYTES" in body["error"]["message"], body
    assert body["error"]["details"] == {
        "limit": "max_json_body_bytes",
        "value": 64 * 1024 * 1024,
        "setting": "HINGE_MAX_JSON_BODY_BYTES",
    }


def test_scikit_learn_spellings_and_solver_names_get_a_hint(http, dataset):
    """Issue 20, item 5: the near-misses of a scikit-learn user."""

    def post(body):
        return http.post("/v1/jobs", json={"dataset_id": dataset["id"], **body})

    rbf = assert_error(post({"solver": "smo", "params": {"kernel": "rbf"}}), 422, "validation_error", "params.kernel")
    assert 'a kernel is an object here: "kernel": {"type": "rbf", "gamma": 0.5}' in rbf["message"]
    assert_error(
        post({"solver": "smo", "params": {"kernel": "laplace"}}), 422, "validation_error", "types: linear, poly, rbf"
    )
    assert_error(post({"solver": "smo", "gamma": 0.5}), 422, "validation_error", "did you mean params.kernel.gamma?")
    assert_error(post({"solver": "smo", "params": {"coef0": 1}}), 422, "validation_error", "params.kernel.coef0")
    for body in ({"solver": "dcd", "gamma": 0.5}, {"solver": "ocas", "params": {"kernel": {"type": "rbf"}}}):
        assert_error(post(body), 422, "validation_error", "trains linear models", "use solver smo or sampled_cuts")
    assert_error(
        post({"solver": "dcd", "params": {"class_weight": "balanced"}}),
        422,
        "validation_error",
        'factor per label, e.g. {"1": 5}',
        '"balanced" is n_samples / (n_labels * count of the label)',
    )
    assert_error(post({"solver": "dcd", "params": {"random_state": 1}}), 422, "validation_error", "params.seed?")
    assert_error(post({"solver": "cpa", "params": {"n_jobs": 2}}), 422, "validation_error", "params.n_processes?")
    assert_error(post({"solver": "smo", "params": {"cache_size": 500}}), 422, "validation_error", "params.cache_mb?")
    assert_error(post({"solver": "SMO"}), 422, "validation_error", "'SMO' is not a solver", "did you mean 'smo'?")
    assert_error(post({"solver": "sampled-cuts"}), 422, "validation_error", "did you mean 'sampled_cuts'?")
    assert_error(post({"solver": "ocsa"}), 422, "validation_error", "did you mean 'ocas'?")
    assert_error(post({"solver": "svm"}), 422, "validation_error", "dcd (a linear SVM", "smo (a kernel SVM")
    assert_error(post({"solver": "LinearSVC"}), 422, "validation_error", "solver dcd")
    assert_error(post({"solver": 7}), 422, "validation_error", "solvers: dcd, cpa, ocas, smo, sampled_cuts")


@pytest.fixture(scope="module")
def model_id(service, dataset):
    with service.client() as http:
        job = http.post("/v1/jobs", json={"dataset_id": dataset["id"], "solver": "dcd"}).json()
        done = wait_job(http, job["id"])
    assert done["status"] == "succeeded", done
    return done["model_id"]


def test_every_json_route_names_the_content_type_it_needs(http, dataset, model_id):
    """Issue 32, item 7: a JSON body sent as a form (or without a Content-Type) gets the header to send, on every
    route that takes a JSON body, whichever parser reads it."""
    from service.cli import openapi_document

    ids = {"dataset_id": dataset["id"], "model_id": model_id, "job_id": "job_none"}
    routes = [
        (method, path)
        for path, operations in openapi_document()["paths"].items()
        for method, operation in operations.items()
        if "application/json" in operation.get("requestBody", {}).get("content", {})
    ]
    assert {("post", "/v1/jobs"), ("post", "/v1/models/{model_id}/predict")} <= set(routes), routes
    for method, path in routes:
        url = path.format(**ids)
        form = http.request(method, url, data={"instances": "1,2", "dataset_id": dataset["id"]})
        err = assert_error(form, 422, "validation_error", "'application/x-www-form-urlencoded'")
        assert "send the JSON object with the header 'Content-Type: application/json'" in err["message"], (path, err)
        bare = http.request(method, url, content=b"instances=1,2")
        assert_error(bare, 422, "validation_error", "no Content-Type header", "'Content-Type: application/json'")
    # a body that is JSON but not valid keeps saying where it breaks
    broken = http.post(f"/v1/models/{model_id}/predict", content=b'{"instances": [[1, 2', headers=JSON)
    assert "Content-Type" not in assert_error(broken, 422, "validation_error", "line 1 column")["message"]


JSON = {"Content-Type": "application/json"}


def test_a_job_without_a_solver_names_the_field_and_the_solvers(http, dataset):
    from core.solvers import SOLVERS

    err = assert_error(
        http.post("/v1/jobs", json={"dataset_id": dataset["id"]}), 422, "validation_error", "solver: missing"
    )
    assert "discriminator" not in err["message"]
    assert all(name in err["message"] for name in SOLVERS), err["message"]  # from the solvers' specs
    assert err["details"][0]["loc"] == ["body", "solver"]
    err = assert_error(
        http.post("/v1/jobs", json={"dataset_id": dataset["id"], "solver": None}), 422, "validation_error", "null"
    )
    assert all(name in err["message"] for name in SOLVERS), err["message"]
    err = assert_error(
        http.post("/v1/jobs", json={"dataset_id": dataset["id"], "solver": "smo", "params": {"kernel": {"gamma": 1}}}),
        422,
        "validation_error",
        "params.kernel.type: missing",
        "types: linear, poly, rbf",
    )
    assert err["details"][0]["loc"] == ["body", "params", "kernel", "type"]


def test_a_value_that_is_not_finite_names_its_row_and_column(http, model_id):
    def predict(text: bytes):
        return http.post(f"/v1/models/{model_id}/predict", content=text, headers=JSON)

    five = "[0.5, 1, 2, 3, 4]"
    for row, expected in (("[1, 2, NaN, 4, 5]", "NaN"), ("[1, 2, 3, 4, -1e999]", "-Infinity")):
        column = 2 if expected == "NaN" else 4
        for body in (f'{{"instances": [{five}, {row}]}}', f'{{"instances": [{{"1": 1}}, {row}]}}'):  # dense, mixed
            err = assert_error(predict(body.encode()), 422, "validation_error", f"instances[1][{column}] is {expected}")
            assert f"row 1, column {column}" in err["message"]
            assert err["details"][0]["loc"] == ["body", "instances", 1, column]
    err = assert_error(predict(b'{"instances": [{"3": Infinity}]}'), 422, "validation_error", "instances[0]['3']")
    assert "Infinity" in err["message"] and "feature 3" in err["message"]


def test_an_upload_value_that_overflows_names_its_csv_column(http):
    csv = b"label,a,b,c\n1,0.5,2,3\n-1,1,2,1e999\n"
    err = assert_error(
        upload(http, csv, filename="d.csv", format="csv"), 422, "parse_error", "line 3", "column 4 ('c')", "1e999"
    )
    assert err["details"]["line"] == 3
    err = assert_error(
        upload(http, b"label,a,b\n1,0.5,NaN\n", filename="d.csv", format="csv"), 422, "parse_error", "column 3 ('b')"
    )

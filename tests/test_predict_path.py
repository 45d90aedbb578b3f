"""The predict route's short path (service/api/predict_path.py): a one-piece request answered without the
framework's layers gets exactly what the route gives, and everything else reaches the route itself."""

from __future__ import annotations

import json

import numpy as np
import scipy.sparse as sp

from tests.helpers import assert_error, to_svmlight, upload, wait_job


def _model(http) -> tuple[str, int]:
    rows = [[1.0, 0.0, 2.0], [0.0, 1.0, -1.0], [2.0, 1.0, 0.5], [-1.0, -2.0, 0.0]] * 5
    labels = [1, -1, 1, -1] * 5
    matrix = sp.csr_matrix(np.array(rows))
    dataset = upload(
        http, to_svmlight(matrix.indptr, matrix.indices, matrix.data, np.array(labels, dtype=float))
    ).json()
    job = http.post("/v1/jobs", json={"dataset_id": dataset["id"], "solver": "dcd"}).json()
    return wait_job(http, job["id"])["model_id"], dataset["n_features"]


def _pieces(body: bytes, size: int = 7):
    for start in range(0, len(body), size):
        yield body[start : start + size]


def test_a_body_in_pieces_gets_what_a_body_in_one_piece_gets_and_both_are_counted(http):
    model_id, n_features = _model(http)
    body = json.dumps({"instances": [[0.5] * n_features, {"1": 2.0}], "decision_function_shape": "ovr"}).encode()
    url = f"/v1/models/{model_id}/predict"
    before = http.get("/metrics").text
    whole = http.post(url, content=body, headers={"Content-Type": "application/json"})
    pieces = http.post(url, content=_pieces(body), headers={"Content-Type": "application/json"})  # chunked: the route
    assert whole.status_code == pieces.status_code == 200, (whole.text, pieces.text)
    assert whole.json() == pieces.json()
    assert whole.headers["content-type"] == pieces.headers["content-type"] == "application/json"
    assert len(whole.headers["x-request-id"]) == 16
    label = 'hinge_http_requests_total{method="POST",route="/v1/models/{model_id}/predict",status="200"}'

    def count(text: str) -> float:
        return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(label))

    assert count(http.get("/metrics").text) - count(before) == 2


def test_refusals_are_the_routes_own(http):
    model_id, n_features = _model(http)
    url = f"/v1/models/{model_id}/predict"
    assert_error(http.post(url, content=b"{not json"), 422, "validation_error")
    assert_error(
        http.post(url, json={"instances": [[0.5] * (n_features + 3)]}), 422, "validation_error", "instances[0]"
    )
    assert_error(
        http.post("/v1/models/mdl_nope/predict", json={"instances": [[0.5]]}), 404, "model_not_found", "mdl_nope"
    )
    assert_error(
        http.post(url + "?probability=true", json={"instances": [[0.5]]}), 422, "validation_error", "probability"
    )
    assert_error(http.post(url, json={"instances": [[0.5]], "probabilities": True}), 409, "model_not_calibrated")

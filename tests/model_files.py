"""What the model file tests share: data sets as svmlight, a held-out split, and the routes that train,
predict, export and import models."""

from __future__ import annotations

import tempfile

import numpy as np
import scipy.sparse as sp

from tests.helpers import to_svmlight, wait_job


def svmlight(X, y, qid=None) -> bytes:
    """Rows (dense or sparse) and labels as an svmlight file."""
    matrix = sp.csr_matrix(X)
    return to_svmlight(matrix.indptr, matrix.indices, matrix.data, np.asarray(y, dtype=float), qid=qid)


def split(X, y, seed=0, test_fraction=0.3):
    """A seeded split: training rows and labels, then held-out rows and labels."""
    order = np.random.default_rng(seed).permutation(y.size)
    cut = int(y.size * (1 - test_fraction))
    return X[order[:cut]], y[order[:cut]], X[order[cut:]], y[order[cut:]]


def train(http, dataset_id, solver, params=None, timeout=300) -> dict:
    """Train through the API and return the model (the job must succeed)."""
    response = http.post("/v1/jobs", json={"dataset_id": dataset_id, "solver": solver, "params": params or {}})
    assert response.status_code == 202, response.text
    job = wait_job(http, response.json()["id"], timeout=timeout)
    assert job["status"] == "succeeded", job
    return http.get(f"/v1/models/{job['model_id']}").json()


def predict(http, model_id, X, **extra) -> dict:
    """The predict answer for the rows X."""
    answer = http.post(f"/v1/models/{model_id}/predict", json={"instances": np.asarray(X).tolist(), **extra})
    assert answer.status_code == 200, answer.text
    return answer.json()


def export(http, model_id, format) -> bytes:
    """The model exported in ``format``."""
    response = http.get(f"/v1/models/{model_id}/export", params={"format": format})
    assert response.status_code == 200, response.text
    return response.content


def saved(content: bytes, suffix: str) -> str:
    """``content`` in a temporary file (kept), for the official loaders; its path."""
    handle = tempfile.NamedTemporaryFile(suffix=suffix, delete=False)
    handle.write(content)
    handle.close()
    return handle.name


def import_model(http, content: bytes, format: str, **params):
    """POST a model file; the response."""
    return http.post(
        "/v1/models",
        params={"format": format, **params},
        files={"file": ("model", content, "application/octet-stream")},
    )

"""smo with a precomputed kernel (``kernel: {"type": "precomputed"}``, LIBSVM's -t 4): rows `0:i j:K(x, x_j)`,
against libsvm-official -t 4 and against the same rbf kernel computed by smo itself, on scikit-learn's breast
cancer (standardized, a seeded 70/30 split); the model's LIBSVM file (`0:serial` support vectors) is read back by
libsvm-official and imports back; JSON and ONNX exports score the same."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_breast_cancer
from sklearn.metrics.pairwise import rbf_kernel

from tests.helpers import assert_error, to_svmlight, upload
from tests.model_files import export, import_model, predict, saved, split, svmlight, train

svmutil = pytest.importorskip("libsvm.svmutil")
GAMMA = 0.05


@pytest.fixture(scope="module")
def kernel_rows():
    """(training rows: serial then K against the training rows, labels, held-out rows: 0 then K, raw splits)."""
    X, y = load_breast_cancer(return_X_y=True)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    X_train, y_train, X_test, y_test = split(X, np.where(y == 1, 1.0, -1.0))
    n = len(X_train)
    train_rows = np.hstack([np.arange(1, n + 1)[:, None], rbf_kernel(X_train, X_train, gamma=GAMMA)])
    test_rows = np.hstack([np.zeros((len(X_test), 1)), rbf_kernel(X_test, X_train, gamma=GAMMA)])
    return train_rows, y_train, test_rows, (X_train, X_test)


def _zero_based(rows, y) -> bytes:
    """The rows as LIBSVM's -t 4 file: column j written as index j (0 the serial)."""
    matrix = sp.csr_matrix(rows)
    return to_svmlight(matrix.indptr, matrix.indices, matrix.data, np.asarray(y, dtype=float), zero_based=True)


def _libsvm_rows(rows):
    return [{0: int(row[0]), **{j: float(row[j]) for j in range(1, len(row))}} for row in rows]


def test_precomputed_is_the_kernel_it_holds_and_libsvm_t4(http, kernel_rows):
    train_rows, y_train, test_rows, (X_train, X_test) = kernel_rows
    dataset = upload(http, _zero_based(train_rows, y_train), zero_based="true").json()
    model = train(http, dataset["id"], "smo", {"kernel": {"type": "precomputed"}, "tol": 1e-6, "tol_rel": 1e-9})
    assert model["kernel"]["type"] == "precomputed" and model["gap_rel"] <= 1e-9
    features = upload(http, svmlight(X_train, y_train)).json()
    reference = train(
        http, features["id"], "smo", {"kernel": {"type": "rbf", "gamma": GAMMA}, "tol": 1e-6, "tol_rel": 1e-9}
    )
    assert model["objective"] == pytest.approx(reference["objective"], rel=1e-9)
    assert model["n_support"] == reference["n_support"]
    ours = predict(http, model["id"], test_rows)  # the API's rows are the model's columns: 0 the serial
    assert np.max(np.abs(np.array(ours["scores"]) - np.array(predict(http, reference["id"], X_test)["scores"]))) < 1e-9
    official = svmutil.svm_train(list(y_train), _libsvm_rows(train_rows), "-t 4 -c 1 -e 1e-6 -q")
    labels, _, values = svmutil.svm_predict([], _libsvm_rows(test_rows), official, "-q")
    sign = 1.0 if official.get_labels()[0] == 1 else -1.0
    assert ours["labels"] == labels
    assert np.max(np.abs(np.array(ours["scores"]) - sign * np.array(values).ravel())) <= 1e-4  # measured 4e-7
    text = export(http, model["id"], "libsvm")
    assert b"kernel_type precomputed\n" in text and b" 0:" in text and b" 1:" not in text.split(b"SV\n", 1)[1]
    loaded = svmutil.svm_load_model(saved(text, ".libsvm"))
    again, _, _ = svmutil.svm_predict([], _libsvm_rows(test_rows), loaded, "-q")
    assert again == ours["labels"]
    imported = import_model(http, text, "libsvm", n_features=test_rows.shape[1])  # the serial and a column per row
    assert imported.status_code == 201, imported.text
    assert predict(http, imported.json()["id"], test_rows)["labels"] == ours["labels"]
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(export(http, model["id"], "onnx"), providers=["CPUExecutionProvider"])
    onnx_labels = session.run(None, {"X": np.asarray(test_rows, dtype=np.float32)})[0]
    assert np.mean(np.asarray(onnx_labels, dtype=float).ravel() == np.array(ours["labels"])) >= 0.99


def test_precomputed_needs_its_serials_and_is_smo_s(http, kernel_rows):
    train_rows, y_train, _, _ = kernel_rows
    no_serial = upload(http, svmlight(train_rows[:, 1:], y_train)).json()  # column 0 holds kernel values
    response = http.post(
        "/v1/jobs", json={"dataset_id": no_serial["id"], "solver": "smo", "params": {"kernel": {"type": "precomputed"}}}
    )
    job = response.json()
    from tests.helpers import wait_job

    done = wait_job(http, job["id"])
    assert done["status"] == "failed" and "serial numbers (column 0)" in done["error"]["message"], done
    dataset = upload(http, _zero_based(train_rows, y_train), zero_based="true").json()
    body = {"dataset_id": dataset["id"], "solver": "sampled_cuts", "params": {"kernel": {"type": "precomputed"}}}
    assert_error(http.post("/v1/jobs", json=body), 422, "validation_error", "trained by smo")
    body = {
        "dataset_id": dataset["id"],
        "solver": "smo",
        "params": {"kernel": {"type": "precomputed"}, "search": {"gamma": [0.1]}},
    }
    assert_error(http.post("/v1/jobs", json=body), 422, "validation_error", "has no gamma")

"""Models out and back in, checked against the official loaders on real data that scikit-learn ships.

Export: LIBLINEAR files load in liblinear-official and predict our labels with decision values
within 1e-9; LIBSVM files load in libsvm-official and predict our labels with decision values within
1e-6 (binary: ours; more classes: the pairwise differences of ours); ONNX graphs run in onnxruntime
with our labels and scores within 1e-5. Import: models trained by LIBLINEAR and LIBSVM predict as they
do (labels, decision values, probabilities); export -> import -> predict is the identity.
Held-out rows (not used for training) are what every comparison predicts.
"""

from __future__ import annotations

import gzip
import io
import json

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_breast_cancer, load_digits, load_wine

from core.schemas.model_files import ModelDocument
from tests.helpers import to_svmlight, upload
from tests.model_files import export, import_model, predict, saved, split, svmlight, train

liblinearutil = pytest.importorskip("liblinear.liblinearutil")
svmutil = pytest.importorskip("libsvm.svmutil")
ort = pytest.importorskip("onnxruntime")


@pytest.fixture(scope="module")
def cancer(service):
    """Breast cancer, standardized, labels -1/+1: a training data set (uploaded) and held-out rows."""
    X, y = load_breast_cancer(return_X_y=True)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    X_train, y_train, X_test, y_test = split(X, np.where(y == 1, 1.0, -1.0))
    with service.client() as http:
        dataset = upload(http, svmlight(X_train, y_train)).json()
    return dataset["id"], X_test, y_test


@pytest.fixture(scope="module")
def digits(service):
    """Digits scaled to [0, 1], ten classes (labels 1..10)."""
    X, y = load_digits(return_X_y=True)
    X_train, y_train, X_test, y_test = split(X / 16.0, y.astype(float) + 1)
    with service.client() as http:
        dataset = upload(http, svmlight(X_train, y_train)).json()
    return dataset["id"], X_test, y_test


@pytest.fixture(scope="module")
def wine(service):
    """Wine, standardized, three classes."""
    X, y = load_wine(return_X_y=True)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    X_train, y_train, X_test, y_test = split(X, y.astype(float))
    with service.client() as http:
        dataset = upload(http, svmlight(X_train, y_train)).json()
    return dataset["id"], X_test, y_test


# -- LIBLINEAR -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "solver,params",
    [
        ("dcd", {"C": 0.5, "tol": 1e-4}),
        ("dcd", {"C": 0.5, "loss": "squared_hinge", "bias": 2.0}),
        ("cpa", {"C": 0.5}),
        ("ocas", {"C": 0.5, "n_processes": 1}),
        ("dcd", {"C": 0.5, "bias": None}),
    ],
)
def test_liblinear_export_predicts_like_us_binary(http, cancer, solver, params):
    dataset_id, X_test, y_test = cancer
    model = train(http, dataset_id, solver, params)
    text = export(http, model["id"], "liblinear").decode()
    header = dict(line.split(" ", 1) for line in text.split("\nw\n")[0].splitlines())
    assert header["label"] == "1 -1" and header["nr_feature"] == str(model["n_features"])
    expected_bias = params.get("bias", 1.0)
    assert float(header["bias"]) == (expected_bias if expected_bias is not None else -1.0)
    if params.get("loss") == "squared_hinge":
        assert header["solver_type"] == "L2R_L2LOSS_SVC_DUAL"
    loaded = liblinearutil.load_model(saved(text.encode(), ".liblinear"))
    labels, _, values = liblinearutil.predict([], sp.csr_matrix(X_test), loaded, "-q")
    ours = predict(http, model["id"], X_test)
    assert labels == ours["labels"]
    assert np.max(np.abs(np.array(values)[:, 0] - np.array(ours["scores"]))) <= 1e-9
    assert np.mean(np.array(labels) == y_test) > 0.93


def test_liblinear_export_one_vs_rest(http, digits):
    dataset_id, X_test, y_test = digits
    model = train(http, dataset_id, "dcd", {"C": 0.1, "tol": 1e-3})
    loaded = liblinearutil.load_model(saved(export(http, model["id"], "liblinear"), ".liblinear"))
    assert loaded.get_labels() == list(range(1, 11))
    labels, _, values = liblinearutil.predict([], sp.csr_matrix(X_test), loaded, "-q")
    ours = predict(http, model["id"], X_test)
    assert labels == ours["labels"]
    assert np.max(np.abs(np.array(values) - np.array(ours["scores"]))) <= 1e-9
    assert np.mean(np.array(labels) == y_test) > 0.9


@pytest.mark.parametrize("dataset", ["cancer", "digits"])
def test_logistic_regression_answers_liblinear_s7_probabilities(http, request, dataset):
    """dcd's ``loss: logistic`` model: probabilities with no calibration, exported as LIBLINEAR's L2R_LR_DUAL;
    liblinear-official's ``predict -b 1`` gives the same labels and probabilities, and so do ONNX and the file read
    back."""
    dataset_id, X_test, y_test = request.getfixturevalue(dataset)
    model = train(http, dataset_id, "dcd", {"C": 0.5, "loss": "logistic", "tol": 1e-4})
    assert model["probability"]["method"] == "platt_ovr" and set(model["probability"]["A"]) == {-1.0}
    ours = predict(http, model["id"], X_test, probabilities=True)
    probabilities = np.array(ours["probabilities"])
    assert np.allclose(probabilities.sum(axis=1), 1.0)
    text = export(http, model["id"], "liblinear")
    assert b"solver_type L2R_LR_DUAL\n" in text
    loaded = liblinearutil.load_model(saved(text, ".liblinear"))
    labels, _, official = liblinearutil.predict([], sp.csr_matrix(X_test), loaded, "-b 1 -q")
    assert labels == ours["labels"]
    order = [loaded.get_labels().index(label) for label in model["labels"]]  # LIBLINEAR's columns, ours' order
    assert np.max(np.abs(np.array(official)[:, order] - probabilities)) <= 1e-9
    assert np.mean(np.array(labels) == y_test) > 0.9
    imported = import_model(http, text, "liblinear")
    assert imported.status_code == 201, imported.text
    again = predict(http, imported.json()["id"], X_test, probabilities=True)
    assert np.max(np.abs(np.array(again["probabilities"]) - probabilities)) <= 1e-9
    outputs = run_onnx(export(http, model["id"], "onnx"), X_test)
    assert np.max(np.abs(outputs["probabilities"] - probabilities)) <= 1e-4


# -- LIBSVM ----------------------------------------------------------------------------------------


def _libsvm_matches(http, model, X_test, n_classes):
    loaded = svmutil.svm_load_model(saved(export(http, model["id"], "libsvm"), ".libsvm"))
    labels, _, values = svmutil.svm_predict([], sp.csr_matrix(X_test), loaded, "-q")
    ours = predict(http, model["id"], X_test)
    assert labels == ours["labels"]
    values, scores = np.array(values), np.array(ours["scores"])
    if n_classes == 2:
        assert np.max(np.abs(values[:, 0] - scores)) <= 1e-6
    else:
        pairs = [(i, j) for i in range(n_classes) for j in range(i + 1, n_classes)]
        assert values.shape[1] == len(pairs)
        for p, (i, j) in enumerate(pairs):
            assert np.max(np.abs(values[:, p] - (scores[:, i] - scores[:, j]))) <= 1e-6
    return loaded


@pytest.mark.parametrize(
    "solver,params",
    [
        ("smo", {"C": 1.0, "kernel": {"type": "rbf", "gamma": 0.05}}),
        ("smo", {"C": 0.5, "kernel": {"type": "poly", "gamma": 0.1, "coef0": 1.0, "degree": 2}}),
        ("smo", {"C": 0.1, "kernel": {"type": "sigmoid", "gamma": 0.01, "coef0": 0.0}}),
        ("sampled_cuts", {"C": 1.0, "kernel": {"type": "rbf", "gamma": 0.05}, "sample_size": 80}),
        ("dcd", {"C": 0.5}),
    ],
)
def test_libsvm_export_binary(http, cancer, solver, params):
    dataset_id, X_test, y_test = cancer
    model = train(http, dataset_id, solver, params)
    _libsvm_matches(http, model, X_test, 2)


@pytest.mark.parametrize(
    "solver,params",
    [
        ("smo", {"C": 10.0, "kernel": {"type": "rbf", "gamma": 0.02}}),
        ("sampled_cuts", {"C": 10.0, "kernel": {"type": "rbf", "gamma": 0.02}, "sample_size": 150}),
    ],
)
def test_libsvm_export_one_vs_rest_votes_like_our_argmax(http, digits, solver, params):
    dataset_id, X_test, y_test = digits
    model = train(http, dataset_id, solver, params)
    loaded = _libsvm_matches(http, model, X_test, 10)
    assert loaded.get_labels() == list(range(1, 11))


def test_one_vs_one_smo_matches_libsvm_and_exports_its_pairs_and_sigmoids(http, service):
    # trained here with multiclass: ovo, against LIBSVM trained on the same rows (same C, gamma, -e)
    X, y = load_digits(return_X_y=True)
    X_train, y_train, X_test, y_test = split(X / 16.0, y.astype(float) + 1)
    dataset_id = upload(http, svmlight(X_train, y_train)).json()["id"]
    params = {"C": 10.0, "kernel": {"type": "rbf", "gamma": 0.02}, "multiclass": "ovo", "probability": True}
    model = train(http, dataset_id, "smo", params)
    assert model["multiclass"] == "ovo" and model["labels"] == list(range(1, 11))
    ours = predict(http, model["id"], X_test, probabilities=True)
    problem = svmutil.svm_problem(y_train, sp.csr_matrix(X_train))
    oracle = svmutil.svm_train(problem, svmutil.svm_parameter("-t 2 -g 0.02 -c 10 -e 0.001 -q"))
    theirs, _, _ = svmutil.svm_predict([], sp.csr_matrix(X_test), oracle, "-q")
    assert np.mean(np.array(ours["labels"]) == np.array(theirs)) >= 0.99
    assert abs(np.mean(np.array(ours["labels"]) == y_test) - np.mean(np.array(theirs) == y_test)) <= 0.01
    probabilities = np.array(ours["probabilities"])
    assert np.allclose(probabilities.sum(axis=1), 1.0)
    assert np.mean(np.array(model["labels"])[np.argmax(probabilities, axis=1)] == y_test) >= 0.95
    # the LIBSVM file: the same vote, pair decision values and coupled probabilities
    loaded = svmutil.svm_load_model(saved(export(http, model["id"], "libsvm"), ".libsvm"))
    assert loaded.is_probability_model() and loaded.get_labels() == list(range(1, 11))
    labels, _, coupled = svmutil.svm_predict([], sp.csr_matrix(X_test), loaded, "-q -b 1")
    plain, _, _ = svmutil.svm_predict([], sp.csr_matrix(X_test), loaded, "-q")
    assert plain == ours["labels"]
    assert np.max(np.abs(np.array(coupled) - probabilities)) <= 1e-6
    # ONNX and the JSON round trip keep the vote and the probabilities
    outputs = run_onnx(export(http, model["id"], "onnx"), X_test)
    assert outputs["label"].tolist() == ours["labels"]
    document = export(http, model["id"], "json")
    ModelDocument.model_validate_json(document)
    copy = import_model(http, document, "json")
    assert copy.status_code == 201, copy.text
    again = predict(http, copy.json()["id"], X_test, probabilities=True)
    assert again["labels"] == ours["labels"]
    assert np.max(np.abs(np.array(again["probabilities"]) - probabilities)) <= 1e-12


def test_a_one_vs_one_search_over_more_than_two_labels_gives_a_one_vs_one_model(http, digits):
    dataset_id, X_test, _ = digits
    params = {"multiclass": "ovo", "search": {"C": [1.0, 10.0], "cv_folds": 3}}
    model = train(http, dataset_id, "smo", params)
    assert model["multiclass"] == "ovo" and model["search_results"]["best"]["C"] in (1.0, 10.0)
    answer = predict(http, model["id"], X_test[:20])
    pairs = np.asarray(predict(http, model["id"], X_test[:20], decision_function_shape="ovo")["scores"])
    assert np.asarray(answer["scores"]).shape == (20, 10) and pairs.shape == (20, 45)
    votes = np.zeros((20, 10))
    for k, (i, j) in enumerate((a, b) for a in range(10) for b in range(a + 1, 10)):
        votes[np.arange(20), np.where(pairs[:, k] > 0, i, j)] += 1
    assert np.array_equal(np.argmax(votes, axis=1) + 1, np.asarray(answer["labels"]))  # labels 1..10


def test_libsvm_export_keeps_binary_probabilities(http, cancer):
    dataset_id, X_test, _ = cancer
    model = train(http, dataset_id, "smo", {"C": 1.0, "kernel": {"type": "rbf", "gamma": 0.05}, "probability": True})
    loaded = svmutil.svm_load_model(saved(export(http, model["id"], "libsvm"), ".libsvm"))
    assert loaded.is_probability_model()
    _, _, probabilities = svmutil.svm_predict([], sp.csr_matrix(X_test), loaded, "-q -b 1")
    ours = predict(http, model["id"], X_test, probabilities=True)["probabilities"]
    # LIBSVM lists label 1 first; ours go in ascending label order (-1, 1); LIBSVM clamps to [1e-7, 1 - 1e-7]
    assert np.max(np.abs(np.array(probabilities)[:, ::-1] - np.array(ours))) <= 1e-6


# -- ONNX ------------------------------------------------------------------------------------------


def run_onnx(content: bytes, X) -> dict:
    session = ort.InferenceSession(content, providers=["CPUExecutionProvider"])
    outputs = session.run(None, {"X": np.asarray(X, dtype=np.float32)})
    return dict(zip([o.name for o in session.get_outputs()], outputs))


@pytest.mark.parametrize(
    "data,solver,params",
    [
        ("cancer", "dcd", {"C": 0.5, "probability": True}),
        ("digits", "dcd", {"C": 0.1, "probability": True}),
        ("cancer", "smo", {"C": 1.0, "kernel": {"type": "rbf", "gamma": 0.05}}),
        (
            "wine",
            "smo",
            {"C": 1.0, "kernel": {"type": "poly", "gamma": 0.1, "coef0": 1.0, "degree": 3}, "probability": True},
        ),
        (
            "digits",
            "sampled_cuts",
            {"C": 10.0, "kernel": {"type": "sigmoid", "gamma": 0.01, "coef0": 0.0}, "sample_size": 100},
        ),
    ],
)
def test_onnx_export_runs_in_onnxruntime_like_us(http, request, data, solver, params):
    dataset_id, X_test, _ = request.getfixturevalue(data)
    model = train(http, dataset_id, solver, params)
    outputs = run_onnx(export(http, model["id"], "onnx"), X_test)
    ours = predict(http, model["id"], X_test, probabilities=bool(params.get("probability")))
    assert outputs["label"].tolist() == ours["labels"]
    assert np.max(np.abs(outputs["scores"] - np.array(ours["scores"]))) <= 1e-5
    if params.get("probability"):
        assert np.max(np.abs(outputs["probabilities"] - np.array(ours["probabilities"]))) <= 1e-5


def test_onnx_export_of_pairwise_models_scores_rows(http):
    rng = np.random.default_rng(5)
    X = rng.normal(size=(240, 5))
    latent = X @ np.array([1.0, -0.5, 0.3, 0.0, 0.2]) + 0.2 * rng.normal(size=240)
    ranks = np.digitize(latent, np.quantile(latent, [0.33, 0.66])).astype(float) + 1
    qid = np.repeat(np.arange(24), 10)
    dataset = upload(http, svmlight(X, ranks, qid=qid)).json()
    X_test = rng.normal(size=(50, 5))
    for params in ({"objective": "ordinal", "C": 0.01}, {"objective": "ranking", "C": 0.01}):
        model = train(http, dataset["id"], "cpa", params)
        outputs = run_onnx(export(http, model["id"], "onnx"), X_test)
        ours = predict(http, model["id"], X_test)
        assert np.max(np.abs(outputs["scores"] - np.array(ours["scores"]))) <= 1e-5
        if params["objective"] == "ordinal":
            assert outputs["label"].tolist() == ours["labels"]
        else:
            assert "label" not in outputs and ours["labels"] is None
        for format in ("liblinear", "libsvm"):
            refused = http.get(f"/v1/models/{model['id']}/export", params={"format": format})
            assert refused.status_code == 409 and "json or onnx" in refused.json()["error"]["message"]


# -- JSON and round trips --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data,solver,params",
    [
        ("cancer", "dcd", {"C": 0.5, "probability": True}),
        ("digits", "ocas", {"C": 0.1, "n_processes": 1}),
        ("wine", "smo", {"C": 1.0, "kernel": {"type": "rbf", "gamma": 0.1}, "probability": True}),
        (
            "cancer",
            "sampled_cuts",
            {"C": 1.0, "kernel": {"type": "poly", "gamma": 0.05, "coef0": 1.0, "degree": 2}, "sample_size": 60},
        ),
    ],
)
def test_export_import_predict_is_the_identity(http, request, data, solver, params):
    dataset_id, X_test, y_test = request.getfixturevalue(data)
    model = train(http, dataset_id, solver, params)
    calibrated = bool(params.get("probability"))
    before = predict(http, model["id"], X_test, probabilities=calibrated)
    document = export(http, model["id"], "json")
    ModelDocument.model_validate_json(document)  # the export is valid under its documented schema
    formats = [("json", document)]
    if model["kind"] == "linear":
        formats.append(("liblinear", export(http, model["id"], "liblinear")))
    if len(model["labels"]) == 2:
        formats.append(("libsvm", export(http, model["id"], "libsvm")))
    for format, content in formats:
        extra = {"n_features": model["n_features"]} if format == "libsvm" else {}
        imported = import_model(http, gzip.compress(content) if format == "json" else content, format, **extra)
        assert imported.status_code == 201, (format, imported.text)
        copy = imported.json()
        assert copy["source"] == "imported" and copy["import_format"] == format and copy["job_id"] is None
        assert imported.headers["Location"] == f"/v1/models/{copy['id']}"
        after = predict(http, copy["id"], X_test, probabilities=calibrated and format != "liblinear")
        assert after["labels"] == before["labels"], format
        assert np.max(np.abs(np.array(after["scores"]) - np.array(before["scores"]))) <= (
            0 if format == "json" else 1e-12
        ), format
        if calibrated and format != "liblinear":
            assert np.max(np.abs(np.array(after["probabilities"]) - np.array(before["probabilities"]))) <= 1e-12
        if format == "json":
            assert json.loads(export(http, copy["id"], "json"))["labels"] == json.loads(document)["labels"]
            assert copy["solver"] == solver and copy["params"] == model["params"]
        trace = http.get(f"/v1/models/{copy['id']}/trace").json()
        assert trace == {"job_id": None, "status": None, "points": [], "next": 0}
        http.delete(f"/v1/models/{copy['id']}")


# -- Large models stream ---------------------------------------------------------------------------


def test_a_million_feature_linear_model_streams_and_loads(http):
    rng = np.random.default_rng(3)
    n, width = 400, 1_000_000
    rows = [np.sort(rng.choice(width, 20, replace=False)) for _ in range(n)]
    indptr = np.arange(n + 1) * 20
    indices = np.concatenate(rows)
    data = rng.normal(size=indices.size)
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    text = to_svmlight(indptr, indices, data, y).decode().splitlines()
    text[0] += f" {width}:0.5"  # the widest feature, so the model has 10^6 weights
    dataset = upload(http, ("\n".join(text) + "\n").encode()).json()
    assert dataset["n_features"] == width
    model = train(http, dataset["id"], "dcd", {"C": 1.0})
    with http.stream("GET", f"/v1/models/{model['id']}/export", params={"format": "liblinear"}) as response:
        assert response.status_code == 200 and "content-length" not in response.headers  # streamed in pieces
        pieces = list(response.iter_bytes())
    content = b"".join(pieces)
    assert content.count(b"\n") == width + 7
    loaded = liblinearutil.load_model(saved(content, ".liblinear"))
    matrix = sp.csr_matrix((data, indices, indptr), shape=(n, width))
    labels, _, values = liblinearutil.predict([], matrix[:50], loaded, "-q")
    sparse_rows = [{str(j + 1): float(v) for j, v in zip(matrix[i].indices, matrix[i].data)} for i in range(50)]
    ours = http.post(f"/v1/models/{model['id']}/predict", json={"instances": sparse_rows}).json()
    assert labels == ours["labels"] and np.max(np.abs(np.array(values)[:, 0] - ours["scores"])) <= 1e-9


def test_a_twelve_thousand_support_vector_model_streams(http):
    rng = np.random.default_rng(4)
    m, width = 12_000, 50
    lines = [
        "svm_type c_svc",
        "kernel_type rbf",
        "gamma 0.1",
        "nr_class 2",
        f"total_sv {m}",
        "rho 0.25",
        "label 1 -1",
        f"nr_sv {m // 2} {m // 2}",
        "SV",
    ]
    support = rng.normal(size=(m, width)).round(6)
    coef = np.concatenate([rng.random(m // 2), -rng.random(m // 2)])
    for s in range(m):
        lines.append(f"{float(coef[s])!r} " + " ".join(f"{j + 1}:{float(support[s, j])!r}" for j in range(width)))
    original = ("\n".join(lines) + "\n").encode()
    imported = import_model(http, gzip.compress(original), "libsvm")
    assert imported.status_code == 201, imported.text
    model = imported.json()
    assert model["n_support"] == m
    for format in ("libsvm", "json"):
        with http.stream("GET", f"/v1/models/{model['id']}/export", params={"format": format}) as response:
            assert response.status_code == 200 and "content-length" not in response.headers
            content = b"".join(response.iter_bytes())
        if format == "libsvm":
            X_test = rng.normal(size=(20, width))
            theirs = svmutil.svm_load_model(saved(original, ".libsvm"))
            again = svmutil.svm_load_model(saved(content, ".libsvm"))
            a = svmutil.svm_predict([], sp.csr_matrix(X_test), theirs, "-q")
            b = svmutil.svm_predict([], sp.csr_matrix(X_test), again, "-q")
            assert a[0] == b[0] and np.max(np.abs(np.array(a[2]) - np.array(b[2]))) <= 1e-9
        else:
            assert len(json.loads(content)["coef"][0]) == m


# -- Impossible exports ---------------------------------------------------------------------------


def test_exports_that_a_format_cannot_hold_are_409(http, cancer, digits):
    dataset_id, X_test, _ = cancer
    kernel = train(http, dataset_id, "smo", {"C": 1.0, "kernel": {"type": "rbf", "gamma": 0.05}})
    refused = http.get(f"/v1/models/{kernel['id']}/export", params={"format": "liblinear"})
    assert refused.status_code == 409
    assert "LIBLINEAR files hold linear classifiers" in refused.json()["error"]["message"]
    fractional = io.BytesIO()
    X, y = load_breast_cancer(return_X_y=True)
    fractional.write(svmlight(X[:100] / X.max(axis=0), np.where(y[:100] == 1, 0.5, -0.5)))
    dataset = upload(http, fractional.getvalue()).json()
    model = train(http, dataset["id"], "dcd", {"C": 1.0})
    for format in ("liblinear", "libsvm"):
        refused = http.get(f"/v1/models/{model['id']}/export", params={"format": format})
        assert refused.status_code == 409 and "not all integers" in refused.json()["error"]["message"]
    assert http.get(f"/v1/models/{model['id']}/export", params={"format": "onnx"}).status_code == 200
    assert http.get("/v1/models/mdl_missing/export", params={"format": "json"}).status_code == 404
    assert http.get(f"/v1/models/{model['id']}/export", params={"format": "pmml"}).status_code == 422
    uncalibrated = http.post(
        f"/v1/models/{model['id']}/predict", json={"instances": [[0.0] * 30], "probabilities": True}
    )
    assert uncalibrated.status_code == 409 and "probability: true" in uncalibrated.json()["error"]["message"]

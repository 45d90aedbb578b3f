"""ocas's ``multiclass: crammer_singer`` (worker/solvers/ocas_multiclass.py: Crammer and Singer's multi-class hinge by
OCAS, as libocas's msvmocas) against liblinear-official -s 4 (the same problem by Keerthi et al.'s sequential dual
method), on scikit-learn's digits (ten classes, 8 x 8 pixels) and wine (three classes, standardized)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_digits, load_wine

from tests.helpers import assert_error, liblinear_train, upload
from tests.model_files import export, import_model, predict, saved, split, svmlight, train
from worker.solvers.ocas_multiclass import solve_crammer_singer

liblinearutil = pytest.importorskip("liblinear.liblinearutil")
onnxruntime = pytest.importorskip("onnxruntime")


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    return X / 16.0, y.astype(float)


@pytest.fixture(scope="module")
def wine():
    X, y = load_wine(return_X_y=True)
    return (X - X.mean(axis=0)) / X.std(axis=0), y.astype(float)


def crammer_singer_objective(X, classes, W, b, C):
    """0.5 (|W|^2 + |b / B|^2 with B = 1) + C sum_i max_k (1[k != y_i] + s_ik - s_iy_i), s = X W' + b."""
    scores = X @ W.T + b
    rows = np.arange(classes.size)
    margins = scores - scores[rows, classes][:, None] + 1.0
    margins[rows, classes] = 0.0
    return 0.5 * (float(np.sum(W * W)) + float(np.sum(b * b))) + C * float(margins.max(axis=1).sum())


def liblinear_matrix(model, n_features, labels):
    """liblinear's -s 4 weights, one row per class in ``labels``' order, the bias weight (B = 1) last."""
    order = [list(model.get_labels()).index(int(v)) for v in labels]
    K = len(order)
    table = np.array([[model.w[j * K + k] for k in range(K)] for j in range(n_features + 1)])
    return table.T[order]


def _settings(**changes):
    base = dict(C=1.0, bias=1.0, tol_rel=1e-7, tol_abs=0.0, lam=0.1, max_iter=100000, max_inactive=50)
    return SimpleNamespace(**{**base, **changes})


@pytest.mark.parametrize("name", ["digits", "wine"])
@pytest.mark.parametrize("C", [0.1, 1.0])
def test_reaches_liblinear_s4_optimum_and_predictions(request, name, C):
    X, y = request.getfixturevalue(name)
    X_train, y_train, X_test, _ = split(X, y)
    labels, classes = np.unique(y_train, return_inverse=True)
    M = sp.csr_matrix(X_train)
    result = solve_crammer_singer(
        M.indptr, M.indices, M.data, classes, n_classes=labels.size, n_features=X.shape[1], params=_settings(C=C)
    )
    assert result.converged and result.extra["gap_rel"] <= 1e-7
    biases = result.extra["biases"]
    assert result.objective == pytest.approx(crammer_singer_objective(X_train, classes, result.w, biases, C), rel=1e-12)
    official, _ = liblinear_train(X_train, y_train, f"-s 4 -c {C} -e 1e-6 -B 1")
    table = liblinear_matrix(official, X.shape[1], labels)
    reference = crammer_singer_objective(X_train, classes, table[:, :-1], table[:, -1], C)
    # not above LIBLINEAR's point by more than our certified gap, and within 1e-4 of it
    assert result.objective <= reference * (1 + 1e-7)
    assert result.objective == pytest.approx(reference, rel=1e-4)
    assert all(p["lower_bound"] <= p["primal"] for p in result.trace)
    ours = np.argmax(X_test @ result.w.T + biases, axis=1)
    theirs = np.argmax(X_test @ table[:, :-1].T + table[:, -1], axis=1)
    assert np.mean(ours == theirs) >= 0.99  # measured: 1.0 on all four


def test_starts_from_w0_and_stops_at_max_iter(digits):
    X, y = digits
    classes = y.astype(np.int64)
    M = sp.csr_matrix(X)
    args = (M.indptr, M.indices, M.data, classes)
    first = solve_crammer_singer(*args, n_classes=10, n_features=64, params=_settings(tol_rel=1e-3))
    start = np.hstack([first.w, first.extra["biases"][:, None]])
    warm = solve_crammer_singer(*args, n_classes=10, n_features=64, params=_settings(tol_rel=1e-3), w0=start)
    assert warm.n_iter < first.n_iter and warm.extra["gap_rel"] <= 1e-3
    capped = solve_crammer_singer(*args, n_classes=10, n_features=64, params=_settings(max_iter=3))
    assert capped.stop_reason.value == "max_iter" and len(capped.trace) == 3 and not capped.converged


def test_service_trains_exports_as_liblinear_s4_and_imports_back(http, digits, wine):
    """Through the API: a ten-class model with a certified gap, one weight vector per class; its LIBLINEAR file
    (MCSVM_CS) is read by liblinear-official with the same labels, and imports back; its ONNX graph runs in
    onnxruntime; two classes keep one score."""
    X, y = digits
    X_train, y_train, X_test, y_test = split(X, y)
    dataset = upload(http, svmlight(X_train, y_train)).json()
    model = train(http, dataset["id"], "ocas", {"multiclass": "crammer_singer", "C": 0.5})
    assert model["stop_reason"] == "converged" and model["gap_rel"] <= 0.01
    assert model["n_iter_per_problem"] == [model["n_iter"]] and model["labels"] == [float(v) for v in range(10)]
    assert model["train_accuracy"] > 0.95
    ours = predict(http, model["id"], X_test)
    assert np.mean(np.array(ours["labels"]) == y_test) > 0.93
    text = export(http, model["id"], "liblinear")
    assert text.startswith(b"solver_type MCSVM_CS\nnr_class 10\n")
    loaded = liblinearutil.load_model(saved(text, ".liblinear"))
    labels, _, _ = liblinearutil.predict([], sp.csr_matrix(X_test), loaded, "-q")
    assert labels == ours["labels"]
    session = onnxruntime.InferenceSession(export(http, model["id"], "onnx"), providers=["CPUExecutionProvider"])
    onnx_labels = session.run(None, {"X": np.asarray(X_test, dtype=np.float32)})[0]
    assert np.mean(np.asarray(onnx_labels, dtype=float).ravel() == np.array(ours["labels"])) >= 0.99  # float32 inputs
    back = import_model(http, text, "liblinear")
    assert back.status_code == 201
    assert predict(http, back.json()["id"], X_test)["labels"] == ours["labels"]

    Xw, yw = wine
    pair = yw != 2.0
    two = upload(http, svmlight(Xw[pair], yw[pair])).json()
    binary = train(http, two["id"], "ocas", {"multiclass": "crammer_singer", "tol_rel": 1e-6})
    scores = np.array(predict(http, binary["id"], Xw[pair])["scores"])
    assert binary["labels"] == [0.0, 1.0] and np.asarray(scores).ndim == 1
    text = export(http, binary["id"], "liblinear")
    loaded = liblinearutil.load_model(saved(text, ".liblinear"))
    labels, _, _ = liblinearutil.predict([], sp.csr_matrix(Xw[pair]), loaded, "-q")
    assert labels == list(np.where(scores > 0, 1.0, 0.0))
    # the two-class Crammer-Singer problem at C is the binary hinge with 0.25 |w|^2: ocas at 2C, halved weights
    plain = train(http, two["id"], "ocas", {"C": 2.0, "tol_rel": 1e-6})
    assert binary["objective"] == pytest.approx(plain["objective"] / 2, rel=1e-4)


@pytest.mark.parametrize(
    ("solver", "params"),
    [
        ("smo", {"multiclass": "crammer_singer"}),
        ("dcd", {"multiclass": "crammer_singer"}),
        ("dcd", {"multi_class": "crammer_singer"}),
    ],
)
def test_other_solvers_point_to_ocas(http, wine, solver, params):
    X, y = wine
    dataset = upload(http, svmlight(X[:60], y[:60])).json()
    response = http.post("/v1/jobs", json={"dataset_id": dataset["id"], "solver": solver, "params": params})
    assert_error(response, 422, "validation_error", "solver ocas", '"multiclass": "crammer_singer"')


def test_probabilities_from_cross_validated_scores(http, digits, wine):
    """probability: a softmax over the K Crammer-Singer scores fitted on 5-fold held-out scores (a sigmoid of the
    one score for two labels): rows sum to 1, the most probable label is nearly always the predicted one, and the
    held-out log-loss is that of a calibrated model."""
    X, y = digits
    X_train, y_train, X_test, y_test = split(X, y)
    dataset = upload(http, svmlight(X_train, y_train)).json()
    model = train(http, dataset["id"], "ocas", {"multiclass": "crammer_singer", "C": 0.5, "probability": True})
    assert model["probability"]["method"] == "multinomial" and model["probability"]["cv_folds"] == 5
    out = predict(http, model["id"], X_test, probabilities=True)
    P = np.array(out["probabilities"])
    assert P.shape == (len(X_test), 10) and np.allclose(P.sum(axis=1), 1.0)
    assert np.mean(np.argmax(P, axis=1) == np.array(out["labels"])) >= 0.98
    log_loss = -np.mean(np.log(P[np.arange(len(y_test)), y_test.astype(int)] + 1e-15))
    assert log_loss < 0.3, log_loss  # measured 0.12; a uniform guess is 2.3
    Xw, yw = wine
    pair = yw != 2.0
    two = upload(http, svmlight(Xw[pair], yw[pair])).json()
    binary = train(http, two["id"], "ocas", {"multiclass": "crammer_singer", "probability": True})
    assert binary["probability"]["method"] == "platt_ovr"
    P2 = np.array(predict(http, binary["id"], Xw[pair], probabilities=True)["probabilities"])
    assert P2.shape == (int(pair.sum()), 2) and np.allclose(P2.sum(axis=1), 1.0)


def test_search_over_C_fits_the_whole_problem_per_fold(http, digits):
    """A search of C: each fold and setting fits the one Crammer-Singer problem, scored by the argmax of its K
    scores; the best C is refit on all the rows and is the setting of the best mean."""
    X, y = digits
    X_train, y_train, _, _ = split(X, y)
    dataset = upload(http, svmlight(X_train, y_train)).json()
    grid = [0.001, 0.1]
    model = train(http, dataset["id"], "ocas", {"multiclass": "crammer_singer", "search": {"C": grid, "cv_folds": 3}})
    table = model["search_results"]
    assert model["refit_params"]["C"] in grid and model["n_iter_per_problem"] == [model["n_iter"]]
    means = {row["C"]: row["mean"] for row in table["settings"]}
    assert set(means) == set(grid) and all(0.5 < v <= 1.0 for v in means.values()), table
    assert model["refit_params"]["C"] == max(grid, key=lambda C: (means[C], -C))

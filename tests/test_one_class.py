"""The one-class SVM (smo's ``svm_type: one_class``, LIBSVM's -s 2) through the service, against libsvm-official.

One-class data: the benign rows of scikit-learn's breast cancer set (standardized; a seeded 70/30 split of all the
rows), the malignant ones the outliers of the held-out split (labels 1 benign, -1 malignant). LIBSVM trains on the
same benign training rows.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_breast_cancer
from sklearn.metrics.pairwise import rbf_kernel

from tests.helpers import assert_error, upload
from tests.model_files import export, import_model, predict, saved, split, svmlight, train

svmutil = pytest.importorskip("libsvm.svmutil")


@pytest.fixture(scope="module")
def cancer(service):
    """(benign training rows uploaded, all training rows uploaded, held-out X, held-out labels, benign X_train)."""
    X, y = load_breast_cancer(return_X_y=True)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    X_train, y_train, X_test, y_test = split(X, np.where(y == 1, 1.0, -1.0))
    benign = X_train[y_train > 0]
    with service.client() as http:
        inliers = upload(http, svmlight(benign, np.ones(len(benign)))).json()
        labelled = upload(http, svmlight(X_train, y_train)).json()
    return inliers, labelled, X_test, y_test, benign


def _libsvm_dual(model, gamma: float) -> float:
    """0.5 alpha' K alpha of a LIBSVM one-class model (its "obj"; ours is its negative at the optimum)."""
    support = np.array([[sv.get(j + 1, 0.0) for j in range(30)] for sv in model.get_SV()])
    alpha = np.array([c[0] for c in model.get_sv_coef()])
    return 0.5 * float(alpha @ rbf_kernel(support, support, gamma=gamma) @ alpha)


@pytest.mark.parametrize("nu,gamma", [(0.1, 0.05), (0.5, 0.01)])
def test_one_class_reaches_libsvm_optimum_and_labels_as_it(http, cancer, nu, gamma):
    inliers, _, X_test, y_test, benign = cancer
    params = {"svm_type": "one_class", "nu": nu, "kernel": {"type": "rbf", "gamma": gamma}}
    model = train(http, inliers["id"], "smo", {**params, "tol": 1e-6, "tol_rel": 1e-9})
    assert model["task"] == "one_class" and model["labels"] == [-1.0, 1.0] and model["gap_rel"] <= 1e-9
    official = svmutil.svm_train(
        list(np.ones(len(benign))), sp.csr_matrix(benign), f"-s 2 -t 2 -g {gamma} -n {nu} -e 1e-6 -q"
    )
    assert model["objective"] == pytest.approx(-_libsvm_dual(official, gamma), rel=1e-6)
    assert model["n_support"] == official.l
    # nu bounds the fraction of rows strictly outside; rows on the boundary (f = 0 up to rounding) go either way
    on_training, _, _ = svmutil.svm_predict([], sp.csr_matrix(benign), official, "-q")
    assert model["train_outlier_fraction"] == pytest.approx(np.mean(np.array(on_training) < 0), abs=0.05)
    theirs, _, _ = svmutil.svm_predict([], sp.csr_matrix(X_test), official, "-q")
    ours = np.array(predict(http, model["id"], X_test)["labels"])
    assert np.mean(ours == np.array(theirs)) >= 0.999
    assert set(ours.tolist()) == {-1, 1}


def test_one_class_evaluate_and_models_out_and_back(http, cancer, tmp_path):
    """Evaluate on held-out rows labelled 1 / -1: the outlier fraction and the classification metrics as the
    predictions give them; the LIBSVM file labels as libsvm-official reads it, and imports back; an official -s 2
    file imports and labels as LIBSVM does."""
    inliers, _, X_test, y_test, benign = cancer
    model = train(
        http, inliers["id"], "smo", {"svm_type": "one_class", "nu": 0.1, "kernel": {"type": "rbf", "gamma": 0.05}}
    )
    held_out = upload(http, svmlight(X_test, y_test)).json()
    report = http.post(f"/v1/models/{model['id']}/evaluate", json={"dataset_id": held_out["id"]}).json()
    ours = np.array(predict(http, model["id"], X_test)["labels"])
    assert report["task"] == "one_class" and report["outlier_fraction"] == pytest.approx(np.mean(ours < 0))
    assert report["accuracy"] == pytest.approx(np.mean(ours == y_test)) and report["accuracy"] > 0.7
    text = export(http, model["id"], "libsvm")
    assert text.startswith(b"svm_type one_class\n") and b"\nlabel" not in text
    theirs, _, _ = svmutil.svm_predict([], sp.csr_matrix(X_test), svmutil.svm_load_model(saved(text, ".libsvm")), "-q")
    assert np.array_equal(np.array(theirs), ours)
    again = import_model(http, text, "libsvm")
    assert again.status_code == 201 and again.json()["task"] == "one_class", again.text
    assert np.array_equal(np.array(predict(http, again.json()["id"], X_test)["labels"]), ours)
    official = svmutil.svm_train(list(np.ones(len(benign))), sp.csr_matrix(benign), "-s 2 -t 2 -g 0.02 -n 0.2 -q")
    path = str(tmp_path / "one_class.libsvm")
    svmutil.svm_save_model(path, official)
    imported = import_model(http, open(path, "rb").read(), "libsvm")
    assert imported.status_code == 201, imported.text
    theirs, _, _ = svmutil.svm_predict([], sp.csr_matrix(X_test), svmutil.svm_load_model(path), "-q")
    assert np.mean(np.array(predict(http, imported.json()["id"], X_test)["labels"]) == np.array(theirs)) >= 0.999


def test_one_class_search_of_gamma_by_outlier_f1(http, cancer):
    """A search on labelled rows (1 inlier, -1 outlier): each fold scored by the F1 of the outliers the model finds."""
    _, labelled, _, _, _ = cancer
    search = {"gamma": [0.001, 0.05], "cv_folds": 3}
    model = train(http, labelled["id"], "smo", {"svm_type": "one_class", "nu": 0.4, "search": search})
    table = model["search_results"]
    assert table["metric"] == "f1" and len(table["settings"]) == 2
    best = max(table["settings"], key=lambda row: row["mean"])
    assert model["refit_params"]["gamma"] == best["gamma"] and 0.0 < best["mean"] <= 1.0


@pytest.mark.parametrize("params,where,fragment", [
    ({"svm_type": "one_class", "C": 2}, "params", "has no C"),
    ({"nu": 0.3}, "params", "nu"),
    ({"svm_type": "one_class", "class_weight": {"1": 2}}, "params.class_weight", "one-class"),
    ({"svm_type": "one_class", "probability": True}, "params.probability", "one-class"),
    ({"svm_type": "one_class", "search": {"C": [1, 2]}}, "params.search.C", "no C"),
])  # fmt: skip
def test_one_class_refuses_what_it_has_not(http, cancer, params, where, fragment):
    response = http.post("/v1/jobs", json={"dataset_id": cancer[0]["id"], "solver": "smo", "params": params})
    assert_error(response, 422, "validation_error", where, fragment)


def test_one_class_search_needs_outlier_labels(http, cancer):
    """A one-class search scores folds by the outliers' F1: labels other than -1 / 1 are refused, naming them."""
    _, _, X_test, y_test, _ = cancer
    other = upload(http, svmlight(X_test, np.where(y_test > 0, 2.0, 0.0))).json()
    body = {"svm_type": "one_class", "search": {"gamma": [0.1, 1.0]}}
    response = http.post("/v1/jobs", json={"dataset_id": other["id"], "solver": "smo", "params": body})
    assert_error(response, 422, "validation_error", "params.search", "labels -1", "0, 2")


def test_one_row_is_refused_not_trained(http):
    """The steps pair two variables: a one-row data set is a 422 (it once ran the solver past its arrays)."""
    single = upload(http, svmlight(np.array([[1.0, 2.0]]), np.array([1.0]))).json()
    response = http.post(
        "/v1/jobs", json={"dataset_id": single["id"], "solver": "smo", "params": {"svm_type": "one_class"}}
    )
    assert_error(response, 422, "validation_error", "1 row", "at least 2")


def _rows_without_labels(X) -> bytes:
    """svmlight lines with no label: 'index:value ...' (one-based)."""
    return b"".join(
        (" ".join(f"{j + 1}:{float(v)!r}" for j, v in enumerate(row) if v != 0.0) + "\n").encode() for row in X
    )


def test_uploads_without_labels_train_a_one_class_svm(http, cancer):
    """labels=none: svmlight lines that start with their first feature, and a CSV whose every column is a feature,
    upload as one-class data (every label 1, `labelled` false); the one-class model is the one trained on the same
    rows uploaded with labels; a classifier on them is refused, naming the one-class SVM."""
    inliers, _, X_test, _, benign = cancer
    params = {"svm_type": "one_class", "nu": 0.1, "kernel": {"type": "rbf", "gamma": 0.05}}
    reference = train(http, inliers["id"], "smo", params)
    plain = upload(http, _rows_without_labels(benign), labels="none").json()
    assert plain["labelled"] is False and plain["labels"] == {"1": len(benign)}
    assert plain["n_samples"] == len(benign) and plain["n_features"] == 30
    header = ",".join(f"f{j}" for j in range(30)) + "\n"
    table = header + "".join(",".join(repr(float(v)) for v in row) + "\n" for row in benign)
    csv = upload(http, table.encode(), filename="benign.csv", format="csv", labels="none").json()
    assert csv["labelled"] is False and csv["feature_names"] == [f"f{j}" for j in range(30)]
    expected = predict(http, reference["id"], X_test)["labels"]
    for dataset in (plain, csv):
        model = train(http, dataset["id"], "smo", params)
        assert model["objective"] == pytest.approx(reference["objective"], rel=1e-9)
        assert predict(http, model["id"], X_test)["labels"] == expected
    refused = http.post("/v1/jobs", json={"dataset_id": plain["id"], "solver": "dcd", "params": {}})
    assert_error(refused, 422, "validation_error", "without labels", "one_class")
    # a labelled upload whose line starts with a feature says how to send rows without labels
    missing = upload(http, _rows_without_labels(benign[:3]))
    assert missing.status_code == 422 and "labels=none" in missing.json()["error"]["message"]


def test_linear_one_class_on_dcd_is_liblinear_s21(http, cancer):
    """dcd's loss one_class (LIBLINEAR -s 21, worker/solvers/dcd_one_class.py): the optimum of smo's one-class SVM
    with the linear kernel (the same dual), labels as liblinear-official -s 21 on >= 99.9% of the held-out rows; its
    LIBLINEAR file (ONECLASS_SVM, rho) labels as liblinear-official reads it and imports back; C and a bias refused."""
    liblinearutil = pytest.importorskip("liblinear.liblinearutil")
    inliers, _, X_test, _, benign = cancer
    linear = {"svm_type": "one_class", "nu": 0.1, "kernel": {"type": "linear"}, "tol": 1e-6, "tol_rel": 1e-9}
    reference = train(http, inliers["id"], "smo", linear)
    model = train(http, inliers["id"], "dcd", {"loss": "one_class", "nu": 0.1, "tol": 1e-6, "tol_rel": 1e-9})
    assert model["task"] == "one_class" and model["kind"] == "linear" and model["gap_rel"] <= 1e-9
    assert model["params"]["bias"] is None and model["stop_reason"] == "converged"
    # smo's values come from gradients summed over float32 kernel rows (LIBSVM's Qfloat): 5e-6 off here, 6e-8 relative
    assert model["objective"] == pytest.approx(reference["objective"], rel=1e-6)
    official = liblinearutil.train(list(np.ones(len(benign))), sp.csr_matrix(benign), "-s 21 -n 0.1 -e 1e-6 -q")
    theirs, _, _ = liblinearutil.predict([], sp.csr_matrix(X_test), official, "-q")
    ours = np.array(predict(http, model["id"], X_test)["labels"])
    assert np.mean(ours == np.array(theirs)) >= 0.999
    text = export(http, model["id"], "liblinear")
    assert text.startswith(b"solver_type ONECLASS_SVM\nnr_class 2\nnr_feature 30\nbias -1\nrho ")
    loaded = liblinearutil.load_model(saved(text, ".liblinear"))
    again, _, _ = liblinearutil.predict([], sp.csr_matrix(X_test), loaded, "-q")
    assert np.array_equal(np.array(again), ours)
    back = import_model(http, text, "liblinear")
    assert back.status_code == 201 and back.json()["task"] == "one_class", back.text
    assert predict(http, back.json()["id"], X_test)["labels"] == ours.tolist()
    defaults = train(http, inliers["id"], "dcd", {"loss": "one_class"})
    assert defaults["params"]["tol"] == 0.01 and defaults["gap_rel"] <= 0.01
    for params, fragment in (({"C": 2.0}, "has no C"), ({"bias": 1.0}, "no bias feature"), ({"nu": 0.2}, "nu is")):
        body = {
            "dataset_id": inliers["id"],
            "solver": "dcd",
            "params": params if "nu" in params else {"loss": "one_class", **params},
        }
        assert_error(http.post("/v1/jobs", json=body), 422, "validation_error", fragment)


@pytest.mark.parametrize(
    "pattern", ["random", "sorted", "reversed", "few values", "all equal", "sawtooth", "signs and zeros"]
)
def test_the_linear_one_class_pairs_the_most_violating_candidates_whatever_their_order(pattern):
    """dcd's one-class pass steps on the most violating candidates only (worker/solvers/dcd_one_class.py,
    ``_most_violating``): the count smallest keys, in ascending order, with their ids, for keys in any order and with
    ties (a sorted or reversed order once made its splits lopsided; pivots come from a sample), negative keys and
    both zeros (the sort orders the keys' bits)."""
    from worker.solvers.dcd_one_class import _most_violating

    rng = np.random.default_rng(5)
    n = 5000
    keys = {
        "random": rng.random(n),
        "sorted": np.sort(rng.random(n)),
        "reversed": np.sort(rng.random(n))[::-1].copy(),
        "few values": rng.integers(0, 7, n).astype(float),
        "all equal": np.ones(n),
        "sawtooth": (np.arange(n) % 63).astype(float),
        "signs and zeros": np.where(rng.random(n) < 0.2, np.where(rng.random(n) < 0.5, -0.0, 0.0), rng.normal(size=n)),
    }[pattern]
    for count in (1, 2, 499, 2500, n - 1, n):
        work_keys, ids = keys.copy(), np.arange(n, dtype=np.int64)
        _most_violating(ids, work_keys, count, np.empty(n, dtype=np.int64), np.empty(n))
        assert np.array_equal(work_keys[:count], np.sort(keys)[:count])
        assert np.array_equal(keys[ids], work_keys) and np.array_equal(np.sort(ids), np.arange(n))


@pytest.mark.parametrize(("rows", "nu"), [(2, 0.5), (7, 1.0), (50, 0.3), (3001, 0.5), (3001, 0.01), (5000, 0.77)])
def test_the_linear_one_class_starts_on_the_rows_that_weigh_least_along_the_mean(rows, nu):
    """dcd's one-class start (worker/solvers/dcd_one_class.py, ``_start``): feasible (0 <= alpha <= 1, sum nu n, at
    most one fractional), w = sum_i alpha_i x_i and the squared norms exact, and the ones on the rows of smallest
    <x_i, mean> (the vertex of a Frank-Wolfe step from the uniform point), not on the first rows as LIBSVM's start,
    whatever the rows' order; rows without entries included. The same pass writes the dense rows when the solver
    keeps them (and the start is the same without)."""
    from worker.solvers.dcd_one_class import _start

    rng = np.random.default_rng(rows)
    dense = np.abs(rng.normal(size=(rows, 9))) * (rng.random((rows, 9)) < 0.6)
    dense[rng.random(rows) < 0.05] = 0.0
    X = sp.csr_matrix(dense[np.argsort(-dense.sum(axis=1))])  # the heavy rows first: LIBSVM's start takes them
    n = X.shape[0]
    starts = []
    for rows_kept in (np.full((n, 9), np.nan), np.empty((0, 9))):
        alpha, sq, w = np.empty(n), np.empty(n), np.zeros(9)
        work = tuple(np.empty(n, kind) for kind in (np.int64, np.int64, float, float, np.int64, float))
        _start(X.indptr.astype(np.int64), X.indices, X.data, rows_kept, nu * n, alpha, sq, w, np.empty(n), work)
        starts.append((alpha, sq, w))
        assert rows_kept.size == 0 or np.array_equal(rows_kept, X.toarray())
    assert all(np.array_equal(a, b) for a, b in zip(*starts, strict=True))
    assert alpha.min() >= 0.0 and alpha.max() <= 1.0 and np.sum((alpha > 0) & (alpha < 1)) <= 1
    assert alpha.sum() == pytest.approx(nu * n, rel=1e-12)
    assert np.allclose(w, X.T @ alpha) and np.allclose(sq, np.asarray(X.multiply(X).sum(axis=1)).ravel())
    keys = X @ np.asarray(X.sum(axis=0)).ravel()
    ones = alpha == 1.0
    if 0 < ones.sum() < n:  # the ones (nearly all: the threshold comes from a sample) below the others' keys
        assert np.mean(keys[ones] <= np.quantile(keys, min(1.0, nu + 0.05))) >= 0.95


@pytest.mark.parametrize("density", [0.7, 0.1])
def test_the_linear_one_class_reaches_the_same_optimum_from_dense_rows(monkeypatch, density):
    """dcd's one-class keeps the rows dense too when at least half their entries are nonzero (``DENSE_ROWS_AT_LEAST``:
    its passes then sum each row's dot in SIMD lanes, about 4x faster on ijcnn1's 22 features); either way it
    reaches the same optimum and labels the rows alike."""
    from types import SimpleNamespace

    import worker.solvers.dcd_one_class as one_class
    from worker.solvers import kernels

    rng = np.random.default_rng(11)
    X = sp.csr_matrix(np.abs(rng.normal(1.0, 1.0, size=(3000, 14))) * (rng.random((3000, 14)) < density))
    X.sort_indices()
    params = SimpleNamespace(nu=0.3, tol=1e-9, tol_rel=1e-12, max_iter=100000, shrinking=True, trace_every=1,
                             trace_budget=0.1)  # fmt: skip
    arrays = (X.indptr.astype(np.int64), X.indices, X.data)
    results = []
    for share in (0.0, 2.0):  # every data set dense, none dense
        monkeypatch.setattr(kernels, "DENSE_ROWS_AT_LEAST", share)
        results.append(one_class.solve_one_class_linear(*arrays, 14, params))
    dense, sparse = results
    assert dense.stop_reason == sparse.stop_reason == "converged"
    assert dense.objective == pytest.approx(sparse.objective, rel=1e-9)
    labels = [np.sign(X @ result.w + result.bias) for result in results]
    assert np.mean(labels[0] == labels[1]) >= 0.999

"""nu-SVC and nu-SVR (smo's ``svm_type: nu_svc`` / ``nu_svr``: the nu duals' working set, worker/solvers/smo/nu.py)
through the service, against libsvm-official -s 1 and -s 4.

Data: scikit-learn's breast cancer (standardized; two classes), wine (standardized; three classes, one-vs-one) and
diabetes (regression, targets / 100); a seeded 70/30 split of the rows.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_breast_cancer, load_diabetes, load_wine
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.svm import NuSVC

from tests.helpers import assert_error, upload, wait_job
from tests.model_files import export, import_model, predict, saved, split, svmlight, train

svmutil = pytest.importorskip("libsvm.svmutil")


def _standardized(loader):
    X, y = loader(return_X_y=True)
    return (X - X.mean(axis=0)) / X.std(axis=0), y.astype(float)


@pytest.fixture(scope="module")
def cancer():
    X, y = _standardized(load_breast_cancer)
    return split(X, np.where(y == 1, 1.0, -1.0))


@pytest.fixture(scope="module")
def diabetes():
    X, y = load_diabetes(return_X_y=True)
    return split(X, y / 100.0)


def _support_and_coef(model, n_features):
    support = np.array([[sv.get(j + 1, 0.0) for j in range(n_features)] for sv in model.get_SV()])
    return support, np.array([c[0] for c in model.get_sv_coef()])


@pytest.mark.parametrize("nu", [0.1, 0.5])
def test_nu_svc_reaches_libsvm_optimum_and_predicts_as_it(http, cancer, nu):
    X_train, y_train, X_test, _ = cancer
    gamma = 0.05
    dataset = upload(http, svmlight(X_train, y_train)).json()
    params = {"svm_type": "nu_svc", "nu": nu, "kernel": {"type": "rbf", "gamma": gamma}, "tol": 1e-6, "tol_rel": 1e-8}
    model = train(http, dataset["id"], "smo", params)
    assert model["task"] == "classification" and model["gap_rel"] <= 1e-8 and model["stop_reason"] == "converged"
    official = svmutil.svm_train(list(y_train), sp.csr_matrix(X_train), f"-s 1 -n {nu} -t 2 -g {gamma} -e 1e-6 -q")
    # LIBSVM stores alpha y / r: sum |coef| = nu n / r gives r, and the nu primal's optimum is -0.5 alpha' Q alpha
    support, coef = _support_and_coef(official, X_train.shape[1])
    r = nu * len(y_train) / np.abs(coef).sum()
    optimum = -0.5 * r * r * float(coef @ rbf_kernel(support, support, gamma=gamma) @ coef)
    assert model["objective"] == pytest.approx(optimum, rel=1e-6)
    assert model["n_support"] == official.l
    labels, _, values = svmutil.svm_predict([], sp.csr_matrix(X_test), official, "-q")
    sign = 1.0 if official.get_labels()[0] == 1 else -1.0  # LIBSVM's first label scores positive
    ours = predict(http, model["id"], X_test)
    assert ours["labels"] == labels
    assert np.max(np.abs(np.array(ours["scores"]) - sign * np.array(values).ravel())) <= 1e-4


def test_nu_svc_models_out_and_back_and_three_classes(http, cancer):
    """The LIBSVM file says nu_svc and libsvm-official predicts the same labels and values from it; it imports back;
    three classes one-vs-one train and export alike."""
    X_train, y_train, X_test, _ = cancer
    dataset = upload(http, svmlight(X_train, y_train)).json()
    model = train(http, dataset["id"], "smo", {"svm_type": "nu_svc", "nu": 0.3})
    text = export(http, model["id"], "libsvm")
    assert text.startswith(b"svm_type nu_svc\n")
    loaded = svmutil.svm_load_model(saved(text, ".libsvm"))
    labels, _, _ = svmutil.svm_predict([], sp.csr_matrix(X_test), loaded, "-q")
    ours = predict(http, model["id"], X_test)
    assert labels == ours["labels"]
    again = import_model(http, text, "libsvm")
    assert again.status_code == 201, again.text
    assert predict(http, again.json()["id"], X_test)["labels"] == ours["labels"]

    X, y = _standardized(load_wine)
    Xw_train, yw_train, Xw_test, yw_test = split(X, y)
    wine = upload(http, svmlight(Xw_train, yw_train)).json()
    three = train(http, wine["id"], "smo", {"svm_type": "nu_svc", "nu": 0.2, "multiclass": "ovo"})
    # libsvm-official's Python predict dies (SIGBUS) on multi-class nu_svc models, its own as ours: scikit-learn's
    # NuSVC (LIBSVM's code) is the oracle here
    official = NuSVC(nu=0.2, gamma=1 / 13, tol=1e-3).fit(Xw_train, yw_train)
    mine = predict(http, three["id"], Xw_test)["labels"]
    assert mine == official.predict(Xw_test).tolist() and np.mean(np.array(mine) == yw_test) > 0.9
    assert export(http, three["id"], "libsvm").startswith(b"svm_type nu_svc\nkernel_type rbf\n")


@pytest.mark.parametrize("nu,C", [(0.2, 10.0), (0.5, 1.0)])
def test_nu_svr_reaches_libsvm_optimum_and_predicts_as_it(http, diabetes, nu, C):
    X_train, y_train, X_test, _ = diabetes
    gamma = 1.0
    dataset = upload(http, svmlight(X_train, y_train)).json()
    params = {"svm_type": "nu_svr", "nu": nu, "C": C, "kernel": {"type": "rbf", "gamma": gamma}}
    model = train(http, dataset["id"], "smo", {**params, "tol": 1e-6, "tol_rel": 1e-8})
    assert model["task"] == "regression" and model["gap_rel"] <= 1e-8
    official = svmutil.svm_train(
        list(y_train), sp.csr_matrix(X_train), f"-s 4 -n {nu} -c {C} -t 2 -g {gamma} -e 1e-6 -q"
    )
    support, beta = _support_and_coef(official, X_train.shape[1])
    rows = [int(np.flatnonzero(np.all(X_train == s, axis=1))[0]) for s in support]
    optimum = float(y_train[rows] @ beta) - 0.5 * float(beta @ rbf_kernel(support, support, gamma=gamma) @ beta)
    assert model["objective"] == pytest.approx(optimum, rel=1e-6)
    assert model["n_support"] == official.l
    theirs, _, _ = svmutil.svm_predict([], sp.csr_matrix(X_test), official, "-q")
    ours = predict(http, model["id"], X_test)["labels"]  # a regression predicts values
    assert np.max(np.abs(np.array(ours) - np.array(theirs))) <= 1e-4
    text = export(http, model["id"], "libsvm")
    assert text.startswith(b"svm_type nu_svr\n")
    again, _, _ = svmutil.svm_predict([], sp.csr_matrix(X_test), svmutil.svm_load_model(saved(text, ".libsvm")), "-q")
    assert np.max(np.abs(np.array(again) - np.array(ours))) <= 1e-9
    assert import_model(http, text, "libsvm").json()["task"] == "regression"


@pytest.mark.parametrize(
    ("params", "fragments"),
    [
        ({"svm_type": "nu_svc", "nu": 0.9}, ("params.nu", "infeasible", "at most")),
        ({"svm_type": "nu_svc", "C": 5.0}, ("nu_svc", "has no C")),
        ({"svm_type": "nu_svc", "class_weight": {"1": 2.0}}, ("nu_svc", "class_weight")),
        ({"svm_type": "nu_svr", "epsilon": 0.3}, ("nu_svr learns epsilon",)),
        ({"svm_type": "nu_svc", "working_set": "platt"}, ("second_order",)),
    ],
)
def test_refuses_what_nu_does_not_take(http, params, fragments):
    y = np.array([1.0] * 40 + [-1.0] * 10)  # the largest feasible nu of nu_svc: 2 * 10 / 50 = 0.4
    X = np.random.default_rng(0).normal(size=(50, 3))
    dataset = upload(http, svmlight(X, y)).json()
    response = http.post("/v1/jobs", json={"dataset_id": dataset["id"], "solver": "smo", "params": params})
    code = "validation_error"
    assert_error(response, 422, code, *fragments)


def test_nu_svc_search_over_gamma_and_its_refused_C(http, cancer):
    """A nu_svc search scores gamma (its C grid is refused: nu takes C's place); a nu_svr search walks C."""
    X_train, y_train, _, _ = cancer
    dataset = upload(http, svmlight(X_train, y_train)).json()
    body = {"dataset_id": dataset["id"], "solver": "smo", "params": {"svm_type": "nu_svc", "search": {"C": [1, 10]}}}
    assert_error(http.post("/v1/jobs", json=body), 422, "validation_error", "nu_svc has no C")
    model = train(http, dataset["id"], "smo", {"svm_type": "nu_svc", "nu": 0.3, "search": {"gamma": [0.01, 0.1]}})
    assert model["task"] == "classification" and model["train_accuracy"] > 0.9
    assert model["refit_params"]["gamma"] in (0.01, 0.1)


def test_search_over_nu_and_epsilon(http, cancer, diabetes):
    """search.nu and search.epsilon: a search of its own per value on the same folds, merged into one table whose
    settings carry their nu / epsilon; the best over all is refit (refit_params names it); refused where the job
    has no such parameter."""
    X_train, y_train, _, _ = cancer
    classes = upload(http, svmlight(X_train, y_train)).json()
    search = {"nu": [0.05, 0.3], "gamma": [0.01, 0.1], "cv_folds": 3}
    model = train(http, classes["id"], "smo", {"svm_type": "nu_svc", "search": search})
    settings = model["search_results"]["settings"]
    assert sorted((s["nu"], s["gamma"]) for s in settings) == [(0.05, 0.01), (0.05, 0.1), (0.3, 0.01), (0.3, 0.1)]
    best = max(settings, key=lambda s: (s["mean"], -s["C"], -s["gamma"], -s["nu"]))
    assert model["refit_params"]["nu"] == best["nu"] and model["refit_params"]["gamma"] == best["gamma"]
    assert model["objective"] < 0  # the nu primal of the refit (negative at the optimum)

    X_reg, y_reg, _, _ = diabetes
    targets = upload(http, svmlight(X_reg, y_reg)).json()
    svr = train(
        http, targets["id"], "dcd", {"loss": "epsilon_insensitive", "search": {"epsilon": [0.0, 0.5], "C": [0.1, 1.0]}}
    )
    assert sorted((s["epsilon"], s["C"]) for s in svr["search_results"]["settings"]) == [
        (0.0, 0.1),
        (0.0, 1.0),
        (0.5, 0.1),
        (0.5, 1.0),
    ]
    assert svr["refit_params"]["epsilon"] in (0.0, 0.5) and svr["task"] == "regression"

    for solver, params, fragment in (
        ("smo", {"search": {"nu": [0.1, 0.2]}}, "this job has no nu"),
        ("smo", {"svm_type": "nu_svc", "search": {"epsilon": [0.1]}}, "this job has no epsilon"),
    ):
        body = {"dataset_id": classes["id"], "solver": solver, "params": params}
        assert_error(http.post("/v1/jobs", json=body), 422, "validation_error", fragment)


def test_a_distributed_search_over_nu_scores_and_refits_as_the_search_on_one_worker(service, http, cancer):
    """search.nu with distribute: each (nu, fold, gamma) is an RQ job of its own, taken by any worker; the table
    (every setting with its nu, the same folds) and the refit equal those of the search run on one worker."""
    service.wait_workers_idle()
    X_train, y_train, _, _ = cancer
    dataset = upload(http, svmlight(X_train, y_train)).json()
    search = {"nu": [0.05, 0.3], "gamma": [0.01, 0.1], "cv_folds": 3}
    body = {"dataset_id": dataset["id"], "solver": "smo", "params": {"svm_type": "nu_svc", "search": search}}
    spread = wait_job(http, http.post("/v1/jobs", json=_with_search(body, distribute=True)).json()["id"], timeout=300)
    local = wait_job(http, http.post("/v1/jobs", json=body).json()["id"], timeout=300)
    assert spread["status"] == local["status"] == "succeeded", (spread, local)
    table = spread["search_results"]
    assert table["distributed"] is True and len(table["workers"]) >= 1
    assert spread["progress"]["subtasks_done"] == spread["progress"]["subtasks_total"] == 2 * 3 * 2
    keys = ("nu", "C", "gamma", "mean", "fold_scores", "folds_done")
    assert sorted([s[k] for k in keys] for s in table["settings"]) == sorted(
        [s[k] for k in keys] for s in local["search_results"]["settings"]
    )
    assert table["best"] == local["search_results"]["best"] and table["best"]["nu"] in (0.05, 0.3)
    models = [http.get(f"/v1/models/{job['model_id']}").json() for job in (spread, local)]
    assert (
        models[0]["refit_params"] == models[1]["refit_params"]
        and models[0]["refit_params"]["nu"] == table["best"]["nu"]
    )
    assert abs(models[0]["objective"] - models[1]["objective"]) <= 1e-9 * abs(models[1]["objective"])


def _with_search(body: dict, **search) -> dict:
    """``body`` with ``search`` merged into its params.search."""
    params = dict(body["params"], search=dict(body["params"]["search"], **search))
    return dict(body, params=params)

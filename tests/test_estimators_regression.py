"""HingeRegressor as scikit-learn users know LinearSVR and SVR, against a real service (the ``service`` fixture).

scikit-learn's ``check_estimator`` passes as it does for HingeClassifier (tests/test_client.py), linear and rbf;
trained to a tight tolerance, the regressor predicts as LinearSVR run to convergence on scikit-learn's diabetes data
(targets / 100), both losses, with and without an intercept, and with a kernel as SVR (rbf, poly, and the linear
kernel through smo), and with nu as NuSVR (smo's nu_svr); GridSearchCV and cross_val_score score it as they score
LinearSVR and leave only the best estimator's model. Without a service: the parameters map to the dcd job's params, or
smo's epsilon_svr or nu_svr.
"""

from __future__ import annotations

import gc
import inspect
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.datasets import load_diabetes
from sklearn.metrics import r2_score
from sklearn.metrics.pairwise import pairwise_kernels
from sklearn.model_selection import GridSearchCV, KFold, PredefinedSplit, cross_val_score, train_test_split
from sklearn.svm import SVR, LinearSVR, NuSVR
from sklearn.utils.estimator_checks import check_estimator

from hinge_client import Client, HingeRegressor, HingeSearchCV, wait_for_cleanup
from tests.test_client import CHECKS_MAX_ITER, SKIPPED_BY_SCIKIT_LEARN, counts, failure
from worker.training.folds import make_folds

TIGHT = {"tol": 1e-6, "solver_params": {"tol_rel": 1e-9}}
"""A tolerance at which dcd's SVR reaches LinearSVR's converged optimum (tests/test_regression.py)."""


def converged_svr(**params) -> LinearSVR:
    """LinearSVR run to convergence: LIBLINEAR's solver with its iteration cap raised (its default stops early)."""
    return LinearSVR(dual=True, tol=1e-10, max_iter=10**7, random_state=0, **params)


def diabetes():
    """Diabetes (442 rows, 10 features), targets / 100, split into training and held-out rows."""
    X, y = load_diabetes(return_X_y=True)
    return train_test_split(X, y / 100.0, test_size=0.25, random_state=0)


# -- scikit-learn's checks ------------------------------------------------------------------------------

SKIPPED = {
    "check_array_api_input": SKIPPED_BY_SCIKIT_LEARN["check_array_api_input"],
    "check_regressor_data_not_an_array": "needs pandas (for its DataFrame case), which is not a dependency of this "
    "project; scikit-learn skips the whole check without it",
}
"""Checks scikit-learn skips itself here; none is expected to fail (HingeClassifier's Platt failure has no
counterpart: a regressor has no probabilities)."""


@pytest.mark.parametrize(
    "make",
    [
        lambda url: HingeRegressor(max_iter=CHECKS_MAX_ITER, url=url),
        lambda url: HingeRegressor(
            loss="squared_epsilon_insensitive", epsilon=0.0, fit_intercept=False, max_iter=CHECKS_MAX_ITER, url=url
        ),
        lambda url: HingeRegressor(kernel="rbf", url=url),
        lambda url: HingeRegressor(nu=0.5, url=url),
    ],
    ids=["epsilon_insensitive", "squared-no-intercept", "rbf", "nu_svr"],
)
def test_hinge_regressor_passes_check_estimator(service, make):
    """Every check passes (none expected to fail); three of them (check_fit_idempotent, check_fit_check_is_fitted,
    check_n_features_in) fit noise on features centred at 100, where dcd, like LinearSVR, stops at max_iter with a
    ConvergenceWarning (at LinearSVR's default limit here, ``CHECKS_MAX_ITER``: tests/test_client.py says why)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(make(service.base_url), on_fail=None, on_skip=None, expected_failed_checks={})
    failed = {r["check_name"]: failure(r["exception"]) for r in results if r["status"] == "failed"}
    assert not failed, failed
    assert not [r for r in results if r["status"] == "xfail"]
    skipped = {r["check_name"] for r in results if r["status"] == "skipped"}
    assert skipped <= set(SKIPPED), skipped - set(SKIPPED)
    passed = {r["check_name"] for r in results if r["status"] == "passed"}
    assert {"check_regressors_train", "check_regressors_int", "check_supervised_y_2d"} <= passed
    assert len(passed) >= 40, len(passed)


# -- LinearSVR's answers ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "params",
    [
        {"C": 1.0},
        {"C": 0.1, "loss": "squared_epsilon_insensitive"},
        {"C": 10.0, "epsilon": 0.0},
        {"C": 1.0, "fit_intercept": False},
        {"C": 1.0, "intercept_scaling": 3.0, "loss": "squared_epsilon_insensitive"},
    ],
    ids=["l1", "l2", "epsilon0-C10", "no-intercept", "intercept_scaling"],
)
def test_predictions_equal_converged_linear_svr(service, params):
    """The same problem (LIBLINEAR's convention on both sides: the intercept a regularized constant feature of value
    intercept_scaling) solved to the same optimum: held-out predictions within 1e-4, coef_ and intercept_ in
    LinearSVR's shapes. epsilon left out is the service's default, LIBLINEAR's 0.1 (LinearSVR's is 0.0)."""
    X_train, X_test, y_train, y_test = diabetes()
    ours = HingeRegressor(url=service.base_url, **TIGHT, **params).fit(X_train, y_train)
    reference = converged_svr(**{"epsilon": 0.1, **params}).fit(X_train, y_train)
    assert ours.model_["task"] == "regression" and ours.model_["params"]["epsilon"] == reference.epsilon
    predicted = ours.predict(X_test)
    assert predicted.shape == (X_test.shape[0],)
    assert np.max(np.abs(predicted - reference.predict(X_test))) <= 1e-4
    assert ours.coef_.shape == reference.coef_.shape == (10,)
    assert ours.intercept_.shape == (1,)
    np.testing.assert_allclose(ours.coef_, reference.coef_, atol=1e-5 * np.abs(reference.coef_).max())
    np.testing.assert_allclose(ours.intercept_, np.ravel(reference.intercept_), atol=1e-4)
    np.testing.assert_allclose(X_test @ ours.coef_ + ours.intercept_, predicted, rtol=1e-12, atol=1e-12)
    assert ours.score(X_test, y_test) == pytest.approx(r2_score(y_test, predicted), rel=1e-12)
    assert ours.model_["train_r2"] == pytest.approx(r2_score(y_train, ours.predict(X_train)), rel=1e-9)


def test_cross_val_score_and_grid_search_score_as_linear_svr(service):
    """cross_val_score's R² per fold equals LinearSVR's (to 1e-4, same folds); GridSearchCV over C and epsilon chooses
    what it chooses over LinearSVR, and leaves on the service only best_estimator_'s model and job."""
    X, _, y, _ = diabetes()
    folds = KFold(3, shuffle=True, random_state=0)
    ours = cross_val_score(HingeRegressor(C=1.0, url=service.base_url, **TIGHT), X, y, cv=folds)
    theirs = cross_val_score(converged_svr(C=1.0, epsilon=0.1), X, y, cv=folds)
    np.testing.assert_allclose(ours, theirs, atol=1e-4)
    grid = {"C": [0.1, 10.0], "epsilon": [0.0, 0.5]}
    with Client(service.base_url) as client:
        gc.collect()
        before = counts(client)
        search = GridSearchCV(HingeRegressor(url=service.base_url, **TIGHT), grid, cv=folds).fit(X, y)
        after = counts(client)
        assert after == {**before, "models": before["models"] + 1, "jobs": before["jobs"] + 1}, (before, after)
        reference = GridSearchCV(converged_svr(), grid, cv=folds).fit(X, y)
        assert search.best_params_ == reference.best_params_
        np.testing.assert_allclose(
            search.cv_results_["mean_test_score"], reference.cv_results_["mean_test_score"], atol=1e-4
        )
        del search
        gc.collect()
        assert counts(client) == before
    assert wait_for_cleanup(60)


# -- SVR's answers: smo's epsilon_svr -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "params",
    [
        {"kernel": "rbf", "C": 1.0, "gamma": 1.0, "epsilon": 0.1},
        {"kernel": "rbf", "C": 10.0, "gamma": 0.5, "epsilon": 0.05},
        {"kernel": "poly", "C": 3.0, "gamma": 2.0, "degree": 2, "coef0": 1.0, "epsilon": 0.1},
        {"kernel": "linear", "solver": "smo", "C": 1.0, "epsilon": 0.1},
    ],
    ids=["rbf-C1", "rbf-C10", "poly", "linear-smo"],
)
def test_kernel_predictions_equal_svr(service, params):
    """smo's epsilon_svr at a tight tolerance predicts as SVR (LIBSVM -s 3 at tol 1e-6) on held-out rows to 1e-4;
    dual_coef_, support_vectors_ and intercept_ are SVR's (the same support vectors, count and values), and give the
    predictions; coef_ exists for the linear kernel only, as SVR's."""
    X_train, X_test, y_train, y_test = diabetes()
    ours = HingeRegressor(url=service.base_url, **TIGHT, **params).fit(X_train, y_train)
    svr_params = {k: v for k, v in params.items() if k != "solver"}
    reference = SVR(tol=1e-6, **svr_params).fit(X_train, y_train)
    assert ours.solver_ == "smo" and ours.model_["task"] == "regression" and ours.model_["kind"] == "kernel"
    predicted = ours.predict(X_test)
    assert np.max(np.abs(predicted - reference.predict(X_test))) <= 1e-4
    assert ours.dual_coef_.shape == reference.dual_coef_.shape
    assert ours.support_vectors_.shape == reference.support_vectors_.shape
    np.testing.assert_allclose(ours.intercept_, reference.intercept_, atol=1e-4)
    kernel = {k: v for k, v in svr_params.items() if k in ("gamma", "degree", "coef0")}
    values = ours.dual_coef_ @ pairwise_kernels(ours.support_vectors_, X_test, metric=params["kernel"], **kernel)
    np.testing.assert_allclose(values.ravel() + ours.intercept_, predicted, atol=1e-10)
    assert ours.score(X_test, y_test) == pytest.approx(reference.score(X_test, y_test), abs=1e-4)
    if params["kernel"] == "linear":
        np.testing.assert_allclose(ours.coef_, reference.coef_[0], atol=1e-4)
    else:
        with pytest.raises(AttributeError, match="only available when using a linear kernel"):
            ours.coef_  # noqa: B018
        assert not hasattr(ours, "coef_")


@pytest.mark.parametrize(
    "params",
    [{"kernel": "rbf", "C": 10.0, "gamma": 0.5, "nu": 0.5}, {"kernel": "linear", "C": 10.0, "nu": 0.5}],
    ids=["rbf", "linear"],
)
def test_nu_predictions_equal_nu_svr(service, params):
    """nu given is NuSVR: smo's nu_svr ("auto" picks smo, the linear kernel included) at tol 1e-6 predicts as NuSVR
    (LIBSVM -s 4) on held-out rows to 1e-3, with its support vectors (at least nu of the rows: nu bounds their
    fraction from below) and intercept; C is sent as NuSVR's C, epsilon not at all (nu_svr learns it)."""
    X_train, X_test, y_train, y_test = diabetes()
    ours = HingeRegressor(url=service.base_url, **TIGHT, **params).fit(X_train, y_train)
    reference = NuSVR(tol=1e-6, **params).fit(X_train, y_train)
    assert ours.solver_ == "smo" and ours.model_["task"] == "regression" and ours.model_["kind"] == "kernel"
    assert (ours.model_["params"]["svm_type"], ours.model_["params"]["nu"]) == ("nu_svr", 0.5)
    assert ours.model_["params"]["C"] == 10.0 and ours.model_["params"]["epsilon"] == 0.1  # the default, unused
    predicted = ours.predict(X_test)
    assert np.max(np.abs(predicted - reference.predict(X_test))) <= 1e-3
    assert ours.dual_coef_.shape == reference.dual_coef_.shape
    assert ours.support_vectors_.shape[0] >= params["nu"] * X_train.shape[0]
    np.testing.assert_allclose(ours.intercept_, reference.intercept_, atol=1e-3)
    assert ours.score(X_test, y_test) == pytest.approx(reference.score(X_test, y_test), abs=1e-3)
    if params["kernel"] == "linear":
        np.testing.assert_allclose(ours.coef_, reference.coef_[0], atol=1e-3)


def test_gamma_scale_is_svr_default(service):
    """SVR's defaults (rbf, gamma "scale", C 1, epsilon 0.1): the service resolves "scale" to SVR's gamma."""
    X_train, X_test, y_train, _ = diabetes()
    ours = HingeRegressor(kernel="rbf", url=service.base_url, **TIGHT).fit(X_train, y_train)
    reference = SVR(tol=1e-6).fit(X_train, y_train)
    assert ours.model_["kernel"]["gamma"] == pytest.approx(reference._gamma, rel=1e-12)
    assert np.max(np.abs(ours.predict(X_test) - reference.predict(X_test))) <= 1e-4


def test_the_service_refuses_what_its_schema_does_not_take(service):
    X, _, y, _ = diabetes()
    with pytest.raises(ValueError, match=r"refused the training request: params\.epsilon"):
        HingeRegressor(epsilon=-1.0, url=service.base_url).fit(X, y)
    with pytest.raises(ValueError, match=r"refused the training request: params\.C"):
        HingeRegressor(C=0.0, url=service.base_url).fit(X, y)


# -- parameters, without a service ------------------------------------------------------------------------


def test_parameters_map_to_the_dcd_job():
    params = HingeRegressor().service_params()
    assert params == {"C": 1.0, "loss": "epsilon_insensitive", "bias": 1.0, "seed": 0}  # epsilon, tol: the service's
    reg = HingeRegressor(
        C=2,
        epsilon=0.25,
        loss="squared_epsilon_insensitive",
        tol=1e-5,
        intercept_scaling=3,
        max_iter=50,
        random_state=7,
        max_seconds=9,
        solver_params={"tol_rel": 1e-6, "shrinking": False},
    )
    assert reg.service_params() == {
        "C": 2.0,
        "loss": "squared_epsilon_insensitive",
        "bias": 3.0,
        "seed": 7,
        "max_iter": 50,
        "max_seconds": 9.0,
        "epsilon": 0.25,
        "tol": 1e-5,
        "tol_rel": 1e-6,
        "shrinking": False,
    }
    assert HingeRegressor(fit_intercept=False, intercept_scaling=5.0).service_params()["bias"] is None
    assert clone(reg).get_params() == reg.get_params()
    assert reg.set_params(epsilon=0.0).service_params()["epsilon"] == 0.0


def test_kernel_parameters_map_to_the_smo_job():
    """A kernel is smo's epsilon_svr with SVR's kernel parameters (what a kernel does not use is left out, as SVR
    ignores it), cache_size as cache_mb; LinearSVR's loss and intercept are dcd's only."""
    reg = HingeRegressor(kernel="rbf", C=3, epsilon=0.2, tol=1e-4, max_iter=1000, solver_params={"tol_rel": 1e-6})
    assert reg.solver_for() == "smo"
    assert reg.service_params() == {
        "C": 3.0,
        "svm_type": "epsilon_svr",
        "kernel": {"type": "rbf", "gamma": "scale"},
        "shrinking": True,
        "cache_mb": 200.0,
        "seed": 0,
        "max_iter": 1000,
        "epsilon": 0.2,
        "tol": 1e-4,
        "tol_rel": 1e-6,
    }
    poly = HingeRegressor(kernel="poly", gamma=0.5, degree=2, coef0=1, cache_size=50, shrinking=False)
    assert poly.service_params()["kernel"] == {"type": "poly", "gamma": 0.5, "coef0": 1.0, "degree": 2}
    assert (poly.service_params()["cache_mb"], poly.service_params()["shrinking"]) == (50.0, False)
    assert HingeRegressor(kernel="sigmoid", degree=7).service_params()["kernel"] == {
        "type": "sigmoid",
        "gamma": "scale",
        "coef0": 0.0,
    }
    linear = HingeRegressor(kernel="linear", solver="smo", gamma=0.5).service_params()
    assert linear["kernel"] == {"type": "linear"} and linear["svm_type"] == "epsilon_svr" and "bias" not in linear
    assert HingeRegressor(gamma=0.5, cache_size=10).service_params() == HingeRegressor().service_params()  # dcd


def test_nu_maps_to_smo_nu_svr():
    """nu is NuSVR: smo (auto picks it whatever the kernel) with svm_type nu_svr and nu, C as usual, no epsilon; a
    keyword parameter that get_params, set_params and clone carry (None: not used, the solver as before)."""
    reg = HingeRegressor(C=3, nu=0.25)
    assert reg.solver_for() == "smo"
    assert reg.service_params() == {
        "C": 3.0,
        "svm_type": "nu_svr",
        "kernel": {"type": "linear"},
        "shrinking": True,
        "nu": 0.25,
        "cache_mb": 200.0,
        "seed": 0,
    }
    rbf = HingeRegressor(kernel="rbf", nu=1, gamma=0.5, solver="smo").service_params()
    assert (rbf["svm_type"], rbf["nu"], rbf["kernel"]) == ("nu_svr", 1.0, {"type": "rbf", "gamma": 0.5})
    assert HingeRegressor().get_params()["nu"] is None
    assert clone(reg).get_params() == reg.get_params() and clone(reg).nu == 0.25
    assert reg.set_params(nu=None).solver_for() == "dcd"
    assert reg.set_params(nu=0.5, kernel="rbf").service_params()["svm_type"] == "nu_svr"
    assert inspect.signature(HingeRegressor).parameters["nu"].kind == inspect.Parameter.KEYWORD_ONLY


@pytest.mark.parametrize(
    "params,message",
    [
        ({"nu": 0.5, "solver": "dcd"}, r"nu=0.5 \(NuSVR\) needs solver 'smo'"),
        ({"nu": 0.5, "epsilon": 0.2}, "NuSVR learns epsilon .*; pass one or the other"),
        ({"nu": 0.5, "epsilon": 0.1}, "NuSVR learns epsilon"),  # even its default, named: nu_svr has no epsilon
        ({"nu": 0.0}, r"nu must be a number in \(0, 1\], got 0.0"),
        ({"nu": 1.5, "kernel": "rbf"}, r"nu must be a number in \(0, 1\]"),
        ({"nu": True}, r"nu must be a number in \(0, 1\]"),
        ({"nu": 0.5, "loss": "squared_epsilon_insensitive"}, "applies to the linear kernel's solver dcd"),
        ({"kernel": "rbf", "loss": "squared_epsilon_insensitive"}, "loss='squared_epsilon_insensitive' applies to"),
        ({"kernel": "rbf", "fit_intercept": False}, "fit_intercept=False applies to the linear kernel's solver dcd"),
        ({"kernel": "poly", "intercept_scaling": 2.0}, "intercept_scaling=2.0 applies to"),
        ({"kernel": "rbf", "solver": "dcd"}, "kernel='rbf' needs solver 'smo'"),
        ({"kernel": "cosine"}, "kernel must be one of 'linear', 'rbf', 'poly', 'sigmoid', 'precomputed'"),
        ({"solver": "ocas"}, "solver must be 'auto', 'dcd' or 'smo'"),
        ({"loss": "hinge"}, "loss must be one of 'epsilon_insensitive', 'squared_epsilon_insensitive'"),
        ({"loss": "squared_loss"}, "loss must be one of"),
        ({"fit_intercept": "yes"}, "fit_intercept must be True or False"),
        ({"intercept_scaling": 0.0}, "intercept_scaling must be a finite number > 0"),
        ({"intercept_scaling": float("inf")}, "intercept_scaling must be a finite number > 0"),
        ({"random_state": "seed"}, "random_state must be"),
    ],
)
def test_what_is_not_a_regression_is_refused_before_any_request(params, message):
    """Refused before the upload (the URL reaches nothing): a classification loss would train a classifier."""
    X, _, y, _ = diabetes()
    with pytest.raises(ValueError, match=message):
        HingeRegressor(url="http://127.0.0.1:9", **params).fit(X, y)


# -- HingeSearchCV over a regressor ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("estimator", "grid", "scoring"),
    [
        ({"kernel": "rbf", "gamma": 0.5}, {"C": [1.0, 10.0], "epsilon": [0.0, 0.3]}, None),  # SVR's, r2
        ({}, {"C": [0.1, 1.0], "epsilon": [0.0, 0.5]}, "neg_mean_squared_error"),  # LinearSVR's (dcd)
        ({"kernel": "rbf", "gamma": 0.5}, {"C": [1.0, 10.0], "nu": [0.2, 0.6]}, None),  # NuSVR's
    ],
    ids=["svr-epsilon", "linear_svr-mse", "nu_svr"],
)
def test_hinge_search_cv_over_a_regressor_scores_as_grid_search_on_the_same_folds(service, estimator, grid, scoring):
    """HingeSearchCV(HingeRegressor(...)): one job of the service's search over C and epsilon (or NuSVR's nu), the
    same best setting and mean scores as GridSearchCV over the estimator on the service's folds (drawn at random for
    a regression); a regressor's tags and R² score."""
    X, _, y, _ = diabetes()
    search = HingeSearchCV(HingeRegressor(url=service.base_url, **TIGHT, **estimator), grid, cv=3, scoring=scoring)
    search.fit(X, y)
    assert search.__sklearn_tags__().estimator_type == "regressor" and not hasattr(search, "classes_")
    assert (
        set(search.best_params_) == set(grid) and search.best_estimator_.get_params()["C"] == search.best_params_["C"]
    )
    same_folds = PredefinedSplit(make_folds(y, None, 3, 0, stratified=False))
    base = HingeRegressor(url=service.base_url, **TIGHT, **estimator, **({"nu": 0.5} if "nu" in grid else {}))
    reference = GridSearchCV(base, grid, cv=same_folds, scoring=scoring).fit(X, y)
    assert search.cv_results_["params"] == reference.cv_results_["params"]
    np.testing.assert_allclose(
        search.cv_results_["mean_test_score"], reference.cv_results_["mean_test_score"], rtol=1e-3, atol=1e-4
    )
    assert search.best_params_ == reference.best_params_
    assert search.score(X, y) == pytest.approx(r2_score(y, search.predict(X)))


@pytest.mark.parametrize(
    ("estimator", "grid", "kwargs", "message"),
    [
        (HingeRegressor(nu=0.3), {"epsilon": [0.1]}, {}, "NuSVR \\(nu\\) learns epsilon"),
        (HingeRegressor(), {"nu": [0.3], "epsilon": [0.1]}, {}, "NuSVR \\(nu\\) learns epsilon"),
        (HingeRegressor(epsilon=0.2), {"nu": [0.3]}, {}, "leave epsilon=None to search nu"),
        (HingeRegressor(), {"gamma": [0.1]}, {}, "gamma applies to kernel 'rbf'"),
        (HingeRegressor(), {"epsilon": [-0.1]}, {}, "finite numbers >= 0"),
        (HingeRegressor(), {"C": [1.0]}, {"scoring": "accuracy"}, "scores a regression by r2"),
    ],
)
def test_a_regressor_search_the_service_cannot_run_is_refused(estimator, grid, kwargs, message):
    X, _, y, _ = diabetes()
    with pytest.raises(ValueError, match=message):
        HingeSearchCV(estimator, grid, **kwargs).fit(X, y)

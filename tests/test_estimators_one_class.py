"""HingeOneClassSVM as scikit-learn users know OneClassSVM, against a real service (the ``service`` fixture).

scikit-learn's ``check_estimator`` passes (an outlier detector's checks among them); trained to a tight tolerance on
the benign rows of scikit-learn's breast cancer data (standardized), the estimator labels held-out rows as OneClassSVM
does and its decision_function, score_samples, offset_ and support vectors are OneClassSVM's. Without a service: the
parameters map to smo's one_class job.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.base import clone, is_outlier_detector
from sklearn.datasets import load_breast_cancer, make_blobs
from sklearn.metrics.pairwise import pairwise_kernels
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from sklearn.svm import OneClassSVM
from sklearn.utils.estimator_checks import check_estimator

from hinge_client import HingeOneClassSVM
from tests.test_client import SKIPPED_BY_SCIKIT_LEARN, failure

TIGHT = {"tol": 1e-6, "solver_params": {"tol_rel": 1e-9}}
"""A tolerance at which smo's one-class SVM reaches LIBSVM's optimum (tests/test_one_class.py)."""


def benign_rows():
    """Breast cancer standardized; (benign training rows, held-out rows of both kinds, their labels 1 / -1)."""
    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=0)
    return X_train[y_train == 1], X_test, np.where(y_test == 1, 1, -1)


@pytest.mark.parametrize("params", [{}, {"solver": "dcd", "kernel": "linear"}], ids=["smo_rbf", "dcd_linear"])
def test_hinge_one_class_svm_passes_check_estimator(service, params):
    """Every check passes, the outlier detector's (check_outliers_train, check_outliers_fit_predict) among them: smo's
    kernel model (the default) and dcd's linear one (LIBLINEAR -s 21)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(
            HingeOneClassSVM(url=service.base_url, **params), on_fail=None, on_skip=None, expected_failed_checks={}
        )
    failed = {r["check_name"]: failure(r["exception"]) for r in results if r["status"] == "failed"}
    assert not failed, failed
    assert not [r for r in results if r["status"] == "xfail"]
    skipped = {r["check_name"] for r in results if r["status"] == "skipped"}
    assert skipped <= set(SKIPPED_BY_SCIKIT_LEARN), skipped - set(SKIPPED_BY_SCIKIT_LEARN)
    passed = {r["check_name"] for r in results if r["status"] == "passed"}
    assert {"check_outliers_train", "check_outliers_fit_predict", "check_fit2d_predict1d"} <= passed
    assert len(passed) >= 40, len(passed)


@pytest.mark.parametrize(
    "params",
    [
        {"nu": 0.1, "gamma": 0.05},
        {"nu": 0.5, "gamma": 0.01},
        {"nu": 0.2},  # gamma "scale"
        {"nu": 0.3, "kernel": "poly", "gamma": 0.1, "degree": 2, "coef0": 1.0},
    ],
    ids=["nu0.1", "nu0.5", "scale", "poly"],
)
def test_labels_and_decision_values_equal_one_class_svm(service, params):
    """The same labels on at least 99.9% of the held-out rows (rows on the boundary may go either way), decision
    values within 1e-4; score_samples, offset_, intercept_ and the support vectors are OneClassSVM's, and give the
    decision values."""
    benign, X_test, _ = benign_rows()
    ours = HingeOneClassSVM(url=service.base_url, **TIGHT, **params).fit(benign)
    reference = OneClassSVM(tol=1e-6, **params).fit(benign)
    assert ours.model_["task"] == "one_class" and ours.model_["labels"] == [-1.0, 1.0]
    predicted = ours.predict(X_test)
    assert predicted.dtype == reference.predict(X_test).dtype and set(predicted.tolist()) <= {-1, 1}
    assert np.mean(predicted == reference.predict(X_test)) >= 0.999
    decision = ours.decision_function(X_test)
    assert np.max(np.abs(decision - reference.decision_function(X_test))) <= 1e-4
    assert np.max(np.abs(ours.score_samples(X_test) - reference.score_samples(X_test))) <= 1e-4
    np.testing.assert_allclose(ours.offset_, reference.offset_, atol=1e-4)
    np.testing.assert_allclose(ours.intercept_, -ours.offset_)
    assert ours.dual_coef_.shape == reference.dual_coef_.shape
    assert ours.support_vectors_.shape == reference.support_vectors_.shape
    kernel = {k: v for k, v in params.items() if k in ("gamma", "degree", "coef0")}
    kernel["gamma"] = ours.model_["kernel"]["gamma"]
    raw = ours.dual_coef_ @ pairwise_kernels(
        ours.support_vectors_, X_test, metric=params.get("kernel", "rbf"), **kernel
    )
    np.testing.assert_allclose(raw.ravel() + ours.intercept_, decision, atol=1e-10)
    np.testing.assert_array_equal(np.where(decision > 0, 1, -1), predicted)


def test_linear_kernel_on_dcd_is_smo_and_one_class_svm(service):
    """kernel="linear": dcd's linear one-class SVM (LIBLINEAR -s 21; "auto" picks it) and smo's linear-kernel model
    solve the same dual: the same w (coef_) and rho, the same labels on >= 99% of the held-out rows and on every
    training row off the boundary (the free support vectors' decision values are within the tolerance of 0 and go
    either way); both label the held-out rows as OneClassSVM(kernel="linear") on >= 98%. dcd's model is linear:
    decision_function is X @ coef_.T + intercept_, and it has no support vectors (AttributeError, as scikit-learn's
    for what a fitted model lacks)."""
    benign, X_test, _ = benign_rows()
    params = {"kernel": "linear", "nu": 0.1, "tol": 1e-6, "url": service.base_url}
    dcd = HingeOneClassSVM(solver="dcd", **params).fit(benign)
    smo = HingeOneClassSVM(solver="smo", **params).fit(benign)
    assert (dcd.solver_, smo.solver_) == ("dcd", "smo")
    assert dcd.model_["task"] == "one_class" and dcd.model_["kind"] == "linear" and dcd.model_["labels"] == [-1.0, 1.0]
    assert dcd.model_["params"]["loss"] == "one_class" and dcd.model_["params"]["bias"] is None
    assert smo.model_["kind"] == "kernel"
    assert dcd.coef_.shape == smo.coef_.shape == (1, benign.shape[1])
    np.testing.assert_allclose(dcd.coef_, smo.coef_, rtol=0, atol=1e-5 * np.abs(smo.coef_).max())
    np.testing.assert_allclose(dcd.offset_, smo.offset_, rtol=1e-6)
    predicted = dcd.predict(X_test)
    assert predicted.dtype == smo.predict(X_test).dtype and set(predicted.tolist()) == {-1, 1}
    assert np.mean(predicted == smo.predict(X_test)) >= 0.99
    off_boundary = np.abs(smo.decision_function(benign)) > 1e-4
    assert np.mean(off_boundary) >= 0.85
    np.testing.assert_array_equal(dcd.predict(benign)[off_boundary], smo.predict(benign)[off_boundary])
    reference = OneClassSVM(kernel="linear", nu=0.1).fit(benign).predict(X_test)
    assert np.mean(predicted == reference) >= 0.98 and np.mean(smo.predict(X_test) == reference) >= 0.98
    # the service's scores are w'x + b, b = -rho: intercept_, offset_ and score_samples as OneClassSVM's
    decision = dcd.decision_function(X_test)
    np.testing.assert_allclose(decision, smo.decision_function(X_test), rtol=0, atol=1e-5 * np.abs(decision).max())
    assert dcd.intercept_.shape == dcd.offset_.shape == (1,)
    np.testing.assert_allclose(dcd.offset_, -dcd.intercept_)
    np.testing.assert_allclose(X_test @ dcd.coef_.T + dcd.intercept_, decision[:, None], rtol=0, atol=1e-9)
    np.testing.assert_allclose(dcd.score_samples(X_test), decision + dcd.offset_)
    np.testing.assert_array_equal(np.where(decision >= 0, 1, -1), predicted)
    for name in ("dual_coef_", "support_vectors_"):
        with pytest.raises(AttributeError, match=f"{name} is only available for a kernel model"):
            getattr(dcd, name)
        assert not hasattr(dcd, name) and hasattr(smo, name)
    auto = HingeOneClassSVM(**params).fit(benign)
    assert auto.solver_ == "dcd"
    np.testing.assert_array_equal(auto.predict(X_test), predicted)


def test_rows_on_dcds_boundary_are_inliers(service):
    """dcd ends exactly on its free support vectors on low-dimensional data (decision values exactly 0 on scikit-learn's
    check_outliers_train blobs): predict calls them inliers, as scikit-learn's outlier detectors (decision_function
    >= 0), where the service's labels (f(x) > 0, LIBLINEAR's) say -1."""
    X, _ = make_blobs(n_samples=300, random_state=0)
    detector = HingeOneClassSVM(kernel="linear", url=service.base_url).fit(X)
    decision = detector.decision_function(X)
    on_boundary = decision == 0
    assert on_boundary.any(), "the service no longer ends exactly on the boundary here: this test lost its premise"
    np.testing.assert_array_equal(detector.predict(X), np.where(decision >= 0, 1, -1))
    np.testing.assert_array_equal(detector.fit_predict(X)[on_boundary], 1)


def test_coef_is_the_linear_kernels_only(service):
    """coef_ as OneClassSVM's: an AttributeError for a kernel other than linear."""
    benign, _, _ = benign_rows()
    detector = HingeOneClassSVM(nu=0.1, gamma=0.05, url=service.base_url).fit(benign)
    assert detector.solver_ == "smo"
    with pytest.raises(AttributeError, match="coef_ is only available when using a linear kernel"):
        detector.coef_  # noqa: B018
    assert not hasattr(OneClassSVM(gamma=0.05).fit(benign), "coef_")


def test_fit_predict_and_outliers_among_the_held_out_rows(service):
    """fit_predict labels the training rows as predict does after fit (nu bounds their outliers, as
    train_outlier_fraction says); the malignant held-out rows are mostly outliers, the benign ones mostly not."""
    benign, X_test, y_test = benign_rows()
    detector = HingeOneClassSVM(nu=0.1, gamma=0.05, url=service.base_url)
    on_training = detector.fit_predict(benign)
    np.testing.assert_array_equal(on_training, detector.predict(benign))
    assert np.mean(on_training < 0) == pytest.approx(detector.model_["train_outlier_fraction"])
    assert np.mean(on_training < 0) <= 0.1 + 0.02
    held_out = detector.predict(X_test)
    assert np.mean(held_out[y_test < 0] < 0) > 0.8 and np.mean(held_out[y_test > 0] > 0) > 0.8
    detector.fit(benign, np.zeros(len(benign)))  # y is ignored, as OneClassSVM's
    np.testing.assert_array_equal(detector.predict(X_test), held_out)


# -- parameters, without a service ------------------------------------------------------------------------


def test_parameters_map_to_the_one_class_job():
    assert HingeOneClassSVM().service_params() == {
        "svm_type": "one_class",
        "nu": 0.5,
        "kernel": {"type": "rbf", "gamma": "scale"},
        "shrinking": True,
        "cache_mb": 200.0,
        "seed": 0,
    }
    detector = HingeOneClassSVM(
        kernel="sigmoid",
        gamma=0.2,
        coef0=-1,
        degree=5,
        nu=0.05,
        tol=1e-5,
        shrinking=False,
        cache_size=64,
        max_iter=99,
        random_state=3,
        max_seconds=4,
        solver_params={"tol_rel": None},
    )
    assert detector.service_params() == {
        "svm_type": "one_class",
        "nu": 0.05,
        "kernel": {"type": "sigmoid", "gamma": 0.2, "coef0": -1.0},
        "shrinking": False,
        "cache_mb": 64.0,
        "seed": 3,
        "max_iter": 99,
        "max_seconds": 4.0,
        "tol": 1e-5,
        "tol_rel": None,
    }
    assert clone(detector).get_params() == detector.get_params()
    assert is_outlier_detector(detector)


def test_parameters_map_to_dcds_linear_one_class_job():
    """dcd (solver "dcd", or "auto" with the linear kernel): loss one_class, nu, shrinking, tol, max_iter and the
    seed; no C, no bias (the service refuses both), no kernel; gamma, degree and coef0 are ignored by the linear
    kernel as with smo (and OneClassSVM), cache_size at its default is not sent."""
    expected = {"loss": "one_class", "nu": 0.5, "shrinking": True, "seed": 0}
    assert HingeOneClassSVM(kernel="linear").service_params() == expected
    assert HingeOneClassSVM(kernel="linear").solver_for() == "dcd"
    assert HingeOneClassSVM(kernel="linear", solver="smo").service_params()["kernel"] == {"type": "linear"}
    assert HingeOneClassSVM(kernel="rbf").solver_for() == "smo"
    detector = HingeOneClassSVM(
        kernel="linear",
        solver="dcd",
        gamma=0.2,
        degree=5,
        coef0=1.0,
        nu=0.05,
        tol=1e-5,
        shrinking=False,
        max_iter=99,
        random_state=3,
        max_seconds=4,
        solver_params={"tol_rel": 1e-6},
    )
    assert detector.service_params() == {
        "loss": "one_class",
        "nu": 0.05,
        "shrinking": False,
        "seed": 3,
        "max_iter": 99,
        "max_seconds": 4.0,
        "tol": 1e-5,
        "tol_rel": 1e-6,
    }
    assert clone(detector).get_params() == detector.get_params()


@pytest.mark.parametrize(
    "params,message",
    [
        ({"kernel": "cosine"}, "kernel must be one of"),
        ({"random_state": "seed"}, "random_state must be"),
        (
            {"solver": "dcd"},
            r"solver='dcd' trains the linear one-class SVM only: set kernel='linear' \(got kernel='rbf'\)",
        ),
        ({"solver": "dcd", "kernel": "poly"}, "set kernel='linear'"),
        ({"solver": "liblinear"}, "solver must be one of 'auto', 'smo', 'dcd', got 'liblinear'"),
        ({"solver": None, "kernel": "linear"}, "solver must be one of"),
        ({"kernel": "linear", "cache_size": 500}, r"cache_size=500 does not apply to solver 'dcd'.*solver='smo'"),
    ],
    ids=["unknown_kernel", "seed", "dcd_rbf", "dcd_poly", "unknown_solver", "solver_none", "dcd_cache_size"],
)
def test_what_is_not_a_one_class_svm_is_refused_before_any_request(params, message):
    benign, _, _ = benign_rows()
    with pytest.raises(ValueError, match=message):
        HingeOneClassSVM(url="http://127.0.0.1:9", **params).fit(benign)


def test_predict_calls_a_row_on_the_boundary_an_inlier():
    """A decision value of exactly 0 is +1 (scikit-learn's outlier detectors: decision_function >= 0), whatever the
    service's label; every other row keeps the service's label."""
    detector = HingeOneClassSVM(url="http://127.0.0.1:9")
    detector.model_id_, detector.n_features_in_ = "model_x", 1
    answer = {"labels": [-1, 1, -1, -1], "scores": np.array([0.0, 2.0, -3.0, -0.0]), "probabilities": None}
    detector._predict_remote = lambda X: answer  # type: ignore[method-assign]
    predicted = detector.predict(np.zeros((4, 1)))
    assert predicted.dtype == np.intp
    np.testing.assert_array_equal(predicted, [1, 1, -1, 1])


def test_a_single_row_is_refused_before_any_request():
    """One row is refused in scikit-learn's words for it (check_fit2d_1sample's): the service's one-class job on a
    single row ends its worker (worker_lost) as of its first one-class version."""
    with pytest.raises(ValueError, match="needs at least 2 samples to describe their support; got 1 sample"):
        HingeOneClassSVM(url="http://127.0.0.1:9").fit(np.ones((1, 3)))


def test_the_service_refuses_what_its_schema_does_not_take(service):
    benign, _, _ = benign_rows()
    with pytest.raises(ValueError, match=r"refused the training request: params\.nu"):
        HingeOneClassSVM(nu=1.5, url=service.base_url).fit(benign)


def test_hinge_search_cv_over_nu_and_gamma_scores_outlier_f1_as_grid_search(service):
    """HingeSearchCV(HingeOneClassSVM()) with labels (1 inlier, -1 outlier): one job of the service's one-class search,
    the folds scored by the F1 of the outliers; the same best setting and mean scores as GridSearchCV over the
    estimator on the service's folds with that scorer (the training ignores the labels in both)."""
    from sklearn.metrics import f1_score, make_scorer
    from sklearn.model_selection import GridSearchCV, PredefinedSplit

    from hinge_client import HingeSearchCV
    from worker.training.folds import make_folds

    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    labels = np.where(y == 1, 1.0, -1.0)  # benign the inliers, malignant the outliers
    grid = {"nu": [0.2, 0.4], "gamma": [0.005, 0.05]}
    estimator = HingeOneClassSVM(url=service.base_url)
    search = HingeSearchCV(estimator, grid, cv=3).fit(X, labels)
    assert search.__sklearn_tags__().estimator_type == "outlier_detector" and not hasattr(search, "classes_")
    assert set(search.best_params_) == {"nu", "gamma"} and search.best_estimator_.nu == search.best_params_["nu"]
    same_folds = PredefinedSplit(make_folds(np.where(labels > 0, 1, 0), None, 3, 0))
    outlier_f1 = make_scorer(f1_score, pos_label=-1)
    reference = GridSearchCV(estimator, grid, cv=same_folds, scoring=outlier_f1).fit(X, labels)
    assert search.cv_results_["params"] == reference.cv_results_["params"]
    np.testing.assert_allclose(
        search.cv_results_["mean_test_score"], reference.cv_results_["mean_test_score"], atol=1e-3
    )
    assert search.best_params_ == reference.best_params_
    assert search.score(X, labels) == pytest.approx(f1_score(labels, search.predict(X), pos_label=-1))
    with pytest.raises(ValueError, match="a one-class SVM has no C"):
        HingeSearchCV(estimator, {"C": [1.0]}).fit(X, labels)
    with pytest.raises(ValueError, match=r"needs labels -1 \(outlier\) and 1 \(inlier\)"):
        HingeSearchCV(estimator, {"nu": [0.2]}).fit(X, y)

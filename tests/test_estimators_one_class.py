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
from sklearn.datasets import load_breast_cancer
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


def test_hinge_one_class_svm_passes_check_estimator(service):
    """Every check passes, the outlier detector's (check_outliers_train, check_outliers_fit_predict) among them."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(
            HingeOneClassSVM(url=service.base_url), on_fail=None, on_skip=None, expected_failed_checks={}
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


@pytest.mark.parametrize(
    "params,message",
    [({"kernel": "precomputed"}, "kernel must be one of"), ({"random_state": "seed"}, "random_state must be")],
)
def test_what_is_not_a_one_class_svm_is_refused_before_any_request(params, message):
    benign, _, _ = benign_rows()
    with pytest.raises(ValueError, match=message):
        HingeOneClassSVM(url="http://127.0.0.1:9", **params).fit(benign)


def test_a_single_row_is_refused_before_any_request():
    """One row is refused in scikit-learn's words for it (check_fit2d_1sample's): the service's one-class job on a
    single row ends its worker (worker_lost) as of its first one-class version."""
    with pytest.raises(ValueError, match="needs at least 2 samples to describe their support; got 1 sample"):
        HingeOneClassSVM(url="http://127.0.0.1:9").fit(np.ones((1, 3)))


def test_the_service_refuses_what_its_schema_does_not_take(service):
    benign, _, _ = benign_rows()
    with pytest.raises(ValueError, match=r"refused the training request: params\.nu"):
        HingeOneClassSVM(nu=1.5, url=service.base_url).fit(benign)

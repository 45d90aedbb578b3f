"""The estimators with ``kernel="precomputed"`` as scikit-learn users know SVC's, SVR's and OneClassSVM's, against a real
service (the ``service`` fixture).

X is a kernel matrix: (n, n) to fit, (m, n) against the fit's rows to predict. The estimators send it in smo's
LIBSVM -t 4 layout (``hinge_client.remote_estimator.precomputed_rows``). On scikit-learn's breast cancer (classes
and, for the one-class SVM, its benign rows) and diabetes (regression) data, standardized, with an rbf kernel
computed outside: the same predictions as the estimator with the same kernel computed by the service, and as
scikit-learn's estimators on the same kernel matrix; the service's search (HingeSearchCV) scores every setting as on
the kernel it computes. HingeClassifier(kernel="precomputed") passes ``check_estimator``
(its pairwise checks).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_diabetes
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC, SVR, OneClassSVM

from hinge_client import HingeClassifier, HingeOneClassSVM, HingeRegressor, HingeSearchCV
from tests.test_client import run_checks

GAMMA = 0.02
TIGHT = {"tol": 1e-6, "solver_params": {"tol_rel": 1e-9}}
"""A tolerance at which smo reaches LIBSVM's optimum, so that the comparisons below are of models, not of stops."""


def _split(X, y):
    X = StandardScaler().fit_transform(X)
    return train_test_split(X, y, test_size=0.3, random_state=0)


def test_hinge_classifier_precomputed_passes_check_estimator(service):
    """Every check scikit-learn runs on a pairwise (precomputed kernel) classifier passes."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run_checks(HingeClassifier(kernel="precomputed", url=service.base_url), {})


def test_precomputed_classifier_predicts_as_the_same_kernel_computed_by_the_service_and_as_svc(service):
    X_train, X_test, y_train, _ = _split(*load_breast_cancer(return_X_y=True))
    K_train, K_test = rbf_kernel(X_train, X_train, gamma=GAMMA), rbf_kernel(X_test, X_train, gamma=GAMMA)
    ours = HingeClassifier(kernel="precomputed", C=10.0, url=service.base_url, **TIGHT).fit(K_train, y_train)
    assert ours.solver_ == "smo" and ours.n_features_in_ == len(y_train)
    computed = HingeClassifier(kernel="rbf", gamma=GAMMA, C=10.0, url=service.base_url, **TIGHT).fit(X_train, y_train)
    svc = SVC(kernel="precomputed", C=10.0, tol=1e-6).fit(K_train, y_train)
    scores = ours.decision_function(K_test)
    np.testing.assert_allclose(scores, computed.decision_function(X_test), atol=1e-6)
    np.testing.assert_allclose(scores, svc.decision_function(K_test), atol=1e-3)
    assert np.array_equal(ours.predict(K_test), svc.predict(K_test))
    assert ours.score(K_test, svc.predict(K_test)) == 1.0


def test_the_services_search_on_a_precomputed_kernel_scores_as_on_the_kernel_it_computes(service):
    """The search's folds take rows of the matrix: a fold's model reads its rows' kernel values through the serials
    of the whole matrix, so every setting scores as with the rbf kernel computed by the service on the same folds."""
    X_train, _, y_train, _ = _split(*load_breast_cancer(return_X_y=True))
    grid = {"C": [0.1, 1.0, 10.0]}
    pre = HingeSearchCV(HingeClassifier(kernel="precomputed", url=service.base_url), grid, cv=3)
    pre.fit(rbf_kernel(X_train, X_train, gamma=GAMMA), y_train)
    computed = HingeSearchCV(HingeClassifier(kernel="rbf", gamma=GAMMA, url=service.base_url), grid, cv=3)
    computed.fit(X_train, y_train)
    np.testing.assert_allclose(pre.cv_results_["mean_test_score"], computed.cv_results_["mean_test_score"], atol=1e-9)
    assert pre.best_params_ == computed.best_params_


def test_precomputed_regressor_predicts_as_svr(service):
    X_train, X_test, y_train, _ = _split(*load_diabetes(return_X_y=True))
    K_train, K_test = rbf_kernel(X_train, X_train, gamma=GAMMA), rbf_kernel(X_test, X_train, gamma=GAMMA)
    ours = HingeRegressor(kernel="precomputed", C=100.0, epsilon=5.0, url=service.base_url, **TIGHT)
    ours.fit(K_train, y_train)
    svr = SVR(kernel="precomputed", C=100.0, epsilon=5.0, tol=1e-6).fit(K_train, y_train)
    np.testing.assert_allclose(ours.predict(K_test), svr.predict(K_test), rtol=1e-4, atol=1e-3)
    assert ours.dual_coef_.shape == svr.dual_coef_.shape
    assert ours.support_vectors_.shape == (0, 0) == svr.support_vectors_.shape  # SVR's: no vectors, only indices


def test_precomputed_one_class_labels_as_one_class_svm(service):
    X, y = load_breast_cancer(return_X_y=True)
    X_train, X_test, y_train, _ = _split(X, y)
    inliers = X_train[y_train == 1]
    K_train, K_test = rbf_kernel(inliers, inliers, gamma=GAMMA), rbf_kernel(X_test, inliers, gamma=GAMMA)
    ours = HingeOneClassSVM(kernel="precomputed", nu=0.1, url=service.base_url, **TIGHT).fit(K_train)
    reference = OneClassSVM(kernel="precomputed", nu=0.1, tol=1e-6).fit(K_train)
    agree = np.mean(ours.predict(K_test) == reference.predict(K_test))
    assert agree >= 0.999, agree
    np.testing.assert_allclose(ours.decision_function(K_test), reference.decision_function(K_test), atol=1e-3)


@pytest.mark.parametrize("estimator", [HingeClassifier, HingeRegressor, HingeOneClassSVM])
def test_precomputed_refuses_a_kernel_that_is_not_square_or_rows_of_another_width(service, estimator):
    X, y = load_breast_cancer(return_X_y=True)
    K = rbf_kernel(X[:40], X[:40], gamma=GAMMA)
    model = estimator(kernel="precomputed", url=service.base_url)
    with pytest.raises(ValueError, match="square kernel matrix.*X is 40x39"):
        model.fit(K[:, :39], y[:40])
    model.fit(K, y[:40])
    with pytest.raises(ValueError, match="39 features"):
        model.predict(K[:5, :39])


def test_a_precomputed_kernel_with_a_solver_that_computes_its_kernel_is_refused_naming_smo(service):
    X, y = load_breast_cancer(return_X_y=True)
    K = rbf_kernel(X[:40], X[:40], gamma=GAMMA)
    with pytest.raises(ValueError, match="precomputed kernel is trained by smo"):
        HingeClassifier(kernel="precomputed", solver="sampled_cuts", url=service.base_url).fit(K, y[:40])

"""dcd's logistic regression (``loss: logistic``, worker/solvers/dcd_logistic.py) against liblinear-official -s 7.

Oracles: LIBLINEAR's own solver of the same dual (-s 7) at a tight -e, its objective computed by ours (the primal in
the service's convention, checked against a naive sum here); the certified gap; scikit-learn's LogisticRegression
(liblinear) for the same model's probabilities.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_breast_cancer
from sklearn.preprocessing import StandardScaler

from core.schemas.solver_params import DcdParams
from tests.helpers import liblinear_train, liblinear_w_full
from worker.solvers.dcd import primal_objective, solve_dcd

pytest.importorskip("liblinear.liblinearutil")

RTOL = 1e-6


@pytest.fixture(scope="module")
def cancer():
    X, labels = load_breast_cancer(return_X_y=True)
    return sp.csr_matrix(StandardScaler().fit_transform(X)), np.where(labels == 1, 1.0, -1.0)


@pytest.fixture(scope="module")
def sparse_text_like():
    """1,500 rows, 8,000 features, 5-40 positive values a row, labels from a planted w with noise."""
    rng = np.random.default_rng(7)
    n_rows, n_features = 1500, 8000
    per_row = rng.integers(5, 41, size=n_rows)
    rows = np.repeat(np.arange(n_rows), per_row)
    X = sp.csr_matrix((rng.random(rows.size), (rows, rng.integers(0, n_features, rows.size))), (n_rows, n_features))
    X.sum_duplicates()
    X.sort_indices()
    y = np.where(X @ rng.normal(size=n_features) + rng.normal(scale=0.5, size=n_rows) > 0, 1.0, -1.0)
    return X, y


def _csr(X):
    return X.indptr.astype(np.int64), X.indices.astype(np.int32), X.data.astype(np.float64)


def _solve(X, y, class_weight=(1.0, 1.0), **params):
    return solve_dcd(
        *_csr(X), y, n_features=X.shape[1], params=DcdParams(loss="logistic", **params), class_weight=class_weight
    )


def _objective(X, y, w_full, C_neg, C_pos, bias):
    return primal_objective(*_csr(X), y, w_full, C_neg=C_neg, C_pos=C_pos, loss="logistic", bias=bias)


def test_primal_objective_is_the_naive_sum(cancer):
    X, y = cancer
    w = np.random.default_rng(0).normal(size=X.shape[1] + 1)
    margins = y * (X @ w[:-1] + 2.0 * w[-1])
    naive = (
        0.5 * w @ w
        + 3.0 * np.sum(np.logaddexp(0.0, -margins[y < 0]))
        + 0.5 * np.sum(np.logaddexp(0.0, -margins[y > 0]))
    )
    assert _objective(X, y, w, 3.0, 0.5, 2.0) == pytest.approx(naive, rel=1e-12)


@pytest.mark.parametrize("bias", [1.0, None])
@pytest.mark.parametrize("C", [0.01, 1.0, 100.0])
def test_breast_cancer_reaches_liblinear_s7_optimum(cancer, bias, C):
    X, y = cancer
    result = _solve(X, y, C=C, bias=bias, tol=1e-8, tol_rel=1e-9, max_iter=10**5)
    assert result.converged and result.extra["gap_rel"] <= 1e-9
    options = f"-s 7 -c {C} -e 1e-8" + (f" -B {bias}" if bias is not None else "")
    model, converged = liblinear_train(X, y, options)
    reference = _objective(X, y, liblinear_w_full(model, bias), C, C, bias)
    assert result.objective <= reference * (1 + RTOL)
    if converged:
        assert result.objective == pytest.approx(reference, rel=RTOL)
    # the optimum's weights, not only its value (the problem is strictly convex)
    ours = np.append(result.w, result.bias / bias) if bias is not None else result.w
    assert np.allclose(ours, liblinear_w_full(model, bias), atol=1e-4 * max(1.0, np.abs(ours).max()))


@pytest.mark.parametrize("C", [0.1, 10.0])
def test_sparse_data_with_class_weights_reaches_liblinear_s7_optimum(sparse_text_like, C):
    X, y = sparse_text_like
    result = _solve(X, y, class_weight=(3.0, 0.5), C=C, tol=1e-8, tol_rel=1e-9, max_iter=10**5)
    assert result.converged
    model, converged = liblinear_train(X, y, f"-s 7 -c {C} -e 1e-8 -B 1 -w-1 3 -w1 0.5")
    reference = _objective(X, y, liblinear_w_full(model, 1.0), 3.0 * C, 0.5 * C, 1.0)
    assert converged and result.objective == pytest.approx(reference, rel=RTOL)


def test_defaults_stop_within_tol_rel_and_as_close_as_liblinear_default(sparse_text_like):
    """At the defaults (tol 0.1 as LIBLINEAR's -e, tol_rel 0.01) the model is certified within 1% and within
    1e-4 of the objective LIBLINEAR reaches at its default -e 0.1."""
    X, y = sparse_text_like
    result = _solve(X, y, C=1.0)
    assert result.converged and result.extra["gap_rel"] <= 0.01
    trace = result.trace
    assert all(p["dual"] <= p["primal"] for p in trace) and trace[-1]["primal"] == result.objective
    model, _ = liblinear_train(X, y, "-s 7 -c 1 -B 1")
    reference = _objective(X, y, liblinear_w_full(model, 1.0), 1.0, 1.0, 1.0)
    assert result.objective <= reference * (1 + 1e-4)


def test_probabilities_are_sklearn_liblinear_logistic_regression(cancer):
    """The model is scikit-learn's LogisticRegression(solver="liblinear") with the same C and intercept
    scaling: the sigmoid of its score is the probability scikit-learn answers."""
    from sklearn.linear_model import LogisticRegression

    X, y = cancer
    result = _solve(X, y, C=0.5, bias=1.0, tol=1e-8, tol_rel=1e-10)
    sk = LogisticRegression(solver="liblinear", C=0.5, intercept_scaling=1.0, tol=1e-10, max_iter=10**4).fit(X, y)
    ours = 1.0 / (1.0 + np.exp(-(X @ result.w + result.bias)))
    assert np.allclose(ours, sk.predict_proba(X)[:, 1], atol=1e-5)


def test_warm_start_from_another_C_reaches_the_same_optimum(cancer):
    X, y = cancer
    cold = _solve(X, y, C=1.0, tol=1e-8, tol_rel=1e-9)
    at_half = _solve(X, y, C=0.5, tol=1e-8, tol_rel=1e-9)
    warm = solve_dcd(
        *_csr(X),
        y,
        n_features=X.shape[1],
        params=DcdParams(loss="logistic", C=1.0, tol=1e-8, tol_rel=1e-9),
        alpha0=2.0 * at_half.extra["alpha"],  # alpha scales with C; some land on the bound C and are moved inside
    )
    assert warm.converged and warm.objective == pytest.approx(cold.objective, rel=1e-8)
    assert np.all(warm.extra["alpha"] > 0) and np.all(warm.extra["alpha"] < 1.0)

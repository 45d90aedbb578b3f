"""Tests of the dual coordinate descent solver (worker/solvers/dcd.py, Hsieh et al. 2008).

Oracles: known answers on tiny problems, the slow references in tests/naive.py, liblinear-official
(-s 3 hinge, -s 1 squared hinge; it stops at a fixed iteration cap, which is detected from its output)
and scikit-learn's LinearSVC (same formulation, run to a tight tolerance) where liblinear stops early.
Objectives are compared, always in the service's convention 0.5*|w|^2 + sum_i C_i loss_i.
"""

from __future__ import annotations

import math
import time
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_breast_cancer, load_digits, load_iris
from sklearn.exceptions import ConvergenceWarning
from sklearn.preprocessing import StandardScaler
from sklearn.svm import LinearSVC

from core.schemas.solver_params import DcdParams
from tests import naive
from tests.helpers import kernels_compiled_after_warm_up, liblinear_train, liblinear_w_full, with_params
from worker.solvers.common import SolverControl, SolverInputError, StopReason
from worker.solvers.dcd import primal_objective, solve_dcd

pytestmark = pytest.mark.solver  # the kinds of tests: tests/conftest.py, TEST_KINDS

_csr = naive.csr_parts

pytest.importorskip("liblinear.liblinearutil")

RTOL = 1e-4
LIBLINEAR_SOLVER = {"hinge": 3, "squared_hinge": 1}


# ---------------------------------------------------------------------------------------------
# data and helpers
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cancer():
    X, labels = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    return X, np.where(labels == 1, 1.0, -1.0)


@pytest.fixture(scope="module")
def sparse_problem():
    """2,000 rows, 12,000 features, about 20 nonzeros per row, labels from a planted w with noise."""
    rng = np.random.default_rng(12345)
    n_rows, n_features = 2000, 12000
    nnz_per_row = rng.integers(10, 31, size=n_rows)
    rows = np.repeat(np.arange(n_rows), nnz_per_row)
    cols = rng.integers(0, n_features, size=rows.size)
    vals = rng.normal(size=rows.size)
    X = sp.csr_matrix((vals, (rows, cols)), shape=(n_rows, n_features))
    X.sum_duplicates()
    X.sort_indices()
    w_true = rng.normal(size=n_features)
    scores = X @ w_true + 0.3 + rng.normal(scale=1.0, size=n_rows)
    y = np.where(scores > 0, 1.0, -1.0)
    return X, y


def _run(X, y, **kwargs):
    indptr, indices, data = _csr(X)
    return solve_dcd(indptr, indices, data, y, n_features=X.shape[1], **with_params(DcdParams, kwargs))


def _objective(X, y, w_full, *, C_neg, C_pos, loss, bias):
    indptr, indices, data = _csr(X)
    return primal_objective(indptr, indices, data, y, w_full, C_neg=C_neg, C_pos=C_pos, loss=loss, bias=bias)


def _full(result, bias):
    """w with w_B appended (w_B = b / B), as primal_objective wants it."""
    if bias is None:
        return result.w
    return np.append(result.w, result.bias / bias)


def _sklearn_objective(X, y, *, C, loss, bias, class_weight=None):
    model = LinearSVC(
        dual=True,
        loss=loss,
        C=C,
        fit_intercept=bias is not None,
        intercept_scaling=1.0 if bias is None else bias,
        tol=1e-8,
        max_iter=10**6,
        class_weight=class_weight,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        A = sp.csr_matrix(X)
        A.indices = A.indices.astype(np.int32)
        A.indptr = A.indptr.astype(np.int32)
        model.fit(A, y)
    # LinearSVC's coef_ is for classes_[1] = +1
    w_full = model.coef_.ravel() if bias is None else np.append(model.coef_.ravel(), model.intercept_[0] / bias)
    cw = class_weight or {}
    return _objective(X, y, w_full, C_neg=C * cw.get(-1, 1.0), C_pos=C * cw.get(1, 1.0), loss=loss, bias=bias)


def _assert_matches_reference(ours, X, y, *, C, loss, bias, class_weight=(1.0, 1.0)):
    """ours within RTOL of liblinear if it converged; else ours <= liblinear*(1+RTOL) and == scikit-learn."""
    options = f"-s {LIBLINEAR_SOLVER[loss]} -c {C} -e 1e-6"
    if bias is not None:
        options += f" -B {bias}"
    if class_weight != (1.0, 1.0):
        options += f" -w-1 {class_weight[0]} -w1 {class_weight[1]}"
    model, converged = liblinear_train(X, y, options)
    C_neg, C_pos = C * class_weight[0], C * class_weight[1]
    reference = _objective(X, y, liblinear_w_full(model, bias), C_neg=C_neg, C_pos=C_pos, loss=loss, bias=bias)
    if converged:
        assert abs(ours - reference) <= RTOL * reference, (ours, reference)
    else:
        assert ours <= reference * (1 + RTOL), (ours, reference)
        sk = _sklearn_objective(X, y, C=C, loss=loss, bias=bias, class_weight={-1: class_weight[0], 1: class_weight[1]})
        assert abs(ours - sk) <= RTOL * sk, (ours, sk)


# ---------------------------------------------------------------------------------------------
# known answers, naive references, KKT
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("C", [0.1, 0.25, 0.5, 3.0])
def test_two_points_hinge_known_answer(C):
    # x = +1 (y = +1), x = -1 (y = -1), no bias: w = alpha_1 + alpha_2 = min(2C, 1).
    X = np.array([[1.0], [-1.0]])
    y = np.array([1.0, -1.0])
    result = _run(X, y, C=C, bias=None, tol=1e-10)
    w = min(2 * C, 1.0)
    assert result.converged and result.stop_reason is StopReason.CONVERGED
    assert result.w[0] == pytest.approx(w, rel=1e-12)
    assert result.objective == pytest.approx(0.5 * w * w + 2 * C * (1 - w), rel=1e-12)
    # Q = [[1, 1], [1, 1]]: only alpha_1 + alpha_2 = w is determined, and both sit at C when 2C < 1
    assert result.extra["alpha"].sum() == pytest.approx(w, rel=1e-12)
    if 2 * C < 1:
        np.testing.assert_allclose(result.extra["alpha"], [C, C], rtol=1e-12)


@pytest.mark.parametrize("C", [0.1, 1.0, 10.0])
def test_two_points_squared_hinge_known_answer(C):
    # 0.5 w^2 + 2C (1 - w)^2 is minimal at w = 4C / (1 + 4C); alpha_i = 2C (1 - w) (= xi_i / D_ii).
    X = np.array([[1.0], [-1.0]])
    y = np.array([1.0, -1.0])
    result = _run(X, y, C=C, loss="squared_hinge", bias=None, tol=1e-12)
    w = 4 * C / (1 + 4 * C)
    assert result.converged
    assert result.w[0] == pytest.approx(w, rel=1e-10)
    assert result.objective == pytest.approx(0.5 * w * w + 2 * C * (1 - w) ** 2, rel=1e-10)
    np.testing.assert_allclose(result.extra["alpha"], 2 * C * (1 - w), rtol=1e-10)


def test_two_points_with_bias_known_answer():
    # x = 2 (y = +1), x = 0 (y = -1), bias B = 1, large C: hard margin on (x, 1):
    # minimize 0.5 (w^2 + v^2) s.t. 2w + v >= 1, -v >= 1  ->  v = -1, w = 1, decision(x) = x - 1.
    # With the literal (17) (max PG - min PG over the epoch), the second epoch sees PG = -0.4 twice and
    # would stop at w = 0.96; M and m must include 0.
    X = np.array([[2.0], [0.0]])
    y = np.array([1.0, -1.0])
    result = _run(X, y, C=100.0, bias=1.0, tol=1e-10, max_iter=10**6)
    assert result.converged
    assert result.w[0] == pytest.approx(1.0, rel=1e-9)
    assert result.bias == pytest.approx(-1.0, rel=1e-9)
    assert result.objective == pytest.approx(1.0, rel=1e-8)


@pytest.mark.parametrize("loss", ["hinge", "squared_hinge"])
@pytest.mark.parametrize("bias", [1.0, None])
def test_kkt_and_duality_gap_at_tight_tol(cancer, loss, bias):
    X, y = cancer
    C = 0.5
    result = _run(X, y, C=C, loss=loss, bias=bias, tol=1e-7, max_iter=200000, trace_every=10**9)
    assert result.converged
    alpha = result.extra["alpha"]
    # w is the primal image of alpha (eq. (11)), recomputed independently
    Z = X if bias is None else np.hstack([X, np.full((X.shape[0], 1), bias)])
    np.testing.assert_allclose(_full(result, bias), Z.T @ (y * alpha), atol=1e-9)
    # KKT: projected gradient from the dense Qbar, max - min below the requested tolerance
    PG = naive.svm_linear_dual_projected_gradient(X, y, alpha, C_neg=C, C_pos=C, loss=loss, bias=bias)
    assert PG.max() - PG.min() < 1e-6
    U, _ = naive.svm_linear_dual_parts(y, C_neg=C, C_pos=C, loss=loss)
    assert np.all(alpha >= 0.0) and np.all(alpha <= U)
    # duality gap
    last = result.trace[-1]
    assert last["primal"] == pytest.approx(result.objective, rel=1e-14)
    assert last["primal"] == pytest.approx(
        naive.svm_linear_primal(X, y, _full(result, bias), C_neg=C, C_pos=C, loss=loss, bias=bias), rel=1e-12
    )
    assert -1e-9 <= last["gap"] <= 1e-6 * last["primal"]
    assert last["max_violation"] < 1e-7


@pytest.mark.parametrize(
    ("loss", "C", "n_epochs", "rtol"), [("hinge", 0.5, 300, 1e-9), ("squared_hinge", 0.1, 800, 1e-5)]
)
def test_matches_naive_cyclic_dcd(loss, C, n_epochs, rtol):
    # the plain cyclic order converges slowly (Section 3.1's point): small C and enough epochs
    X, labels = load_iris(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    y = np.where(labels == 1, 1.0, -1.0)  # versicolor vs rest: not separable
    w_naive, _ = naive.svm_linear_dcd_cyclic(X, y, C_neg=C, C_pos=C, loss=loss, bias=1.0, n_epochs=n_epochs)
    reference = naive.svm_linear_primal(X, y, w_naive, C_neg=C, C_pos=C, loss=loss, bias=1.0)
    result = _run(X, y, C=C, loss=loss, bias=1.0, tol=1e-9, max_iter=10**6, trace_every=10**9)
    assert result.converged
    assert result.objective <= reference * (1 + 1e-9)
    assert result.objective == pytest.approx(reference, rel=rtol)


def test_primal_objective_matches_naive(cancer):
    X, y = cancer
    rng = np.random.default_rng(3)
    for loss in ("hinge", "squared_hinge"):
        for bias in (None, 2.5):
            w_full = rng.normal(scale=0.2, size=X.shape[1] + (bias is not None))
            got = _objective(X, y, w_full, C_neg=0.7, C_pos=1.9, loss=loss, bias=bias)
            want = naive.svm_linear_primal(X, y, w_full, C_neg=0.7, C_pos=1.9, loss=loss, bias=bias)
            assert got == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("loss", ["hinge", "squared_hinge"])
def test_zero_rows_without_bias(cancer, loss):
    # x_i = 0: G_i = -1 + D_ii alpha_i, so alpha_i = U = C (hinge, the 1/Qbar_ii = inf case) or 1/D_ii = 2C.
    X, y = cancer
    C = 0.3
    X0 = np.vstack([X[:100], np.zeros((3, X.shape[1]))])
    y0 = np.concatenate([y[:100], [1.0, -1.0, 1.0]])
    with_zeros = _run(X0, y0, C=C, loss=loss, bias=None, tol=1e-9, max_iter=10**5)
    without = _run(X[:100], y[:100], C=C, loss=loss, bias=None, tol=1e-9, max_iter=10**5)
    expected_alpha = C if loss == "hinge" else 2 * C
    np.testing.assert_allclose(with_zeros.extra["alpha"][-3:], expected_alpha, rtol=1e-12)
    assert with_zeros.objective == pytest.approx(without.objective + 3 * C, rel=1e-8)


# ---------------------------------------------------------------------------------------------
# oracle comparisons
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("loss", ["hinge", "squared_hinge"])
@pytest.mark.parametrize("bias", [1.0, None])
@pytest.mark.parametrize("C", [0.01, 1.0, 10.0])
def test_breast_cancer_matchesliblinear_train(cancer, loss, bias, C):
    X, y = cancer
    result = _run(X, y, C=C, loss=loss, bias=bias, tol=1e-6, max_iter=10**6, trace_every=10**9)
    assert result.converged
    _assert_matches_reference(result.objective, X, y, C=C, loss=loss, bias=bias)


@pytest.mark.parametrize("loss", ["hinge", "squared_hinge"])
@pytest.mark.parametrize("bias", [1.0, None])
@pytest.mark.parametrize("C", [0.1, 1.0])
def test_sparse_high_dimensional_matchesliblinear_train(sparse_problem, loss, bias, C):
    X, y = sparse_problem
    assert X.shape[1] >= 10000
    indptr, indices, data = X.indptr.astype(np.int64), X.indices.astype(np.int32), X.data
    result = solve_dcd(
        indptr,
        indices,
        data,
        y,
        n_features=X.shape[1],
        params=DcdParams(C=C, loss=loss, bias=bias, tol=1e-6, max_iter=10**5, trace_every=10**9),
    )
    assert result.converged
    _assert_matches_reference(result.objective, X, y, C=C, loss=loss, bias=bias)


def test_digits_one_vs_rest_matches_liblinear_per_class():
    X, labels = load_digits(return_X_y=True)
    X = X / 16.0
    C = 0.01  # liblinear finishes every class before its iteration cap here (at C = 0.1 it does not)
    model, converged = liblinear_train(X, labels.astype(float), f"-s 3 -c {C} -e 1e-4 -B 1")
    assert converged
    liblinear_labels = model.get_labels()
    indptr, indices, data = _csr(X)
    for k in range(10):
        y = np.where(labels == k, 1.0, -1.0)
        ours = solve_dcd(
            indptr,
            indices,
            data,
            y,
            n_features=X.shape[1],
            params=DcdParams(C=C, bias=1.0, tol=1e-6, max_iter=10**5, trace_every=10**9),
        )
        w, b = model.get_decfun(liblinear_labels.index(k))  # liblinear's class k vs rest, w for class k
        reference = primal_objective(
            indptr, indices, data, y, np.append(w, b), C_neg=C, C_pos=C, loss="hinge", bias=1.0
        )
        assert abs(ours.objective - reference) <= RTOL * reference, (k, ours.objective, reference)


@pytest.mark.parametrize("loss", ["hinge", "squared_hinge"])
def test_class_weight_matchesliblinear_train(cancer, loss):
    X, y = cancer
    weights = (0.3, 2.5)
    result = _run(X, y, C=0.5, loss=loss, bias=1.0, class_weight=weights, tol=1e-6, max_iter=10**6)
    unweighted = _run(X, y, C=0.5, loss=loss, bias=1.0, tol=1e-6, max_iter=10**6)
    assert result.objective != pytest.approx(unweighted.objective, rel=1e-3)
    _assert_matches_reference(result.objective, X, y, C=0.5, loss=loss, bias=1.0, class_weight=weights)
    # hinge: the box of a row is C * factor(y_i)
    if loss == "hinge":
        alpha = result.extra["alpha"]
        assert alpha[y < 0].max() <= 0.5 * 0.3 + 1e-15 and alpha[y > 0].max() <= 0.5 * 2.5 + 1e-15


# ---------------------------------------------------------------------------------------------
# determinism, options, control
# ---------------------------------------------------------------------------------------------


def test_same_seed_same_result_different_seed_same_objective(cancer):
    X, y = cancer
    runs = [
        _run(X, y, C=1.0, seed=seed, tol=1e-7, max_iter=10**6, trace_every=50, trace_budget=None) for seed in (7, 7, 8)
    ]
    np.testing.assert_array_equal(runs[0].w, runs[1].w)
    np.testing.assert_array_equal(runs[0].extra["alpha"], runs[1].extra["alpha"])
    assert runs[0].bias == runs[1].bias and runs[0].n_iter == runs[1].n_iter
    assert [p["primal"] for p in runs[0].trace] == [p["primal"] for p in runs[1].trace]
    assert not np.array_equal(runs[0].extra["alpha"], runs[2].extra["alpha"])
    assert runs[2].objective == pytest.approx(runs[0].objective, rel=1e-6)


@pytest.mark.parametrize("loss", ["hinge", "squared_hinge"])
def test_shrinking_on_off_same_objective(cancer, loss):
    X, y = cancer
    on = _run(X, y, C=1.0, loss=loss, shrinking=True, tol=1e-7, max_iter=10**6, trace_every=1, trace_budget=None)
    off = _run(X, y, C=1.0, loss=loss, shrinking=False, tol=1e-7, max_iter=10**6, trace_every=1, trace_budget=None)
    assert on.converged and off.converged
    assert on.objective == pytest.approx(off.objective, rel=1e-6)
    assert min(p["active_size"] for p in on.trace) < X.shape[0]  # shrinking did shrink
    assert all(p["active_size"] == X.shape[0] for p in off.trace)
    assert on.trace[-1]["active_size"] == X.shape[0]  # converged on the full set


def test_deadline_in_the_past_stops_after_one_iteration(cancer):
    X, y = cancer
    control = SolverControl(deadline=time.monotonic() - 1.0)
    result = _run(X, y, C=1.0, tol=1e-9, control=control)
    assert result.stop_reason is StopReason.DEADLINE and not result.converged
    assert result.n_iter == 1
    assert math.isfinite(result.objective) and np.all(np.isfinite(result.w))
    assert len(control.points) == 1 and control.points[0]["iteration"] == 1


def test_cancel_stops_after_one_iteration(cancer):
    X, y = cancer
    result = _run(X, y, C=1.0, tol=1e-9, control=SolverControl(cancel_requested=lambda: True))
    assert result.stop_reason is StopReason.CANCELED and result.n_iter == 1
    assert math.isfinite(result.objective)


def test_max_iter_is_reported_not_raised(cancer):
    X, y = cancer
    result = _run(X, y, C=1.0, tol=1e-9, max_iter=2)
    assert result.stop_reason is StopReason.MAX_ITER and not result.converged and result.n_iter == 2
    assert math.isfinite(result.objective)


def test_trace_points_and_timing(cancer):
    X, y = cancer
    seen = []
    control = SolverControl(on_point=seen.append)
    result = _run(X, y, C=1.0, tol=1e-4, max_iter=10**5, trace_every=5, trace_budget=None, control=control)
    iterations = [p["iteration"] for p in result.trace]
    assert iterations == [i for i in range(5, result.n_iter + 1, 5)] + (
        [] if result.n_iter % 5 == 0 else [result.n_iter]
    )
    assert len(seen) == len(result.trace)
    keys = {"iteration", "elapsed_s", "primal", "dual", "gap", "relative_gap", "max_violation", "active_size"}
    for point in result.trace:
        assert keys <= set(point)
        assert point["gap"] >= -1e-9 * abs(point["primal"])  # weak duality
        assert point["relative_gap"] == pytest.approx(point["gap"] / point["primal"])
    elapsed = [p["elapsed_s"] for p in result.trace]
    assert elapsed == sorted(elapsed) and elapsed[-1] <= result.solver_seconds
    assert result.trace_seconds > 0.0
    assert result.trace[-1]["primal"] == result.objective


def test_a_trace_budget_skips_points_and_changes_nothing_else(sparse_problem):
    """Points cost passes, not iterates: any budget gives the same model; a tiny one keeps the first point, the
    last one and those the stopping check computed anyway."""
    X, y = sparse_problem
    every = _run(X, y, C=100.0, tol=1e-4, max_iter=10**5, trace_budget=None)
    tiny = _run(X, y, C=100.0, tol=1e-4, max_iter=10**5, trace_budget=1e-12)
    default = _run(X, y, C=100.0, tol=1e-4, max_iter=10**5, trace_budget=0.1)
    assert len(every.trace) == every.n_iter > 20
    for run in (tiny, default):
        np.testing.assert_array_equal(run.w, every.w)
        assert run.n_iter == every.n_iter and run.objective == every.objective
        iterations = [p["iteration"] for p in run.trace]
        assert iterations[0] == 1 and iterations[-1] == run.n_iter and iterations == sorted(set(iterations))
        kept = {p["iteration"]: p for p in every.trace}
        for point in run.trace:  # the kept points are the full trace's points
            assert point["primal"] == kept[point["iteration"]]["primal"]
    assert len(tiny.trace) <= 4 < every.n_iter, [p["iteration"] for p in tiny.trace]
    assert len(tiny.trace) <= len(default.trace) <= len(every.trace)


@pytest.mark.parametrize("loss", ["hinge", "squared_hinge"])
def test_dense_and_sparse_storage_agree(cancer, loss):
    X, y = cancer
    X = X.copy()
    X[np.abs(X) < 0.5] = 0.0  # about 40% zeros
    A = sp.csr_matrix(X)
    dense_indptr = np.arange(0, X.size + 1, X.shape[1], dtype=np.int64)
    dense_indices = np.tile(np.arange(X.shape[1], dtype=np.int32), X.shape[0])
    dense_data = X.ravel().copy()  # explicit zeros kept
    assert A.nnz < dense_data.size
    dense = solve_dcd(
        dense_indptr,
        dense_indices,
        dense_data,
        y,
        n_features=X.shape[1],
        params=DcdParams(C=1.0, loss=loss, tol=1e-6, max_iter=10**5),
    )
    sparse = solve_dcd(
        A.indptr.astype(np.int64),
        A.indices.astype(np.int32),
        A.data,
        y,
        n_features=X.shape[1],
        params=DcdParams(C=1.0, loss=loss, tol=1e-6, max_iter=10**5),
    )
    assert dense.n_iter == sparse.n_iter
    np.testing.assert_allclose(dense.w, sparse.w, rtol=1e-10, atol=1e-12)
    assert dense.objective == pytest.approx(sparse.objective, rel=1e-12)


@pytest.mark.parametrize("loss", ["hinge", "squared_hinge"])
def test_warm_start_along_a_C_path(cancer, loss):
    X, y = cancer
    cold = _run(X, y, C=2.0, loss=loss, tol=1e-6, max_iter=10**6)
    first = _run(X, y, C=1.0, loss=loss, tol=1e-6, max_iter=10**6)
    warm = _run(X, y, C=2.0, loss=loss, tol=1e-6, max_iter=10**6, alpha0=first.extra["alpha"])
    assert warm.objective == pytest.approx(cold.objective, rel=1e-5)
    again = _run(X, y, C=2.0, loss=loss, tol=1e-6, max_iter=10**6, alpha0=cold.extra["alpha"])
    assert again.n_iter <= max(3, cold.n_iter // 10)
    assert again.objective == pytest.approx(cold.objective, rel=1e-6)
    # alpha0 is clipped into the box [0, U] before w is built from it
    start = np.where(np.arange(X.shape[0]) % 2 == 0, 5.0, -5.0)
    clipped = _run(X, y, C=0.1, loss=loss, tol=1e-3, max_iter=1, alpha0=start)
    assert clipped.extra["alpha"].min() >= 0.0
    if loss == "hinge":
        assert clipped.extra["alpha"].max() <= 0.1


def test_input_errors_name_the_parameter(cancer):
    X, y = cancer
    indptr, indices, data = _csr(X)
    base = dict(n_features=X.shape[1], C=1.0)
    # what the schema validates (C, loss, bias, tol, ...) is refused there: tests/test_params_contract.py
    cases = [(dict(class_weight=(1.0, 0.0)), "class_weight"), (dict(alpha0=np.zeros(3)), "alpha0")]
    for change, name in cases:
        with pytest.raises(SolverInputError, match=name):
            solve_dcd(indptr, indices, data, y, **with_params(DcdParams, {**base, **change}))
    with pytest.raises(SolverInputError, match="labels"):
        solve_dcd(indptr, indices, data, np.where(y > 0, 1.0, 0.0), **with_params(DcdParams, base))
    with pytest.raises(SolverInputError):
        solve_dcd(indptr.astype(np.int32), indices, data, y, **with_params(DcdParams, base))
    with pytest.raises(SolverInputError, match="y"):
        solve_dcd(indptr, indices, data, y[:-1], **with_params(DcdParams, base))


@pytest.mark.parametrize(
    ("warm_ups", "losses"),
    [("warm_up()", "C_SVC_LOSSES"), ("warm_up(); warm_up_formulations()", "LOSSES")],
    ids=["c_svc", "with_formulations"],
)
def test_warm_up_leaves_nothing_for_a_job_to_compile(warm_ups, losses):
    """After warm_up (dcd's own unit), training C-SVC on every array type a worker hands over (int32 or int64
    indices, float64 or float32 values, writable or read-only: a data set mapped from the worker's cache) compiles
    nothing; after warm_up_formulations too (the unit dcd_formulations), nor does logistic regression."""
    use = f"""
from core.schemas.solver_params import DcdParams
from worker.solvers.dcd import {losses} as LOSSES, primal_objective, solve_dcd
for index_dtype, value_dtype, writable in ((np.int32, np.float64, True), (np.int32, np.float64, False),
                                           (np.int32, np.float32, True), (np.int32, np.float32, False),
                                           (np.int64, np.float64, True)):
    arrays = (np.array([0, 2, 3, 5], dtype=np.int64), np.array([0, 2, 1, 0, 2], dtype=index_dtype),
              np.array([1.0, -0.5, 2.0, 1.5, -1.0], dtype=value_dtype), np.array([1.0, -1.0, 1.0]))
    for a in arrays:
        a.flags.writeable = writable
    for loss in LOSSES:
        for bias in (1.0, None):
            result = solve_dcd(*arrays, n_features=3, params=DcdParams(C=1.0, loss=loss, bias=bias, tol_rel=None))
            w_full = np.append(result.w, result.bias) if bias is not None else result.w
            primal_objective(*arrays, w_full, C_neg=1.0, C_pos=1.0, loss=loss, bias=bias)
"""
    missed = kernels_compiled_after_warm_up(
        ["worker.solvers.dcd", "worker.solvers.dcd_logistic", "worker.solvers.data_passes"],
        f"from worker.solvers.dcd import warm_up, warm_up_formulations; {warm_ups}",
        use,
    )
    assert missed == []


def test_read_only_and_strided_inputs_give_the_same_result(cancer):
    X, y = cancer
    indptr, indices, data = _csr(X)
    reference = solve_dcd(indptr, indices, data, y, n_features=X.shape[1], params=DcdParams(C=1.0, tol=1e-4))
    frozen = [a.copy() for a in (indptr, indices, data, y)]
    for a in frozen:
        a.flags.writeable = False
    strided_y = np.repeat(y, 2)[::2]  # a non-contiguous view
    for args in (frozen, [indptr, indices, data, strided_y]):
        result = solve_dcd(*args, n_features=X.shape[1], params=DcdParams(C=1.0, tol=1e-4))
        np.testing.assert_array_equal(result.w, reference.w)
        assert result.bias == reference.bias


def test_wide_data_is_solved_with_its_features_renumbered_by_frequency_to_the_same_model(monkeypatch):
    """Past feature_order.MIN_FEATURES dcd solves a copy whose features are numbered by frequency (the frequent
    entries of w share cache lines): the same passes, objective and w (in the data's numbering) as in the data's own
    numbering, LIBLINEAR's objective at a tight tol; without room for the copy (memory_bytes) it does without."""
    from worker.solvers import dcd as dcd_module
    from worker.solvers.feature_order import MIN_FEATURES

    rng = np.random.default_rng(7)
    n_rows, n_features = 3000, MIN_FEATURES + 50_000
    per_row = rng.integers(10, 40, size=n_rows)
    rows = np.repeat(np.arange(n_rows), per_row)
    cols = np.minimum(rng.zipf(1.3, size=rows.size) * 7919 % n_features, n_features - 1)  # frequent ones scattered
    X = sp.csr_matrix((rng.random(rows.size), (rows, cols)), shape=(n_rows, n_features))
    X.sum_duplicates()
    X.sort_indices()
    y = np.where(X @ rng.normal(size=n_features) + rng.normal(scale=0.5, size=n_rows) > 0, 1.0, -1.0)
    arrays = (X.indptr.astype(np.int64), X.indices.astype(np.int32), X.data)
    params = DcdParams(C=1.0, tol=1e-6, max_iter=10**5, trace_every=1)
    renumbered = solve_dcd(*arrays, y, n_features=n_features, params=params)
    assert renumbered.extra["features_renumbered"] and renumbered.converged
    no_room = solve_dcd(*arrays, y, n_features=n_features, params=params, memory_bytes=X.data.nbytes)
    monkeypatch.setattr(dcd_module, "MIN_FEATURES", 10**12)
    plain = solve_dcd(*arrays, y, n_features=n_features, params=params)
    assert not plain.extra["features_renumbered"] and not no_room.extra["features_renumbered"]
    assert renumbered.n_iter == plain.n_iter
    assert renumbered.objective == pytest.approx(plain.objective, rel=1e-9)
    np.testing.assert_allclose(renumbered.w, plain.w, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(no_room.w, plain.w, rtol=1e-12, atol=1e-15)
    _assert_matches_reference(renumbered.objective, X, y, C=1.0, loss="hinge", bias=1.0)


def test_one_vs_rest_problems_share_one_renumbered_copy(tmp_path):
    """The renumbered copy is made once for the arrays it comes from, whatever views of them a problem gets (the
    memory-mapped cache's arrays, read-only views), read-only, the same as a fresh one; other arrays get their own;
    it is dropped when its data goes."""
    import gc

    from worker.solvers import feature_order

    rng = np.random.default_rng(5)
    X = sp.random(200, 5000, density=0.01, format="csr", random_state=rng)
    X.sort_indices()
    for name, array in (("indptr", X.indptr.astype(np.int64)), ("indices", X.indices), ("data", X.data)):
        np.save(tmp_path / f"{name}.npy", array)
    mapped = [np.load(tmp_path / f"{name}.npy", mmap_mode="c") for name in ("indptr", "indices", "data")]
    first = feature_order.renumbered_once(*mapped, 5000)
    views = [a[:] for a in mapped]
    for view in views:
        view.setflags(write=False)
    assert feature_order.renumbered_once(*views, 5000) is first  # another problem on the same rows: no copy
    fresh = feature_order.renumbered(*mapped, 5000)
    for made, anew in zip(first, fresh, strict=True):
        np.testing.assert_array_equal(made, anew)
        assert not made.flags.writeable
    other = [a.copy() for a in mapped]
    assert feature_order.renumbered_once(*other, 5000) is not first  # other arrays (equal values): their own copy
    assert feature_order.renumbered_once(*other, 4999 + 1) is feature_order.renumbered_once(*other, 5000)
    del other
    gc.collect()
    assert feature_order._last == {}  # the data gone, its copy with it

"""cpa (Joachims 2006, Algorithm 1) and the reduced-problem QP shared by the cutting-plane solvers.

Oracles: scikit-learn's LinearSVC (LIBLINEAR's dual CD, hinge loss, regularized intercept through
intercept_scaling = B: the service's formulation) at tol 1e-8, and liblinear-official -s 3 -B.
Objectives are compared, not coefficients.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.preprocessing import StandardScaler

from core.schemas.solver_params import CpaParams, DcdParams
from tests import naive
from tests.helpers import liblinear_train, liblinear_w_full
from worker.solvers.common import SolverControl, SolverInputError, StopReason
from worker.solvers.cpa import solve_cpa, warm_up
from worker.solvers.dcd import solve_dcd
from worker.solvers.reduced_qp import ReducedProblem

pytestmark = pytest.mark.solver  # the kinds of tests: tests/conftest.py, TEST_KINDS

_csr = naive.csr_parts
_primal = naive.hinge_primal
_reference = naive.linear_svc_optimum


@pytest.fixture(scope="module", autouse=True)
def _compiled():
    warm_up()


@pytest.fixture(scope="module")
def cancer():
    X, labels = load_breast_cancer(return_X_y=True)
    return StandardScaler().fit_transform(X), np.where(labels == 1, 1.0, -1.0)


@pytest.fixture(scope="module")
def sparse_problem():
    """1,500 rows, 2,000 features, 5-25 nonzeros per row, labels of a planted w with 10% flipped."""
    rng = np.random.default_rng(2024)
    n, d = 1500, 2000
    counts = rng.integers(5, 26, size=n)
    rows = np.repeat(np.arange(n), counts)
    cols = rng.integers(0, d, size=rows.size)
    X = sp.csr_matrix((rng.normal(size=rows.size), (rows, cols)), shape=(n, d))
    X.sum_duplicates()
    y = np.where(X @ rng.normal(size=d) > 0, 1.0, -1.0)
    flip = rng.random(n) < 0.1
    y[flip] = -y[flip]
    return X, y


# ---------------------------------------------------------------------------------------------
# the reduced problem
# ---------------------------------------------------------------------------------------------


def _add_dense_cut(rp, Z, z, b):
    """Hand a dense cut to the reduced problem as its Gram row (what cut_store.DenseCuts does)."""
    row = np.array([float(z @ zk) for zk in Z]) if Z else np.zeros(0)
    rp.add_cut(row, float(z @ z), b, len(Z))
    Z.append(z)


def test_reduced_qp_gap_certificate_and_monotone_warm_start():
    rng = np.random.default_rng(0)
    d, C = 12, 3.0
    rp = ReducedProblem(C, capacity=2)
    Z, b = [], []
    previous = -np.inf
    for _ in range(25):
        z = rng.normal(size=d) * rng.uniform(0.1, 10)
        beta = float(rng.uniform(0, 5))
        _add_dense_cut(rp, Z, z, beta)
        b.append(beta)
        D, _, _ = rp.solve(1e-10)
        alpha = rp.alpha[: rp.t].copy()
        assert np.all(alpha >= 0) and alpha.sum() <= C * (1 + 1e-12)
        w = np.array(Z).T @ alpha
        np.testing.assert_allclose(rp.h_alpha[: rp.t], np.array(Z) @ w, rtol=1e-10, atol=1e-10)
        assert rp.sq_norm() == pytest.approx(float(w @ w), rel=1e-10, abs=1e-12)
        assert D == pytest.approx(naive.reduced_dual(Z, b, alpha), rel=1e-10, abs=1e-10)
        primal = naive.reduced_primal(Z, b, w, C)
        assert primal - D <= 1e-8 * max(1.0, abs(primal))  # certified optimum of the reduced problem
        assert D >= previous - 1e-12  # the lower bound never decreases
        previous = D


def test_reduced_qp_drop_inactive_keeps_dual_value():
    rng = np.random.default_rng(1)
    rp = ReducedProblem(1.0)
    Z = []
    for _ in range(8):
        _add_dense_cut(rp, Z, rng.normal(size=5), float(rng.uniform(0, 1)))
    # a cut that can never be active: huge z pointing away, b = 0
    _add_dense_cut(rp, Z, np.full(5, 100.0), 0.0)
    D, _, _ = rp.solve(1e-12)
    inactive_before = int(np.sum(rp.alpha[: rp.t] == 0.0))
    assert inactive_before >= 1
    for _ in range(3):
        rp.solve(1e-12)
    dropped = rp.drop_inactive(2)
    assert len(dropped) == inactive_before
    D2, _, _ = rp.solve(1e-12)
    assert D2 == pytest.approx(D, rel=1e-12)
    assert rp.t == 9 - len(dropped)
    assert sorted(rp.slot[: rp.t].tolist() + dropped.tolist()) == list(range(9))


# ---------------------------------------------------------------------------------------------
# classification against the oracles
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("C,B", [(1.0, 1.0), (0.05, 2.0), (10.0, None)])
def test_cpa_reaches_optimum_within_its_tolerance_on_breast_cancer(cancer, C, B):
    X, y = cancer
    best = _reference(X, y, C, B)
    tol = 1e-3
    res = solve_cpa(*_csr(X), y, n_features=X.shape[1], params=CpaParams(C=C, bias=B, tol_rel=0.0, tol=tol))
    assert res.converged and res.stop_reason is StopReason.CONVERGED
    assert res.objective == pytest.approx(_primal(X, y, res.w, res.bias, C, B), rel=1e-10)
    # guarantee of Algorithm 1 in service units: F(w) - F* <= C * n * tol
    assert best * (1 - 1e-6) <= res.objective <= best + 1.001 * C * len(y) * tol
    assert res.extra["lower_bound"] <= best * (1 + 1e-6)
    if B is None:
        assert res.bias == 0.0


def test_cpa_reaches_optimum_on_generated_sparse_problem(sparse_problem):
    X, y = sparse_problem
    C = 0.5
    best = _reference(X, y, C, 1.0)
    tol = 1e-4
    res = solve_cpa(
        X.indptr.astype(np.int64),
        X.indices.astype(np.int32),
        X.data,
        y,
        n_features=X.shape[1],
        params=CpaParams(C=C, tol_rel=0.0, tol=tol),
    )
    assert res.converged
    assert best * (1 - 1e-6) <= res.objective <= best + 1.001 * C * len(y) * tol
    assert res.objective == pytest.approx(_primal(X, y, res.w, res.bias, C, 1.0), rel=1e-10)


@pytest.fixture(scope="module")
def tall_problem():
    """3,000 rows, 12 features, 1-12 non-zeros a row, labels of a planted w with 10% flipped (dense cuts,
    listed passes; rows of different lengths, so that the listed rows' chunks change between passes)."""
    rng = np.random.default_rng(7)
    X = rng.normal(size=(3000, 12))
    X[rng.random(X.shape) < rng.random((3000, 1))] = 0.0
    X[np.arange(3000), rng.integers(0, 12, size=3000)] = rng.normal(size=3000)
    y = np.where(X @ rng.normal(size=12) + 0.3 > 0, 1.0, -1.0)
    flip = rng.random(3000) < 0.1
    y[flip] = -y[flip]
    return X, y


@pytest.mark.parametrize("threads", [1, 2])
def test_cpa_listed_passes_keep_the_certificate(tall_problem, threads, monkeypatch):
    """Cuts from the listed rows only are valid cuts: the lower bound stays below the optimum and the
    returned model is certified by a full pass. Two threads: the rows and the listed rows in many
    chunks (small chunks, and threads even for this small problem)."""
    X, y = tall_problem
    C = 1.0
    best = _reference(X, y, C, 1.0)
    one = solve_cpa(*_csr(X), y, n_features=X.shape[1], params=CpaParams(C=C, tol_rel=1e-5))
    res = one
    if threads == 2:
        monkeypatch.setattr("worker.solvers.data_passes.CHUNK_NNZ", 300)
        monkeypatch.setattr("worker.solvers.cut_data.PARALLEL_NNZ", 1000)
        res = solve_cpa(*_csr(X), y, n_features=X.shape[1], params=CpaParams(C=C, tol_rel=1e-5), n_processes=2)
        assert res.objective == pytest.approx(one.objective, rel=2e-5)
    listed = [p for p in res.trace if p["primal"] is None]
    assert listed and all(p["rows_computed"] < len(y) for p in listed)  # the mechanism ran
    assert res.extra["full_passes"] < res.n_iter
    assert res.converged and res.extra["gap_rel"] <= 1e-5
    assert res.objective == pytest.approx(_primal(X, y, res.w, res.bias, C, 1.0), rel=1e-10)
    assert best * (1 - 1e-7) <= res.objective <= best * (1 + 1e-5)
    assert res.extra["lower_bound"] <= best * (1 + 1e-7)
    lower = [p["lower_bound"] for p in res.trace]
    assert all(l2 >= l1 for l1, l2 in zip(lower, lower[1:]))


def test_cpa_listed_rows_within_the_radius_give_the_exact_cut(tall_problem, monkeypatch):
    """With every row listed, each listed pass is exact: the same cuts and iterates as full passes."""
    from worker.solvers import cpa

    X, y = tall_problem
    # reduced problems solved tightly: with the default (a tenth of the gap) one SMO step more or less,
    # decided by a rounding difference, sends the two runs on different paths
    monkeypatch.setattr(cpa, "QP_REL", 1e-9)
    monkeypatch.setattr(cpa, "LISTED_RUN", 0)  # full passes only: the paper's Algorithm 1
    full = solve_cpa(*_csr(X), y, n_features=X.shape[1], params=CpaParams(C=1.0, tol_rel=1e-6))
    monkeypatch.setattr(cpa, "LISTED_RUN", 50)
    monkeypatch.setattr(cpa, "LISTED_SHARE", 1.0)
    listed = solve_cpa(*_csr(X), y, n_features=X.shape[1], params=CpaParams(C=1.0, tol_rel=1e-6))
    assert full.extra["full_passes"] == full.n_iter
    assert listed.extra["full_passes"] == 1
    assert all(p["primal"] is not None for p in listed.trace)
    # the same iterates up to rounding (the loss is summed in another order)
    assert len(full.trace) > 30
    for p, q in zip(full.trace[:30], listed.trace[:30]):
        assert q["primal"] == pytest.approx(p["primal"], rel=1e-7)
        assert q["lower_bound"] == pytest.approx(p["lower_bound"], rel=1e-9)
    assert listed.objective == pytest.approx(full.objective, rel=2e-6)


def test_cpa_agrees_with_dcd(cancer):
    X, y = cancer
    ref = solve_dcd(
        *_csr(X), y, n_features=X.shape[1], params=DcdParams(C=1.0, loss="hinge", bias=1.0, tol=1e-6, max_iter=100000)
    )
    res = solve_cpa(*_csr(X), y, n_features=X.shape[1], params=CpaParams(C=1.0, bias=1.0, tol_rel=0.0, tol=1e-3))
    assert ref.objective * (1 - 1e-4) <= res.objective <= ref.objective + 1.0 * len(y) * 1e-3


LIBLINEAR_CONVERGES_AT = {"cancer": 0.05, "sparse_problem": 1.0}


@pytest.mark.parametrize("problem", ["cancer", "sparse_problem"])
def test_cpa_agrees_with_liblinear_official_at_tight_tolerance(problem, request):
    pytest.importorskip("liblinear.liblinearutil")
    X, y = request.getfixturevalue(problem)
    Xs = sp.csr_matrix(X)
    # liblinear-official stops its dual solver at 300 iterations whatever -e says (and its random
    # permutation depends on earlier calls in the process): use a C at which it converges.
    C = LIBLINEAR_CONVERGES_AT[problem]
    model, _converged = liblinear_train(X, y, f"-s 3 -c {C} -e 1e-6 -B 1 -q")
    w_full = liblinear_w_full(model, bias=1.0)
    ref = _primal(Xs, y, w_full[:-1], w_full[-1], C, 1.0)
    res = solve_cpa(
        Xs.indptr.astype(np.int64),
        Xs.indices.astype(np.int32),
        Xs.data,
        y,
        n_features=X.shape[1],
        params=CpaParams(C=C, bias=1.0, tol_rel=0.0, tol=1e-6),
    )
    assert abs(res.objective - ref) <= 1e-3 * ref


def test_cpa_tolerance_is_the_papers_training_loss_precision(cancer):
    """At the stop, the most violated constraint exceeds the working set's slack by <= tol per example."""
    X, y = cancer
    for tol in (1e-2, 1e-3):
        res = solve_cpa(*_csr(X), y, n_features=X.shape[1], params=CpaParams(C=1.0, tol_rel=0.0, tol=tol))
        last = res.trace[-1]
        assert last["violation"] <= tol
        # iterations that computed the outputs of the listed rows only know no most violated constraint
        exact = [p for p in res.trace[:-1] if p["violation"] is not None]
        assert exact and all(p["violation"] > tol for p in exact)


def test_cpa_explicit_zeros_change_nothing(cancer):
    X, y = cancer
    X = X.copy()
    X[np.abs(X) < 0.5] = 0.0
    a = solve_cpa(*_csr(X), y, n_features=X.shape[1], params=CpaParams(C=1.0, tol_rel=0.0, tol=1e-4))
    full = sp.csr_matrix(np.ones_like(X))  # every entry stored, row-major
    full.data[:] = X.ravel()  # ... including the zeros
    b = solve_cpa(
        full.indptr.astype(np.int64),
        full.indices.astype(np.int32),
        full.data,
        y,
        n_features=X.shape[1],
        params=CpaParams(C=1.0, tol_rel=0.0, tol=1e-4),
    )
    assert a.n_iter == b.n_iter
    assert b.objective == pytest.approx(a.objective, rel=1e-12)


# ---------------------------------------------------------------------------------------------
# control: max_iter, deadline, cancel; determinism; trace; input checks
# ---------------------------------------------------------------------------------------------


def test_cpa_max_iter_is_a_result(cancer):
    X, y = cancer
    res = solve_cpa(*_csr(X), y, n_features=X.shape[1], params=CpaParams(C=1.0, tol_rel=0.0, tol=1e-6, max_iter=3))
    assert not res.converged and res.stop_reason is StopReason.MAX_ITER
    assert res.n_iter == 3 and len(res.trace) == 3
    assert res.objective == pytest.approx(_primal(X, y, res.w, res.bias, 1.0, 1.0), rel=1e-10)
    assert res.objective == min(p["primal"] for p in res.trace)  # best iterate so far


def test_cpa_deadline_and_cancel_return_best_so_far(cancer):
    X, y = cancer
    res = solve_cpa(
        *_csr(X),
        y,
        n_features=X.shape[1],
        params=CpaParams(C=1.0, tol_rel=0.0, tol=1e-6),
        control=SolverControl(deadline=0.0),
    )
    assert res.stop_reason is StopReason.DEADLINE and res.n_iter == 1 and not res.converged
    calls = []

    def cancel():
        calls.append(1)
        return len(calls) >= 7

    control = SolverControl(cancel_requested=cancel)
    res = solve_cpa(*_csr(X), y, n_features=X.shape[1], params=CpaParams(C=1.0, tol_rel=0.0, tol=1e-6), control=control)
    # two looks an iteration (before its cut pass, at its end): the 7th is iteration 4's first, before
    # that iteration records its point
    assert res.stop_reason is StopReason.CANCELED and res.n_iter == 4
    assert res.objective == pytest.approx(_primal(X, y, res.w, res.bias, 1.0, 1.0), rel=1e-10)
    assert len(control.points) == 3


def test_cpa_deterministic_and_trace(cancer):
    X, y = cancer
    a = solve_cpa(*_csr(X), y, n_features=X.shape[1], params=CpaParams(C=1.0, tol_rel=0.0, tol=1e-4, seed=1))
    b = solve_cpa(*_csr(X), y, n_features=X.shape[1], params=CpaParams(C=1.0, tol_rel=0.0, tol=1e-4, seed=2))
    np.testing.assert_array_equal(a.w, b.w)
    assert a.bias == b.bias and a.n_iter == b.n_iter
    keys = {"iteration", "elapsed_s", "primal", "lower_bound", "gap", "n_cuts", "qp_s", "outputs_s", "cut_s"}
    assert keys <= set(a.trace[0])
    lower = [p["lower_bound"] for p in a.trace]
    assert all(l2 >= l1 for l1, l2 in zip(lower, lower[1:]))
    elapsed = [p["elapsed_s"] for p in a.trace]
    assert all(e2 >= e1 for e1, e2 in zip(elapsed, elapsed[1:]))
    assert a.solver_seconds >= elapsed[-1] - 1e-9


def test_cpa_on_digits_is_within_tolerance():
    X, labels = load_digits(return_X_y=True)
    X = X / 16.0
    y = np.where(labels >= 5, 1.0, -1.0)
    C = 0.1
    best = _reference(X, y, C, 1.0)
    res = solve_cpa(*_csr(X), y, n_features=X.shape[1], params=CpaParams(C=C, tol_rel=0.0, tol=1e-3))
    assert best * (1 - 1e-6) <= res.objective <= best + C * len(y) * 1e-3


def test_cpa_refuses_a_qid_for_classification():
    """qid is not a schema field: the solver checks it (the schema's fields are refused there:
    tests/test_params_contract.py)."""
    ip, ix, dt = _csr(np.eye(4))
    with pytest.raises(SolverInputError, match="qid is only used"):
        solve_cpa(ip, ix, dt, np.array([1.0, -1.0, 1.0, -1.0]), n_features=4, params=CpaParams(), qid=np.zeros(4))


def test_cpa_refuses_bad_labels_and_shapes():
    ip, ix, dt = _csr(np.eye(4))
    with pytest.raises(SolverInputError, match="-1, \\+1"):
        solve_cpa(ip, ix, dt, np.array([0.0, 1.0, 1.0, 0.0]), n_features=4, params=CpaParams(C=1.0))
    with pytest.raises(SolverInputError, match="one entry per row"):
        solve_cpa(ip, ix, dt, np.array([1.0, -1.0]), n_features=4, params=CpaParams(C=1.0))
    with pytest.raises(SolverInputError, match="CSR arrays"):
        solve_cpa(ip.astype(np.int32), ix, dt, np.array([1.0, -1.0, 1.0, -1.0]), n_features=4, params=CpaParams(C=1.0))

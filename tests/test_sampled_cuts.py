"""Sampled-cut cutting-plane kernel SVMs (Yu & Joachims 2008): accuracy against SMO, exactness, master QP."""

from __future__ import annotations

import time

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import minimize

from core.schemas.solver_params import SampledCutsParams, SmoParams
from core.scoring.kernel import KernelExpansion
from tests import naive
from tests.helpers import with_params
from worker.solvers.common import SolverControl, SolverInputError, StopReason
from worker.solvers.reduced_qp import reduced_dual_smo
from worker.solvers.sampled_cuts.master import ACTIVE_SET_OK, master_active_set, master_refactor
from worker.solvers.sampled_cuts.solve import solve_sampled_cuts
from worker.solvers.smo.solve import solve_smo

pytestmark = pytest.mark.solver  # the kinds of tests: tests/conftest.py, TEST_KINDS

_csr = naive.csr_parts


def disc(n_rows: int, seed: int):
    """Points in [-1, 1]^2, +1 inside the circle of radius 0.6, then jittered (sigma 0.05): ~4% Bayes error."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n_rows, 2))
    y = np.where(np.hypot(X[:, 0], X[:, 1]) < 0.6, 1.0, -1.0)
    return X + rng.normal(scale=0.05, size=X.shape), y


KERNEL = {"type": "rbf", "gamma": 2.0}


def _test_error(result, X, X_test, y_test):
    support = sp.csr_matrix(X)[result.extra["support_indices"]]
    model = KernelExpansion(
        support.indptr, support.indices, support.data, result.extra["dual_coef"], result.bias, KERNEL, n_features=2
    )
    decision = model.decision_function(*_csr(X_test))
    return 100.0 * float(np.mean(np.where(decision > 0, 1.0, -1.0) != y_test))


@pytest.fixture(scope="module")
def large():
    X, y = disc(20_000, 0)
    X_test, y_test = disc(10_000, 1)
    smo = solve_smo(*_csr(X), y, n_features=2, params=SmoParams(C=1.0, kernel=KERNEL))
    assert smo.converged
    return X, y, X_test, y_test, _test_error(smo, X, X_test, y_test)


@pytest.mark.parametrize("variant", ["linear", "constant", "subspace"])
def test_test_error_within_half_a_point_of_smo(large, variant):
    # paper 003, Table 1: with r = 400 both algorithms stay within ~0.5 points of the exact solver
    X, y, X_test, y_test, smo_error = large
    result = solve_sampled_cuts(
        *_csr(X), y, n_features=2, params=SampledCutsParams(C=1.0, kernel=KERNEL, variant=variant, sample_size=400)
    )
    assert result.converged and result.stop_reason == StopReason.CONVERGED
    error = _test_error(result, X, X_test, y_test)
    assert error <= smo_error + 0.5, (error, smo_error)
    assert result.extra["n_sv"] == result.extra["support_indices"].size > 0


@pytest.fixture(scope="module")
def small():
    X, y = disc(500, 2)
    K = naive.kernel_dense(X, X, KERNEL)
    coef, _ = naive.svc_no_threshold_dual(K, y, 1.0, B=1.0, n_sweeps=4000, tol=1e-10)
    optimum = naive.svc_primal_value(K + 1.0, y, coef, 0.0, np.ones(y.size))
    return X, y, K, optimum


def _primal_of(result, K, y, B=1.0):
    coef = np.zeros(y.size)
    coef[result.extra["support_indices"]] = result.extra["dual_coef"]
    assert result.bias == pytest.approx(B * B * coef.sum(), rel=1e-12, abs=1e-12)
    return naive.svc_primal_value(K + B * B, y, coef, 0.0, np.ones(y.size))


def test_linear_variant_reports_the_exact_primal_and_meets_its_stopping_rule(small):
    X, y, K, optimum = small
    control = SolverControl()
    result = solve_sampled_cuts(
        *_csr(X),
        y,
        n_features=2,
        params=SampledCutsParams(C=1.0, kernel=KERNEL, variant="linear", sample_size=200),
        control=control,
    )
    assert result.converged and not result.extra["objective_is_estimate"]
    assert result.objective == pytest.approx(_primal_of(result, K, y), rel=1e-9)
    assert result.objective >= optimum * (1 - 1e-9)
    last = control.points[-1]
    assert last["cut_value"] <= last["xi"] + 1e-3  # the exact cut is not violated by more than tol
    for key in ("iteration", "elapsed_s", "primal", "dual", "gap", "xi", "cut_value", "n_cuts", "basis_size"):
        assert key in last


@pytest.mark.parametrize("variant", ["linear", "constant"])
def test_large_samples_approach_the_exact_optimum(small, variant):
    X, y, K, optimum = small
    result = solve_sampled_cuts(
        *_csr(X),
        y,
        n_features=2,
        params=SampledCutsParams(C=1.0, kernel=KERNEL, variant=variant, sample_size=4000, seed=1),
    )
    primal = _primal_of(result, K, y)
    assert optimum * (1 - 1e-9) <= primal <= optimum * 1.025
    if variant == "constant":
        assert result.extra["objective_is_estimate"]


def test_without_bias_feature(small):
    X, y, K, _ = small
    result = solve_sampled_cuts(
        *_csr(X),
        y,
        n_features=2,
        params=SampledCutsParams(C=1.0, kernel=KERNEL, variant="linear", bias=None, sample_size=200),
    )
    assert result.bias == 0.0
    coef = np.zeros(y.size)
    coef[result.extra["support_indices"]] = result.extra["dual_coef"]
    assert result.objective == pytest.approx(naive.svc_primal_value(K, y, coef, 0.0, np.ones(y.size)), rel=1e-9)


def test_inactive_cuts_are_removed(small):
    X, y, _, _ = small
    result = solve_sampled_cuts(
        *_csr(X),
        y,
        n_features=2,
        params=SampledCutsParams(C=1.0, kernel=KERNEL, variant="linear", sample_size=100, max_inactive=1),
    )
    # after every master solve, a cut whose alpha is 0 is dropped at once
    assert np.all(result.extra["cut_alpha"] > 0)
    assert result.n_iter > result.extra["n_cuts"]


def test_same_seed_same_model(small):
    X, y, _, _ = small
    runs = [
        solve_sampled_cuts(
            *_csr(X),
            y,
            n_features=2,
            params=SampledCutsParams(C=1.0, kernel=KERNEL, variant=v, sample_size=150, seed=s),
        )
        for v, s in (("constant", 4), ("constant", 4), ("constant", 5))
    ]
    np.testing.assert_array_equal(runs[0].extra["support_indices"], runs[1].extra["support_indices"])
    np.testing.assert_array_equal(runs[0].extra["dual_coef"], runs[1].extra["dual_coef"])
    assert runs[0].n_iter == runs[1].n_iter
    assert not np.array_equal(runs[0].extra["support_indices"], runs[2].extra["support_indices"])


def test_master_qp_matches_a_generic_solver():
    """The master problem OP2 is solved by reduced_qp's SMO (shared with cpa and ocas)."""
    rng = np.random.default_rng(3)
    for t, C in ((1, 2.0), (6, 0.5), (12, 3.0), (12, 50.0)):
        Z = rng.normal(size=(t, 5))
        H = Z @ Z.T
        h = rng.uniform(0, 1, size=t)
        alpha = np.zeros(t)
        grad = np.zeros(t)
        _steps, value, _gap, xi = reduced_dual_smo(H, h, alpha, t, C, 1e-12, 1_000_000, grad)
        assert np.all(alpha >= 0) and alpha.sum() <= C * (1 + 1e-12)
        reference = minimize(
            lambda a, H=H, h=h: 0.5 * a @ H @ a - h @ a,
            np.full(t, C / (2 * t)),
            jac=lambda a, H=H, h=h: H @ a - h,
            bounds=[(0, None)] * t,
            constraints=[{"type": "ineq", "fun": lambda a, C=C: C - a.sum()}],
            method="SLSQP",
            options={"ftol": 1e-14, "maxiter": 1000},
        )
        assert value == pytest.approx(-reference.fun, rel=1e-7, abs=1e-10)
        assert value == pytest.approx(h @ alpha - 0.5 * alpha @ H @ alpha, rel=1e-12, abs=1e-12)
        # KKT: positive coordinates share the largest gradient, which is xi when the budget is used
        np.testing.assert_allclose(grad, h - H @ alpha, atol=1e-9)
        assert np.all(grad[alpha > 0] >= grad.max() - 1e-9)
        assert xi == pytest.approx(max(0.0, grad.max()), abs=1e-12)
        # a warm start from the optimum takes no step
        again = reduced_dual_smo(H, h, alpha, t, C, 1e-9, 1_000_000, grad)
        assert again[0] == 0


@pytest.mark.parametrize("rank, max_changes", [(40, 1000), (4, 1000), (40, 2)])
def test_active_set_master_matches_smo_along_added_cuts(rank, max_changes):
    """The active-set master, warm-started as in the solver (one cut added per solve, its factor kept and
    updated), reaches SMO's optimum at every step, also on a rank-deficient H; when it hands over (here:
    a budget of 2 changes per solve), SMO finishes from its alpha and the factor is rebuilt next time."""
    rng = np.random.default_rng(rank)
    cap, C = 40, 25.0
    Z = rng.normal(size=(cap, rank)) + 2.0  # nearly parallel cuts, as sampled cuts are
    H_all = Z @ Z.T
    h_all = rng.uniform(0.5, 1.5, size=cap)
    L = np.zeros((cap, cap))
    free = np.zeros(cap, dtype=np.int64)
    alpha = np.zeros(cap)
    grad = np.zeros(cap)
    n_free = 0
    handed_over = 0
    for t in range(1, cap + 1):
        H = np.zeros((cap, cap))
        H[:t, :t] = H_all[:t, :t]
        h = np.zeros(cap)
        h[:t] = h_all[:t]
        if n_free < 0:
            n_free = master_refactor(H, alpha, t, L, free)
        status = -1
        if n_free >= 0:
            status, n_free, _changes, value, gap, xi = master_active_set(
                H, h, alpha, t, C, 1e-10, L, free, n_free, max_changes, grad
            )
        if status != ACTIVE_SET_OK:
            handed_over += 1
            _steps, value, gap, xi = reduced_dual_smo(H, h, alpha, t, C, 1e-10, 1_000_000, grad)
            n_free = -1
        else:
            # the factor is that of H over the free set, which is the set of positive alphas
            assert sorted(free[:n_free]) == list(np.flatnonzero(alpha[:t] > 0))
            F = free[:n_free]
            np.testing.assert_allclose(
                L[:n_free, :n_free] @ L[:n_free, :n_free].T, H[np.ix_(F, F)], rtol=1e-8, atol=1e-8
            )
        reference = np.zeros(cap)
        ref_grad = np.zeros(cap)
        _steps, ref_value, _gap, ref_xi = reduced_dual_smo(H, h, reference, t, C, 1e-12, 10_000_000, ref_grad)
        assert np.all(alpha[:t] >= 0) and alpha[:t].sum() <= C * (1 + 1e-12)
        assert gap <= 1e-10
        assert value == pytest.approx(ref_value, rel=1e-10, abs=1e-10)
        assert value == pytest.approx(h[:t] @ alpha[:t] - 0.5 * alpha[:t] @ H[:t, :t] @ alpha[:t], rel=1e-10)
        assert xi == pytest.approx(ref_xi, rel=1e-6, abs=1e-9)
        np.testing.assert_allclose(grad[:t], h[:t] - H[:t, :t] @ alpha[:t], atol=1e-8)
    assert (handed_over > 0) == (max_changes == 2)


def test_stop_reasons(small):
    X, y, _, _ = small
    args = {"n_features": 2, "C": 1.0, "kernel": KERNEL, "sample_size": 50}
    capped = solve_sampled_cuts(*_csr(X), y, **with_params(SampledCutsParams, {"max_iter": 3, **args}))
    assert capped.stop_reason == StopReason.MAX_ITER and not capped.converged and capped.n_iter == 3
    late = solve_sampled_cuts(
        *_csr(X), y, control=SolverControl(deadline=time.monotonic() - 1), **with_params(SampledCutsParams, args)
    )
    assert late.stop_reason == StopReason.DEADLINE and late.n_iter == 1
    # the first cut's kernel row is interrupted: the model so far is w = 0, P(0) = C * N
    assert late.extra["n_sv"] == 0 and late.objective == pytest.approx(y.size)
    calls = {"n": 0}

    def cancel_soon() -> bool:
        calls["n"] += 1
        return calls["n"] > 2

    for variant in ("linear", "constant"):
        calls["n"] = 0
        canceled = solve_sampled_cuts(
            *_csr(X),
            y,
            control=SolverControl(cancel_requested=cancel_soon),
            **with_params(SampledCutsParams, {"variant": variant, **args}),
        )
        assert canceled.stop_reason == StopReason.CANCELED and not canceled.converged
        assert canceled.n_iter <= 3


@pytest.mark.parametrize(
    "change, word", [({"kernel": {"type": "rbf"}}, "gamma"), ({"y": np.array([1.0, 0.0, 1.0, -1.0])}, "labels")]
)
def test_bad_arguments_are_refused(change, word):
    """What the schema cannot know: labels, an unresolved gamma (the schema's fields are refused by the schema:
    tests/test_params_contract.py)."""
    indptr, indices, data = _csr(np.array([[1.0, 0], [0, 1.0], [1.0, 1.0], [0, 2.0]]))
    args = {"y": np.array([1.0, -1.0, 1.0, -1.0]), "n_features": 2, "C": 1.0, "kernel": KERNEL}
    args.update(change)
    y = args.pop("y")
    with pytest.raises(SolverInputError, match=word):
        solve_sampled_cuts(indptr, indices, data, y, **with_params(SampledCutsParams, args))


@pytest.mark.parametrize("variant", ["constant", "linear"])
def test_two_threads_give_the_very_same_model(small, monkeypatch, variant):
    """Kernel blocks split over 2 threads by target rows: every sum runs in the same order, same model."""
    import numba

    import worker.solvers.sampled_cuts.solve as module

    if numba.get_num_threads() < 2:
        pytest.skip("numba allows one thread here")
    monkeypatch.setattr(module, "PAR_MIN_VALUES", 1)
    X, y, _, _ = small
    runs = [
        solve_sampled_cuts(
            *_csr(X),
            y,
            n_features=2,
            params=SampledCutsParams(C=1.0, kernel=KERNEL, variant=variant, sample_size=60, seed=2),
            n_threads=threads,
        )
        for threads in (1, 2)
    ]
    assert runs[0].n_iter == runs[1].n_iter
    np.testing.assert_array_equal(runs[0].extra["support_indices"], runs[1].extra["support_indices"])
    np.testing.assert_array_equal(runs[0].extra["dual_coef"], runs[1].extra["dual_coef"])


@pytest.mark.parametrize("single", [True, False])
@pytest.mark.parametrize(
    "kernel", [KERNEL, {"type": "poly", "gamma": 0.5, "coef0": 1.0, "degree": 2}, {"type": "linear"}]
)
@pytest.mark.parametrize("n_features", [5, 3000, 60_000])  # dense copies of the targets up to 2^22 values
def test_decision_values_at_rows_match_a_dense_reference(single, kernel, n_features):
    """_sampled_cuts_f_at: sum_u coef_u (K(x_u, x_t) + shift) at the targets, float32 only for rbf with a dense
    copy (within 1e-6 of the sum of |terms|), float64 otherwise (1e-12)."""
    from worker.solvers.kernels import kernel_params, row_sq_norms
    from worker.solvers.sampled_cuts.blocks import Expansion, Kernel, Rows, Split, _sampled_cuts_f_at

    rng = np.random.default_rng(n_features)
    X = sp.random(300, n_features, density=min(1.0, 4.0 / n_features) if n_features > 5 else 1.0, random_state=1)
    X = sp.csr_matrix(X * 0.8)
    indptr, indices, data = _csr(X)
    indices = indices.astype(np.int32)
    sq = row_sq_norms(indptr, data)
    code, gamma, coef0, degree = kernel_params(kernel)
    kernel_spec = Kernel(np.int64(code), np.float64(gamma), np.float64(coef0), np.int64(degree), np.float64(1.0))
    rows = np.sort(rng.choice(300, 120, replace=False)).astype(np.int64)
    coef = rng.normal(size=rows.size) * 30.0
    targets = rng.choice(300, 77).astype(np.int64)
    out = np.empty(targets.size)
    X_rows = Rows(indptr, indices, data, sq, data.astype(np.float32), sq.astype(np.float32), n_features)
    _sampled_cuts_f_at(X_rows, kernel_spec, Expansion(rows, coef), targets, out, Split(1, 100_000), single)
    dense = X.toarray()
    K = naive.kernel_dense(dense[rows], dense[targets], kernel) + 1.0
    expected = coef @ K
    scale = np.abs(coef) @ np.abs(K)
    float32_used = single and kernel["type"] == "rbf" and n_features * targets.size <= 1 << 22
    np.testing.assert_array_less(np.abs(out - expected), (1e-6 if float32_used else 1e-12) * scale + 1e-300)


def test_subspace_on_every_row_is_the_exact_problem(small):
    # the span of all the rows holds the optimum (representer theorem): the restricted problem is the full one
    X, y, K, optimum = small
    result = solve_sampled_cuts(
        *_csr(X),
        y,
        n_features=2,
        params=SampledCutsParams(C=1.0, kernel=KERNEL, variant="subspace", sample_size=y.size, tol=1e-7),
    )
    assert result.converged and result.stop_reason == StopReason.CONVERGED
    assert result.extra["gap"] <= 1e-7 * y.size  # the certificate: tol * C * N
    # measured 1.8e-7 (the projected rows are float32)
    assert _primal_of(result, K, y) == pytest.approx(optimum, rel=1e-6)
    assert result.objective == pytest.approx(optimum, rel=1e-6)
    assert result.extra["n_sv"] == y.size and result.extra["variant"] == "subspace"


def test_subspace_stops_and_refuses_what_it_cannot_do(small):
    X, y, _, _ = small
    args = {"n_features": 2, "C": 1.0, "kernel": KERNEL, "variant": "subspace", "sample_size": 50}
    capped = solve_sampled_cuts(*_csr(X), y, **with_params(SampledCutsParams, {**args, "max_iter": 2, "tol": 1e-9}))
    assert capped.stop_reason == StopReason.MAX_ITER and capped.n_iter == 2 and capped.extra["gap"] > 0
    late = solve_sampled_cuts(
        *_csr(X), y, control=SolverControl(deadline=time.monotonic() - 1), **with_params(SampledCutsParams, args)
    )
    assert late.stop_reason == StopReason.DEADLINE and late.n_iter == 0  # stopped while projecting the rows
    with pytest.raises(SolverInputError, match="sample_size"):
        solve_sampled_cuts(*_csr(X), y, **with_params(SampledCutsParams, {**args, "sample_size": y.size + 1}))
    with pytest.raises(ValueError, match="pool_size, sampling: settings of the cutting-plane variants"):
        SampledCutsParams(variant="subspace", pool_size=100, sampling="uniform")


def test_subspace_refuses_projections_over_the_jobs_memory_before_allocating_them(small):
    """The projected rows (N x sample_size x 4 bytes) and the data must fit in what the job's training may hold
    (``memory_bytes``, from HINGE_JOB_MEMORY, which the registry gives sampled_cuts: its spec is memory_bound), not
    only in the machine's available memory; refused with the sizes and what to do, trained when they fit."""
    from worker.training.registry import fit

    X, y, _, _ = small
    params = SampledCutsParams(C=1.0, kernel=KERNEL, variant="subspace", sample_size=50)
    indptr, indices, data = _csr(X)
    needed = y.size * 50 * 4 + indices.nbytes + np.asarray(data, dtype=np.float64).nbytes
    common = dict(n_features=2, params=params, class_weight=(1.0, 1.0), control=SolverControl())
    with pytest.raises(SolverInputError, match=r"sample_size 50 x 4 bytes.*over the .* HINGE_JOB_MEMORY"):
        fit("sampled_cuts", indptr, indices, data, y, memory_bytes=needed - 1, **common)
    assert fit("sampled_cuts", indptr, indices, data, y, memory_bytes=needed, **common).extra["n_sv"] == 50

"""ocas (Franc & Sonnenburg 2008, Algorithm 1): oracle objectives, fewer iterations than cpa,
the exact line search of Appendix A (by selection), 1 vs 2 threads, and both forms of the cuts.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_breast_cancer, load_digits, load_wine
from sklearn.preprocessing import StandardScaler

from core.schemas.solver_params import CpaParams, DcdParams, OcasParams
from tests import naive
from tests.helpers import liblinear_train, liblinear_w_full, with_params
from worker.solvers import cut_data, cut_store, line_search
from worker.solvers.common import SolverControl, SolverInputError, StopReason
from worker.solvers.cpa import solve_cpa
from worker.solvers.dcd import solve_dcd
from worker.solvers.ocas import solve_ocas, warm_up

pytestmark = pytest.mark.solver  # the kinds of tests: tests/conftest.py, TEST_KINDS

_csr = naive.csr_parts
_primal = naive.hinge_primal
_reference = naive.linear_svc_optimum


@pytest.fixture(scope="module", autouse=True)
def _compiled():
    warm_up()


def _cancer():
    X, labels = load_breast_cancer(return_X_y=True)
    return StandardScaler().fit_transform(X), np.where(labels == 1, 1.0, -1.0)


def _sparse(n=1500, d=2000, seed=2024):
    rng = np.random.default_rng(seed)
    counts = rng.integers(5, 26, size=n)
    rows = np.repeat(np.arange(n), counts)
    cols = rng.integers(0, d, size=rows.size)
    X = sp.csr_matrix((rng.normal(size=rows.size), (rows, cols)), shape=(n, d))
    X.sum_duplicates()
    y = np.where(X @ rng.normal(size=d) > 0, 1.0, -1.0)
    flip = rng.random(n) < 0.1
    y[flip] = -y[flip]
    return X, y


def _digits():
    X, labels = load_digits(return_X_y=True)
    return X / 16.0, np.where(labels >= 5, 1.0, -1.0)


def _wine():
    X, labels = load_wine(return_X_y=True)
    return StandardScaler().fit_transform(X), np.where(labels == 0, 1.0, -1.0)


PROBLEMS = {"cancer": _cancer, "sparse": _sparse, "digits": _digits, "wine": _wine}


@pytest.fixture(scope="module")
def problems():
    return {name: make() for name, make in PROBLEMS.items()}


# ---------------------------------------------------------------------------------------------
# the line search of Appendix A
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(8))
def test_line_search_is_exact_and_independent_of_the_chunks(seed):
    rng = np.random.default_rng(seed)
    n = 200 if seed < 6 else 5000
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    o_b = rng.normal(size=n) * 2
    o_t = rng.normal(size=n) * 2
    if seed % 2:
        o_b = np.round(o_b, 1)  # ties among breakpoints and exact zeros of C_i
        o_t = np.round(o_t, 1)
    C = float(rng.uniform(0.1, 3))
    A0 = float(rng.uniform(0.5, 50))
    B0 = float(-rng.uniform(0, 100))
    Bi = C * y * (o_b - o_t)
    Ci = C * (1 - y * o_b)
    k_ref, G_ref = naive.line_search_min(A0, B0, Bi, Ci)

    def run(bounds, serial=True):
        chunks = np.array(bounds, dtype=np.int64)
        keys = np.zeros(n)
        wts = np.zeros(n)
        slope = np.zeros(len(bounds) - 1)
        counts = np.zeros(len(bounds) - 1, dtype=np.int64)
        line_search.prepare(y, o_b, o_t, C, chunks, slope, counts, keys, wts, serial)
        S = B0 + float(np.sum(slope))
        if S >= 0:
            return 0.0, S
        m = line_search.compact(chunks, counts, keys, wts)
        return line_search.minimize(keys, wts, m, A0, S), S

    k1, S1 = run([0, n])
    k3, S3 = run([0, 64, 136, n])
    k3p, _ = run([0, 64, 136, n], serial=False)
    assert k1 == k3 == k3p  # other chunks, threads or not: the very same answer

    def G(k):
        return 0.5 * A0 * k * k + B0 * k + float(np.maximum(0.0, k * Bi + Ci).sum())

    assert G(k1) <= G_ref + 1e-9 * max(1.0, abs(G_ref))
    assert k1 == pytest.approx(k_ref, rel=1e-7, abs=1e-9) or G(k1) == pytest.approx(G_ref, rel=1e-12)


def test_line_search_selection_agrees_with_the_sorted_sweep():
    """The O(m) selection and the O(m log m) sorted sweep (its fallback) find the same minimiser."""
    rng = np.random.default_rng(11)
    for trial in range(50):
        m = int(rng.integers(1, 400))
        keys = rng.exponential(size=m)
        if trial % 3 == 0:
            keys = np.round(keys, 1) + 0.1  # many equal breakpoints
        wts = rng.exponential(size=m)
        A0 = float(rng.uniform(0.01, 10))
        S = -float(rng.uniform(0.1, 1.5 * wts.sum() + 1))
        k_sel = line_search.minimize(keys.copy(), wts.copy(), m, A0, S)
        k_sort = line_search._sweep_sorted(keys.copy(), wts.copy(), 0, m, A0, S)
        assert k_sel == pytest.approx(k_sort, rel=1e-12, abs=1e-14)
        # the subdifferential of G at k* contains 0
        left = A0 * k_sel + S + wts[keys < k_sel].sum()
        right = left + wts[keys == k_sel].sum()
        assert left <= 1e-9 * (1 + abs(S)) and right >= -1e-9 * (1 + abs(S))


# ---------------------------------------------------------------------------------------------
# against the oracles
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("C,B", [(1.0, 1.0), (0.05, 2.0), (10.0, None)])
def test_ocas_reaches_optimum_within_tolerance_on_breast_cancer(problems, C, B):
    X, y = problems["cancer"]
    best = _reference(X, y, C, B)
    res = solve_ocas(*_csr(X), y, n_features=X.shape[1], params=OcasParams(C=C, bias=B, tol_rel=1e-3))
    assert res.converged and res.stop_reason is StopReason.CONVERGED
    assert res.objective == pytest.approx(_primal(X, y, res.w, res.bias, C, B), rel=1e-10)
    # stopping rule (9): certified within tol_rel of the optimum
    assert best * (1 - 1e-6) <= res.objective <= best * (1 + 1e-3)
    assert res.extra["lower_bound"] <= best * (1 + 1e-6)
    assert res.objective - res.extra["lower_bound"] <= 1e-3 * res.objective * (1 + 1e-9)


def test_ocas_reaches_optimum_on_generated_sparse_problem(problems):
    X, y = problems["sparse"]
    C = 0.5
    best = _reference(X, y, C, 1.0)
    res = solve_ocas(
        X.indptr.astype(np.int64),
        X.indices.astype(np.int32),
        X.data,
        y,
        n_features=X.shape[1],
        params=OcasParams(C=C, tol_rel=1e-3),
    )
    assert res.converged
    assert best * (1 - 1e-6) <= res.objective <= best * (1 + 1e-3)


def test_ocas_agrees_with_dcd(problems):
    X, y = problems["cancer"]
    ref = solve_dcd(
        *_csr(X), y, n_features=X.shape[1], params=DcdParams(C=1.0, loss="hinge", bias=1.0, tol=1e-6, max_iter=100000)
    )
    res = solve_ocas(*_csr(X), y, n_features=X.shape[1], params=OcasParams(C=1.0, bias=1.0, tol_rel=1e-3))
    assert ref.objective * (1 - 1e-4) <= res.objective <= ref.objective * (1 + 1e-3)


LIBLINEAR_CONVERGES_AT = {"cancer": 0.05, "sparse": 1.0}


@pytest.mark.parametrize("name", ["cancer", "sparse"])
def test_ocas_agrees_with_liblinear_official_at_tight_tolerance(problems, name):
    pytest.importorskip("liblinear.liblinearutil")
    X, y = problems[name]
    Xs = sp.csr_matrix(X)
    # liblinear-official stops its dual solver at 300 iterations whatever -e says (and its random
    # permutation depends on earlier calls in the process): use a C at which it converges.
    C = LIBLINEAR_CONVERGES_AT[name]
    model, _converged = liblinear_train(X, y, f"-s 3 -c {C} -e 1e-6 -B 1 -q")
    w_full = liblinear_w_full(model, bias=1.0)
    ref = _primal(Xs, y, w_full[:-1], w_full[-1], C, 1.0)
    res = solve_ocas(
        Xs.indptr.astype(np.int64),
        Xs.indices.astype(np.int32),
        Xs.data,
        y,
        n_features=X.shape[1],
        params=OcasParams(C=C, bias=1.0, tol_rel=1e-6),
    )
    assert abs(res.objective - ref) <= 1e-3 * ref


@pytest.mark.parametrize("name", list(PROBLEMS))
@pytest.mark.parametrize("eps_rel", [1e-2, 1e-4])
def test_ocas_needs_fewer_iterations_than_cpa(problems, name, eps_rel):
    """Paper 000's central claim: to the same absolute precision eps, OCAS stops in fewer iterations.

    Both rules read 'upper bound - lower bound <= eps': cpa's F(w_t) - F_W(w_t) <= C n tol with
    tol = eps / (C n), ocas's F(w_b) - D_t <= tol_abs = eps.
    """
    X, y = problems[name]
    C = 1.0
    eps = eps_rel * _reference(X, y, C, 1.0)
    args = _csr(X)
    cpa = solve_cpa(*args, y, n_features=X.shape[1], params=CpaParams(C=C, tol_rel=0.0, tol=eps / (C * len(y))))
    ocas = solve_ocas(*args, y, n_features=X.shape[1], params=OcasParams(C=C, tol_rel=0.0, tol_abs=eps))
    assert cpa.converged and ocas.converged
    assert ocas.n_iter < cpa.n_iter


# ---------------------------------------------------------------------------------------------
# threads and the two forms of the cuts
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["sparse", "cancer"])  # cuts as outputs (n <= d), dense cuts (n > d)
def test_one_and_two_threads_give_the_same_model(problems, name, monkeypatch):
    monkeypatch.setattr(cut_data, "PARALLEL_NNZ", 1)  # small problems get one thread otherwise
    X, y = problems[name]
    args = _csr(X)
    one = solve_ocas(*args, y, n_features=X.shape[1], params=OcasParams(C=1.0, tol_rel=1e-4), n_processes=1)
    two = solve_ocas(*args, y, n_features=X.shape[1], params=OcasParams(C=1.0, tol_rel=1e-4), n_processes=2)
    assert one.extra["threads"] == 1 and two.extra["threads"] == min(2, cut_store_cores())
    assert one.extra["cut_form"] == ("outputs" if name == "sparse" else "dense")
    assert two.n_iter == one.n_iter
    # chunked sums in a fixed order and scatters split by features: bit-identical, not only close
    np.testing.assert_array_equal(two.w, one.w)
    assert two.bias == one.bias and two.objective == one.objective


def cut_store_cores():
    from worker.solvers.data_passes import available_cores

    return available_cores()


def test_both_forms_of_the_cuts_follow_the_same_path(problems, monkeypatch):
    """Dense cuts and cuts kept as outputs are two bookkeepings of one algorithm: with the reduced
    problems solved precisely (a loose solve lets rounding pick other SMO paths), the same iterates
    up to rounding, on a problem where either form could be chosen. (To tol_rel 5e-4: about 300 iterations,
    2 s a form; the last hundred iterations to 1e-4 cost 10 s a form, as the reduced problem at 1e-12 grows.)"""
    X, y = problems["sparse"]
    args = _csr(X)
    monkeypatch.setattr("worker.solvers.ocas.QP_REL", 1e-12)
    runs = {}
    for form in (cut_store.DenseCuts, cut_store.OutputCuts):
        monkeypatch.setattr(
            cut_store, "choose", lambda data, C, coef_dtype=np.int8, risk_at_zero=None, form=form: form(data, C)
        )
        monkeypatch.setattr("worker.solvers.ocas.choose", cut_store.choose)
        runs[form.kind] = solve_ocas(*args, y, n_features=X.shape[1], params=OcasParams(C=1.0, tol_rel=5e-4))
    dense, outputs = runs["dense"], runs["outputs"]
    assert dense.extra["cut_form"] == "dense" and outputs.extra["cut_form"] == "outputs"
    for p, q in zip(dense.trace[:60], outputs.trace[:60]):
        assert q["primal"] == pytest.approx(p["primal"], rel=1e-9)
        assert q["lower_bound"] == pytest.approx(p["lower_bound"], rel=1e-9, abs=1e-9)
        assert q["step"] == pytest.approx(p["step"], rel=1e-6, abs=1e-12)
    assert abs(dense.n_iter - outputs.n_iter) <= 0.05 * dense.n_iter
    assert outputs.objective == pytest.approx(dense.objective, rel=1e-5)


def test_unsorted_rows_with_duplicates_and_two_threads(monkeypatch):
    """Rows not sorted by feature, repeated features in a row: the scatter adds them all, in order."""
    monkeypatch.setattr(cut_data, "PARALLEL_NNZ", 1)
    rng = np.random.default_rng(3)
    n, d = 700, 900  # more features than rows: cuts kept as outputs
    counts = rng.integers(3, 12, size=n)
    indptr = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    indices = rng.integers(0, d, size=indptr[-1]).astype(np.int32)  # unsorted, with repeats
    data = rng.normal(size=indptr[-1])
    X = sp.csr_matrix((data, indices, indptr), shape=(n, d))  # scipy sums the repeats when multiplying
    y = np.where(X @ rng.normal(size=d) + 0.3 * rng.normal(size=n) > 0, 1.0, -1.0)
    one = solve_ocas(indptr, indices, data, y, n_features=d, params=OcasParams(C=0.5, tol_rel=1e-5), n_processes=1)
    two = solve_ocas(indptr, indices, data, y, n_features=d, params=OcasParams(C=0.5, tol_rel=1e-5), n_processes=2)
    assert two.extra["threads"] == min(2, cut_store_cores())
    np.testing.assert_array_equal(two.w, one.w)
    assert two.objective == one.objective and two.n_iter == one.n_iter
    assert one.objective == pytest.approx(_primal(X, y, one.w, one.bias, 0.5, 1.0), rel=1e-10)
    best = _reference(X, y, 0.5, 1.0)
    assert best * (1 - 1e-6) <= one.objective <= best * (1 + 1e-5)


def test_float32_values_and_int64_indices(problems):
    """The service may store values as float32 and indices as int64: same problem, same answer."""
    X, y = problems["sparse"]
    X32 = X.astype(np.float32)
    indptr, indices, data = X32.indptr.astype(np.int64), X32.indices.astype(np.int64), X32.data
    res = solve_ocas(indptr, indices, data, y, n_features=X.shape[1], params=OcasParams(C=1.0, tol_rel=1e-4))
    X64 = X32.astype(np.float64)  # the problem the float32 values define
    best = _reference(X64, y, 1.0, 1.0)
    assert best * (1 - 1e-6) <= res.objective <= best * (1 + 1e-4)
    assert res.objective == pytest.approx(_primal(X64, y, res.w, res.bias, 1.0, 1.0), rel=1e-10)


# ---------------------------------------------------------------------------------------------
# control, warm start, trace, input checks
# ---------------------------------------------------------------------------------------------


def test_ocas_max_iter_deadline_cancel(problems):
    X, y = problems["cancer"]
    args = _csr(X)
    res = solve_ocas(*args, y, n_features=X.shape[1], params=OcasParams(C=1.0, tol_rel=1e-9, max_iter=4))
    assert res.stop_reason is StopReason.MAX_ITER and not res.converged and res.n_iter == 4
    assert res.objective == pytest.approx(_primal(X, y, res.w, res.bias, 1.0, 1.0), rel=1e-10)
    assert res.objective == pytest.approx(res.trace[-1]["primal"], rel=1e-10)  # best so far = w_b
    res = solve_ocas(
        *args, y, n_features=X.shape[1], params=OcasParams(C=1.0, tol_rel=1e-9), control=SolverControl(deadline=0.0)
    )
    assert res.stop_reason is StopReason.DEADLINE and res.n_iter == 1
    calls = []
    res = solve_ocas(
        *args,
        y,
        n_features=X.shape[1],
        params=OcasParams(C=1.0, tol_rel=1e-9),
        control=SolverControl(cancel_requested=lambda: calls.append(1) or len(calls) >= 7),
    )
    # three looks an iteration (after the outputs pass, after the update pass, at its end): the 7th is
    # the first of iteration 3
    assert res.stop_reason is StopReason.CANCELED and res.n_iter == 3


def test_ocas_trace_is_monotone_and_complete(problems):
    X, y = problems["digits"]
    res = solve_ocas(*_csr(X), y, n_features=X.shape[1], params=OcasParams(C=1.0, tol_rel=1e-4))
    primal = [p["primal"] for p in res.trace]
    lower = [p["lower_bound"] for p in res.trace]
    assert all(b <= a * (1 + 1e-12) for a, b in zip(primal, primal[1:]))  # F(w_b) never increases
    assert all(b >= a for a, b in zip(lower, lower[1:]))  # the lower bound never decreases
    for key in (
        "iteration",
        "elapsed_s",
        "gap",
        "gap_rel",
        "n_cuts",
        "step",
        "qp_s",
        "output_s",
        "line_search_s",
        "update_s",
        "cut_s",
    ):
        assert key in res.trace[0]
    assert set(res.extra["seconds"]) >= {"qp", "output", "line_search", "update", "cut"}
    assert res.extra["gap_rel"] == pytest.approx((res.objective - res.extra["lower_bound"]) / res.objective, rel=1e-12)


def test_ocas_warm_start_from_the_optimum(problems):
    X, y = problems["cancer"]
    cold = solve_ocas(*_csr(X), y, n_features=X.shape[1], params=OcasParams(C=1.0, tol_rel=1e-6))
    warm = solve_ocas(
        *_csr(X), y, n_features=X.shape[1], params=OcasParams(C=1.0, tol_rel=1e-3), w0=np.append(cold.w, cold.bias)
    )
    assert warm.objective <= cold.objective * (1 + 1e-12)
    assert warm.n_iter < cold.n_iter
    with pytest.raises(SolverInputError, match="w0 must be"):
        solve_ocas(*_csr(X), y, n_features=X.shape[1], params=OcasParams(C=1.0), w0=np.zeros(3))


def test_ocas_deterministic(problems):
    X, y = problems["wine"]
    a = solve_ocas(*_csr(X), y, n_features=X.shape[1], params=OcasParams(C=1.0, seed=0))
    b = solve_ocas(*_csr(X), y, n_features=X.shape[1], params=OcasParams(C=1.0, seed=9))
    np.testing.assert_array_equal(a.w, b.w)
    assert a.n_iter == b.n_iter and a.bias == b.bias


def test_ocas_refuses_a_bad_thread_count():
    """n_processes is the solver's keyword, not the schema's field (the schema's fields are refused there:
    tests/test_params_contract.py)."""
    ip, ix, dt = _csr(np.eye(4))
    with pytest.raises(SolverInputError, match="n_processes must be"):
        solve_ocas(ip, ix, dt, np.array([1.0, -1.0, 1.0, -1.0]), n_features=4, params=OcasParams(), n_processes=0)


@pytest.mark.parametrize("name", ["sparse", "cancer"])
def test_a_small_cut_budget_still_converges(problems, monkeypatch, name):
    """With room for only 4 stored cuts (memory budget), cuts with alpha = 0 are dropped before each new
    one: the lower bound stays monotone and the certified optimum is reached."""
    monkeypatch.setattr(cut_data, "MIN_CUTS", 4)
    monkeypatch.setattr(cut_data, "MEMORY_SHARE", 0.0)
    X, y = problems[name]
    res = solve_ocas(*_csr(X), y, n_features=X.shape[1], params=OcasParams(C=1.0, tol_rel=1e-3))
    lower = [p["lower_bound"] for p in res.trace]
    assert all(b >= a for a, b in zip(lower, lower[1:]))
    assert res.converged
    best = _reference(X, y, 1.0, 1.0)
    assert best * (1 - 1e-6) <= res.objective <= best * (1 + 1e-3)
    # cuts beyond the budget exist only while every stored cut is active
    assert all(p["n_cuts"] <= max(4, p["n_active_cuts"] + 1) for p in res.trace)


def test_small_problems_run_on_one_thread(problems):
    """Below PARALLEL_NNZ non-zeros per thread the parallel regions cost more than they save."""
    X, y = problems["sparse"]
    res = solve_ocas(*_csr(X), y, n_features=X.shape[1], params=OcasParams(C=1.0), n_processes=2)
    assert res.extra["threads"] == 1


# ---------------------------------------------------------------------------------------------
# the column copy for the cuts' outputs
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("value_dtype", [np.float64, np.float32])
@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
def test_column_gather_is_the_row_gather_bit_for_bit(value_dtype, index_dtype):
    """Sorted rows (with repeated features): the column-wise gather of a sparse z adds each row's
    products in the row's own order, so it returns the row-wise sums exactly; unsorted rows refuse."""
    from worker.solvers import data_passes as dp

    rng = np.random.default_rng(11)
    n, d = 300, 400
    counts = rng.integers(0, 30, size=n)
    indptr = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    indices = np.concatenate([np.sort(rng.integers(0, d, size=c)) for c in counts]).astype(index_dtype)
    data = rng.normal(size=indptr[-1]).astype(value_dtype)
    z = np.where(rng.random(d + 1) < 0.2, rng.normal(size=d + 1), 0.0)
    chunks = dp.row_chunks(indptr)
    rows = np.zeros(n)
    dp.gather_outputs(indptr, indices, data, z, 0.7, chunks, rows, True)
    col_counts = np.zeros(d + 1, dtype=np.int64)
    dp.column_counts(indices, d, col_counts)
    assert dp.column_cost(col_counts, z, d) == int(np.sum(col_counts[:d][z[:d] != 0.0]))
    colptr = np.zeros(d + 1, dtype=np.int64)
    col_rows = np.zeros(indptr[-1], dtype=np.int32)
    col_data = np.zeros(indptr[-1], dtype=value_dtype)
    assert dp.column_copy(indptr, indices, data, col_counts, d, colptr, col_rows, col_data)
    cols = np.zeros(n)
    dp.gather_columns(colptr, col_rows, col_data, z, d, 0.7, cols)
    np.testing.assert_array_equal(cols, rows)
    shuffled = indices.copy()
    first = int(np.argmax(counts >= 2))
    a, b = indptr[first], indptr[first] + 1
    shuffled[a], shuffled[b] = 5 * d // 4 % d, 0  # a row out of order
    assert not dp.column_copy(indptr, shuffled, data, col_counts, d, colptr, col_rows, col_data)


@pytest.mark.parametrize("solver", ["ocas", "cpa"])
def test_the_column_copy_changes_no_iterate(problems, monkeypatch, solver):
    """With the column copy built at once (it is otherwise built only on long runs), the cuts' outputs
    come from it, and the model is the one of the row-wise passes bit for bit."""
    from worker.solvers import data_passes as dp

    X, y = problems["sparse"]
    args = _csr(X)
    solve, schema = (solve_ocas, OcasParams) if solver == "ocas" else (solve_cpa, CpaParams)

    def fit(*args, **keywords):
        return solve(*args, **with_params(schema, keywords))

    monkeypatch.setattr(cut_data, "COLUMNS_MAX_NNZ", 0)
    rows = fit(*args, y, n_features=X.shape[1], C=1.0, tol_rel=1e-4)
    used = []

    def counting(*a):
        used.append(1)
        return dp.gather_columns(*a)

    monkeypatch.setattr(cut_data, "COLUMNS_MAX_NNZ", 10**9)
    monkeypatch.setattr(cut_data, "COLUMNS_WAIT", 1)
    monkeypatch.setattr(cut_data, "COLUMNS_BUILD", 0.0)
    monkeypatch.setattr(cut_data, "COLUMNS_ENTRY", 0.0)  # always the columns once built
    monkeypatch.setattr(cut_data, "gather_columns", counting)
    cols = fit(*args, y, n_features=X.shape[1], C=1.0, tol_rel=1e-4)
    assert rows.extra["cut_form"] == cols.extra["cut_form"] == "outputs"
    assert len(used) >= cols.n_iter - 3
    assert cols.n_iter == rows.n_iter
    np.testing.assert_array_equal(cols.w, rows.w)
    assert cols.bias == rows.bias and cols.objective == rows.objective


@pytest.mark.parametrize("solver", ["ocas", "cpa"])
@pytest.mark.parametrize("name", ["sparse", "cancer"])  # cuts as outputs, dense cuts
def test_16_bit_indices_change_no_iterate(problems, monkeypatch, solver, name):
    """Data with few features is read through a 16-bit copy of its indices: the same model bit for bit,
    and the cut budget still counts the caller's arrays."""
    X, y = problems[name]
    args = _csr(X)
    solve, schema = (solve_ocas, OcasParams) if solver == "ocas" else (solve_cpa, CpaParams)

    def fit(*args, **keywords):
        return solve(*args, **with_params(schema, keywords))

    narrow = cut_data.prepare_data(*args, X.shape[1], 1.0, 1)
    assert narrow.indices.dtype == np.uint16 and narrow.index_bytes == args[1].itemsize
    monkeypatch.setattr(cut_data, "NARROW_MAX_D", 0)
    assert cut_data.prepare_data(*args, X.shape[1], 1.0, 1).indices.dtype == args[1].dtype
    wide = fit(*args, y, n_features=X.shape[1], C=1.0, tol_rel=1e-4)
    monkeypatch.undo()
    short = fit(*args, y, n_features=X.shape[1], C=1.0, tol_rel=1e-4)
    assert short.n_iter == wide.n_iter
    np.testing.assert_array_equal(short.w, wide.w)
    assert short.bias == wide.bias and short.objective == wide.objective

"""The atomics that threads share inside numba kernels, and smo's row team built on them."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import scipy.sparse as sp
from numba import njit

from core.schemas.solver_params import SmoParams
from tests.helpers import with_params
from worker.solvers.atomics import array_at, compare_and_swap, fetch_add, load_acquire, nap_ns, store_release, yield_cpu
from worker.solvers.common import SolverControl, StopReason
from worker.solvers.kernels import KERNEL_RBF, row_sq_norms
from worker.solvers.smo import run as smo_module
from worker.solvers.smo.rows import KernelParams, _row_chunk, position_copies
from worker.solvers.smo.scans import axpy_chunk, update_g_chunk
from worker.solvers.smo.solve import solve_smo
from worker.solvers.smo.state import IS_SIZE, IS_TEAM_MIN_ROW, T_PARTNERS, T_QUIT
from worker.solvers.smo.team import RowTeam, axpy, kernel_row, update_gradient


@njit(nogil=True)
def _count_up(counter, times):
    for _ in range(times):
        fetch_add(counter, 0, 1)


@njit(nogil=True)
def _claim_up(counter, times, wins):
    """Increment slot 0 by compare-and-swap, retrying on a lost race; count the wins in wins[0]."""
    for _ in range(times):
        while True:
            seen = load_acquire(counter, 0)
            if compare_and_swap(counter, 0, seen, seen + 1):
                wins[0] += 1
                break
            yield_cpu()


def test_fetch_add_and_compare_and_swap_lose_no_update_between_threads():
    counter = np.zeros(8, dtype=np.int64)
    threads = [threading.Thread(target=_count_up, args=(counter, 200_000)) for _ in range(3)]
    for thread in threads:
        thread.start()
    _count_up(counter, 200_000)
    for thread in threads:
        thread.join()
    assert counter[0] == 800_000

    counter[:] = 0
    wins = [np.zeros(1, dtype=np.int64) for _ in range(3)]
    threads = [threading.Thread(target=_claim_up, args=(counter, 100_000, w)) for w in wins]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert counter[0] == 300_000 and [int(w[0]) for w in wins] == [100_000] * 3


@njit
def _store_then_load(slots, value):
    store_release(slots, 3, value)
    return load_acquire(slots, 3), compare_and_swap(slots, 3, value + 1, 0), compare_and_swap(slots, 3, value, 7)


def test_store_load_and_a_failed_compare_and_swap():
    slots = np.zeros(4, dtype=np.int64)
    seen, failed, won = _store_then_load(slots, 41)
    assert (seen, failed, won) == (41, False, True) and slots[3] == 7


@njit
def _write_through(address, length, like, value):
    view = array_at(address, length, like)
    for i in range(view.size):
        view[i] = value + i
    nap_ns(1000)
    return view.size


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_array_at_is_a_view_of_the_memory_at_that_address(dtype):
    target = np.zeros(6, dtype=dtype)
    assert _write_through(target.ctypes.data + target.itemsize, 4, np.empty(0, dtype=dtype), 2.0) == 4
    np.testing.assert_array_equal(target, np.array([0, 2, 3, 4, 5, 0], dtype=dtype))


def test_atomics_refuse_anything_but_int64_slots():
    from numba.core.errors import TypingError

    with pytest.raises((TypeError, TypingError), match="int64"):
        njit(lambda a: load_acquire(a, 0))(np.zeros(2))


def _position_rows(n=3000, dense=True, seed=0):
    rng = np.random.default_rng(seed)
    matrix = sp.random(n, 6, density=0.6, random_state=seed, format="csr")
    indptr, indices, data = matrix.indptr.astype(np.int64), matrix.indices.astype(np.int32), matrix.data
    y = np.where(rng.random(n) < 0.5, 1.0, -1.0)
    X = position_copies(indptr, indices, data, row_sq_norms(indptr, data), y, 6, 1, dense)
    from worker.solvers.smo.rows import OriginalRows, reorder

    reorder(OriginalRows(indptr, indices, data, row_sq_norms(indptr, data), np.arange(n, dtype=np.int64)), X)
    kp = KernelParams(np.int64(KERNEL_RBF), np.float64(0.7), np.float64(0.0), np.int64(3))
    return X, kp


@pytest.mark.parametrize("dense", [True, False], ids=["dense_rows", "columns"])
@pytest.mark.parametrize("partners", [1, 3])
def test_rows_split_over_the_team_are_the_rows_of_one_thread(dense, partners):
    """Stored (float32, the cache) and accumulated (float64, gradients) rows, bit for bit, any partners."""
    X, kp = _position_rows(dense=dense)
    istate = np.zeros(IS_SIZE, dtype=np.int64)
    istate[IS_TEAM_MIN_ROW] = 16
    alone32, alone64 = np.zeros(3100, dtype=np.float32), np.full(3000, 0.5)
    for p in (0, 17, 2999):
        _row_chunk(p, 5, 2990, X, kp, alone32, 100, 0.0, False)
        _row_chunk(p, 0, 3000, X, kp, alone64, 0, -0.3, True)
    team = RowTeam(X, kp, partners)
    try:
        assert all(thread.is_alive() for thread in team.threads)
        split32, split64 = np.zeros(3100, dtype=np.float32), np.full(3000, 0.5)
        for _ in range(50):  # many hand-overs: any interleaving must give the same values
            split32[:] = 0.0
            split64[:] = 0.5
            for p in (0, 17, 2999):
                kernel_row(p, 5, 2990, X, kp, split32, 100, 0.0, False, istate)
                kernel_row(p, 0, 3000, X, kp, split64, 0, -0.3, True, istate)
            np.testing.assert_array_equal(split32, alone32)
            np.testing.assert_array_equal(split64, alone64)
    finally:
        team.stop()
    assert team.threads == [] and X.team[T_PARTNERS] == 0 and X.team[T_QUIT] == 1


@pytest.mark.parametrize("partners", [1, 3])
def test_gradient_updates_split_over_the_team_are_the_one_thread_updates(partners):
    """G += di Q_i + dj Q_j and G_bar += a Q_p from the float32 cache pool, bit for bit, any partners."""
    X, kp = _position_rows()
    istate = np.zeros(IS_SIZE, dtype=np.int64)
    istate[IS_TEAM_MIN_ROW] = 16
    rng = np.random.default_rng(5)
    pool = rng.normal(size=3 * 3000).astype(np.float32)
    G0 = rng.normal(size=3000)
    alone_g, alone_bar = G0.copy(), G0.copy()
    for k in range(20):
        update_g_chunk(alone_g, pool, 3000, 6000, 0.1 * k - 0.7, 1.3 - 0.05 * k, 0, 2950)
        axpy_chunk(alone_bar, 0.3 * k - 2.0, pool, 3000 * (k % 3), 7, 3000)
    team = RowTeam(X, kp, partners)
    try:
        split_g, split_bar = G0.copy(), G0.copy()
        for k in range(20):
            update_gradient(split_g, pool, 3000, 6000, 0.1 * k - 0.7, 1.3 - 0.05 * k, 2950, X, istate)
            axpy(split_bar, 0.3 * k - 2.0, pool, 3000 * (k % 3), 7, 3000, X, istate)
    finally:
        team.stop()
    np.testing.assert_array_equal(split_g, alone_g)
    np.testing.assert_array_equal(split_bar, alone_bar)
    assert not np.array_equal(split_g, G0) and not np.array_equal(split_bar, G0)


def _ring(n=4000, seed=1):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, 3))
    y = np.where(np.hypot(X[:, 0], X[:, 1]) < 0.6, 1.0, -1.0)
    matrix = sp.csr_matrix(X)
    return matrix.indptr.astype(np.int64), matrix.indices.astype(np.int32), matrix.data, y


def _partner_threads():
    return [t for t in threading.enumerate() if t.name.startswith("smo-row-partner")]


def test_a_solve_leaves_no_partner_thread_behind_however_it_ends(monkeypatch):
    import numba

    if numba.get_num_threads() < 2:
        pytest.skip("numba allows one thread here")
    monkeypatch.setattr(smo_module, "TEAM_MIN_ROW", 64)
    args = {"n_features": 3, "C": 10.0, "kernel": {"type": "rbf", "gamma": 2.0}, "n_threads": 2}
    done = solve_smo(*_ring(), **with_params(SmoParams, args))
    assert done.converged and _partner_threads() == []

    cancelled = solve_smo(
        *_ring(), control=SolverControl(cancel_requested=lambda: True), **with_params(SmoParams, args)
    )
    assert cancelled.stop_reason == StopReason.CANCELED and _partner_threads() == []

    def explode(point):
        raise RuntimeError("trace sink failed")

    with pytest.raises(RuntimeError, match="trace sink failed"):
        solve_smo(
            *_ring(), control=SolverControl(on_point=explode), **with_params(SmoParams, {**args, "trace_every": 5})
        )
    assert _partner_threads() == []


def test_a_solve_follows_its_share_of_the_cores_and_still_gives_the_one_thread_model(monkeypatch):
    """The job's share of the cores (worker.runtime.core_budget) drops to 1 and comes back between slices: the team
    stops and resumes splitting rows, numba's threads follow, and the model is the one thread's, bit for bit."""
    import numba

    if numba.get_num_threads() < 2:
        pytest.skip("numba allows one thread here")
    monkeypatch.setattr(smo_module, "TEAM_MIN_ROW", 64)
    monkeypatch.setattr(smo_module, "SLICE_SECONDS", 1e-4)  # many slices, so the share changes often
    args = {"n_features": 3, "C": 10.0, "kernel": {"type": "rbf", "gamma": 2.0}, "seed": 3}
    alone = solve_smo(*_ring(), n_threads=1, **with_params(SmoParams, args))
    asked: list = []
    limits: list[int] = []

    def share(in_use):
        asked.append(in_use)
        return 1 if len(asked) % 3 == 0 else 2

    control = SolverControl(cores=share)
    original_limit = RowTeam.limit

    def limit(self, threads):
        limits.append(threads)
        original_limit(self, threads)
        assert self.team[T_PARTNERS] == threads - 1

    monkeypatch.setattr(RowTeam, "limit", limit)
    before = numba.get_num_threads()
    followed = solve_smo(*_ring(), n_threads=2, control=control, **with_params(SmoParams, args))
    assert len(asked) >= 6, "the solve asked for its share between slices"
    assert asked[0] is None and set(asked[1:]) <= {1, 2}, "then it said what it used"
    assert {1, 2} <= set(limits), "the team shrank and grew again"
    np.testing.assert_array_equal(followed.extra["dual_coef"], alone.extra["dual_coef"])
    assert followed.objective == alone.objective
    assert _partner_threads() == []
    numba.set_num_threads(before)

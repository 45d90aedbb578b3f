"""One run of smo (``solve.solve_smo``): the checks of a warm start, the run's arrays and clocks, and the
Python side of its loop (slices of numba work between control checks, trace points, gradient rebuilds). The
math and the names are in ``worker.solvers.smo.solve``'s docstring.
"""

from __future__ import annotations

import time

import numpy as np

from worker.solvers.common import SolverControl, SolverInputError, StopReason, rng_state
from worker.solvers.kernels import KERNEL_PRECOMPUTED, kernel_diagonal, precomputed_serials, row_sq_norms
from worker.solvers.smo.cache import new_row_cache, reslot
from worker.solvers.smo.rows import KernelParams, OriginalRows, position_copies, reorder
from worker.solvers.smo.state import (
    FREE,
    FS_F,
    FS_SIZE,
    IS_ACTIVE,
    IS_COMPUTED,
    IS_EXAMINE_ALL,
    IS_FREE_TOP,
    IS_HITS,
    IS_ITER,
    IS_LRU_HEAD,
    IS_LRU_TAIL,
    IS_MIN_ACTIVE,
    IS_MISSES,
    IS_N_SLOTS,
    IS_NU,
    IS_NUM_CHANGED,
    IS_PAR_MIN_SCAN,
    IS_PASS_POS,
    IS_RECONSTRUCTED,
    IS_SHRINK_COUNTER,
    IS_SIZE,
    IS_SLOT_LEN,
    IS_TEAM_MIN_ROW,
    IS_THREADS,
    NU_NONE,
    NU_SVR,
)
from worker.solvers.smo.steps import Variables, rebuild_gradient, run_platt, run_second_order, start_from, stats
from worker.solvers.smo.team import TEAM_MIN_ROW, RowTeam, inactive_gradient

SLICE_SECONDS = 0.1
FINAL_REBUILD_VALUES = 20_000_000  # kernel values a stop may still spend to report the primal
# a transposed dense copy of the rows serves the dot products when it takes at most this many bytes
# and at least this fraction of its entries are stored (else the columns, CSC, do)
_DENSE_T_MAX_BYTES = 256 << 20
_DENSE_T_MIN_FILL = 0.05
# below this length a scan runs on one thread: a parallel region of numba's workqueue
# layer costs tens of microseconds on an idle machine and milliseconds on a busy one, so only passes of
# about 1 ms and more are split. Read at each solve (istate), as smo.team's TEAM_MIN_ROW, so that tests
# can lower them.
PAR_MIN_SCAN = 262144
PRIMAL_EVERY_S = 2.0  # while shrunk, trace points carry the primal at most this often (see _Run.record)


def check_start(alpha0, y, C: float, w_neg: float, w_pos: float, on_plane: bool = True) -> np.ndarray:
    """``alpha0`` as float64, checked: one finite value per row, in the box [0, C_i] up to rounding, and (``on_plane``)
    on the plane sum_i y_i alpha_i = 0 (the steps keep it; they cannot restore it; a one-class start sums to nu n)."""
    start = np.asarray(alpha0, dtype=np.float64)
    if start.shape != y.shape:
        raise SolverInputError(f"alpha0 must have one value per row, shape {y.shape}, got {start.shape}")
    if not np.all(np.isfinite(start)):
        raise SolverInputError("alpha0 contains NaN or infinite values")
    box = np.where(y > 0, C * w_pos, C * w_neg)
    slack = 1e-9 * box
    if np.any(start < -slack) or np.any(start > box + slack):
        raise SolverInputError("alpha0 must lie in [0, C * class_weight] for every row")
    scale = max(float(np.abs(start).sum()), 1.0)
    if on_plane and abs(float(y @ start)) > 1e-9 * scale:
        raise SolverInputError(
            f"alpha0 must satisfy sum_i y_i alpha0_i = 0 (the dual's equality constraint), got {float(y @ start):.3g}"
        )
    return start


def check_given(name: str, value, alpha0, y) -> np.ndarray | None:
    """A given G or G_bar of ``alpha0``, as float64, checked (one finite value per row)."""
    if value is None:
        return None
    if alpha0 is None:
        raise SolverInputError(f"{name} belongs to alpha0: give alpha0 with it")
    value = np.asarray(value, dtype=np.float64)
    if value.shape != y.shape or not np.all(np.isfinite(value)):
        raise SolverInputError(f"{name} must have one finite value per row, shape {y.shape}")
    return value


def next_budget(budget: int, took: float) -> int:
    """The work budget of the next slice, so that a slice takes about SLICE_SECONDS (``took``: the last one's)."""
    return int(min(max(budget * min(4.0, SLICE_SECONDS / max(took, 1e-4)), 10_000), 5e9))


class Run:
    """One solve's arrays and clocks, and the Python side of its loop: slices of numba work between control
    checks, trace points, gradient rebuilds."""

    def __init__(
        self,
        indptr,
        indices,
        data,
        y,
        n_features: int,
        C: float,
        w_neg: float,
        w_pos: float,
        kp,
        cache_mb: float,
        threads: int,
        seed: int,
        control: SolverControl,
        alpha0: np.ndarray | None = None,
        gradient0: np.ndarray | None = None,
        gradient_bar0: np.ndarray | None = None,
        linear_term: np.ndarray | None = None,
        epsilon: float = -1.0,
        offset_weight: float = 0.0,
        nu: int = NU_NONE,
    ):
        """``linear_term``: p of f = 0.5 alpha' Q alpha + p' alpha per row (None: -1, the C-SVC); ``epsilon`` >= 0:
        the problem is the doubled epsilon-SVR (``smo.svr``), whose losses the primal sums; ``offset_weight``: the
        primal's term in b (the one-class SVM's nu * n, ``smo.one_class``: its primal has -nu n rho = nu n b), or
        with ``nu`` (NU_SVC, NU_SVR: ``smo.nu``'s working set) the primal's -weight * rho (nu n, C nu n)."""
        self.control = control
        self.epsilon = float(epsilon)
        self.offset_weight = float(offset_weight)
        self.nu = int(nu)
        self.started = time.perf_counter()
        self.trace_seconds = 0.0
        self.primal_next = 0.0  # when a trace point may next carry the primal while shrunk
        n = self.n = y.size
        code, gamma, coef0, degree = kp
        self.kp = KernelParams(np.int64(code), np.float64(gamma), np.float64(coef0), np.int64(degree))
        sq = row_sq_norms(indptr, data) if code != KERNEL_PRECOMPUTED else np.zeros(y.size)  # rbf's only
        self.yp = y.copy()  # labels in position order (the solver swaps positions when it shrinks)
        P = -np.ones(n) if linear_term is None else np.array(linear_term, dtype=np.float64)
        serial = None
        if code == KERNEL_PRECOMPUTED:  # rows gathered from the data (smo.rows), on one thread
            serial, diagonal = precomputed_serials(indptr, indices, data, n_features)
            threads = 1
        else:
            diagonal = kernel_diagonal(indptr, indices, data, sq, code, gamma, coef0, degree)
        self.V = Variables(
            np.zeros(n),
            P.copy(),
            np.zeros(n),
            np.where(self.yp > 0, C * w_pos, C * w_neg),
            diagonal,
            np.zeros(n, dtype=np.int8),
            P,
        )
        dense = n_features * n * 8 <= _DENSE_T_MAX_BYTES and data.size >= _DENSE_T_MIN_FILL * n * n_features
        dense = dense and serial is None
        self.X = position_copies(indptr, indices, data, sq, self.yp, n_features, threads, dense, serial)
        self.orig = OriginalRows(indptr, indices, data, sq, np.arange(n, dtype=np.int64))
        reorder(self.orig, self.X)
        self.budget = int(cache_mb * (1 << 20) / 4)
        self.ca, n_slots = new_row_cache(n, self.budget)
        istate = self.istate = np.zeros(IS_SIZE, dtype=np.int64)
        istate[IS_ACTIVE] = n
        istate[IS_MIN_ACTIVE] = n
        istate[IS_SLOT_LEN] = n
        istate[IS_N_SLOTS] = n_slots
        istate[IS_LRU_HEAD] = -1
        istate[IS_LRU_TAIL] = -1
        istate[IS_FREE_TOP] = n_slots
        istate[IS_SHRINK_COUNTER] = min(n, 1000)
        istate[IS_EXAMINE_ALL] = 1
        istate[IS_THREADS] = threads
        istate[IS_TEAM_MIN_ROW] = TEAM_MIN_ROW
        istate[IS_PAR_MIN_SCAN] = PAR_MIN_SCAN
        istate[IS_NU] = self.nu
        self.fstate = np.zeros(FS_SIZE)
        if alpha0 is not None:
            none = np.empty(0)  # computed from the kernel rows
            g = gradient0 if gradient0 is not None else none
            g_bar = gradient_bar0 if gradient_bar0 is not None else none
            self.fstate[FS_F] = start_from(alpha0, g, g_bar, self.X, self.kp, self.V, istate, n)
        self.swap_p = np.empty(n, dtype=np.int64)
        self.swap_q = np.empty(n, dtype=np.int64)
        self.rng = rng_state(int(seed))
        # long kernel rows are split over threads that spin between rows (started last: nothing above can fail);
        # no row of a problem under TEAM_MIN_ROW is split, and idle partners would still take a core from the
        # other processes of a search (digits' one-vs-one pairs: 240 rows, a search ran slower on 2 processes)
        self.team = RowTeam(self.X, self.kp, threads - 1) if threads > 1 and n >= TEAM_MIN_ROW else None

    def close(self) -> None:
        """Stop the row team's threads (the solve is over, however it ended)."""
        if self.team is not None:
            self.team.stop()

    def run_slice(self, platt: bool, tol: float, shrinking: bool, max_work: int, stop_iter: int) -> int:
        """About max_work units of numba work (or up to stop_iter steps); returns a RUN_* code."""
        args = (
            self.n,
            self.budget,
            self.X,
            self.orig,
            self.kp,
            self.ca,
            self.V,
            self.istate,
            self.fstate,
            self.swap_p,
            self.swap_q,
            tol,
            shrinking,
            max_work,
            stop_iter,
        )
        return run_platt(*args, self.rng) if platt else run_second_order(*args)

    def primal(self, quad: float, hinge: float, b: float, rho: float) -> float:
        """The primal value from alpha' Q alpha, the summed losses, the offset b and the nu duals' rho."""
        if self.nu != NU_NONE:
            return 0.5 * quad + hinge - self.offset_weight * rho
        return 0.5 * quad + hinge + self.offset_weight * b

    def stats(self):
        """(m, M, b, n_sv, n_bounded, quad, hinge, rho) over the active positions (see smo.steps.stats)."""
        V = self.V
        active = int(self.istate[IS_ACTIVE])
        return stats(self.yp, V.alpha, V.G, V.Cp, V.status, V.P, self.epsilon, active, self.n, self.nu)

    def record(self, final: bool = False) -> None:
        """Hand one trace point to the control (its time counts as trace time, not solver time)."""
        t0 = time.perf_counter()
        istate, n = self.istate, self.n
        active = int(istate[IS_ACTIVE])
        m, M, b, n_sv, n_bounded, quad, hinge, rho = self.stats()
        lookups = istate[IS_HITS] + istate[IS_MISSES]
        point = {
            "iteration": int(istate[IS_ITER]),
            "elapsed_s": t0 - self.started - self.trace_seconds,
            "dual": -self.fstate[FS_F],
            "max_violation": m - M,
            "n_sv": int(n_sv),
            "n_bounded_sv": int(n_bounded),
            "cache_hit_rate": float(istate[IS_HITS] / lookups) if lookups else 0.0,
            "active_size": active,
        }
        if active < n:
            quad, hinge = (None, None) if final else self.shrunk_primal_parts(active, b, rho, quad, hinge)
        if quad is not None:
            primal = self.primal(quad, hinge, b, rho)
            point["primal"] = primal
            point["gap"] = primal + self.fstate[FS_F]
        if final:
            point["final"] = True
        self.control.record(point)
        self.trace_seconds += time.perf_counter() - t0

    def shrunk_primal_parts(self, active: int, b: float, rho: float, quad: float, hinge: float):
        """The primal's |w|^2 and loss sums over ALL rows while shrunk, or (None, None) when not due.

        It needs the shrunk variables' gradients: G_bar - 1 plus the free variables' kernel rows over
        the shrunk positions, computed outside the cache. Due every PRIMAL_EVERY_S seconds, and no
        sooner than 4 times its own last cost after the previous one, so it takes at most about a
        fifth of the run (its time counts as trace time, not solver time); a stop request abandons it.
        """
        now = time.perf_counter()
        if now < self.primal_next:
            return None, None
        n, V = self.n, self.V
        free_pos = np.flatnonzero(V.status[:active] == FREE).astype(np.int64)
        rest = np.zeros(n - active)
        chunk = max(1, int(2_000_000 // max(1, n - active)))
        for start in range(0, free_pos.size, chunk):
            inactive_gradient(
                self.X,
                self.kp,
                V.alpha,
                free_pos,
                start,
                min(free_pos.size, start + chunk),
                active,
                n,
                self.istate,
                rest,
            )
            if self.control.check() is not None:
                return None, None
        P_rest = V.P[active:]
        G_rest = V.G_bar[active:] + P_rest + rest
        quad += float(V.alpha[active:] @ (G_rest - P_rest))
        if self.nu == NU_SVR:  # smo.nu.nu_parts's losses
            loss = np.maximum(0.0, np.abs(G_rest + b) + rho)
            hinge += float(V.Cp[active:] @ np.where(self.yp[active:] > 0, loss, 0.0))
        elif self.nu != NU_NONE:
            hinge += float(V.Cp[active:] @ np.maximum(0.0, rho - G_rest - self.yp[active:] * b))
        elif self.epsilon < 0.0:
            hinge += float(V.Cp[active:] @ np.maximum(0.0, -G_rest - self.yp[active:] * b))
        else:  # the rows whose first copy is shrunk (steps.svr_loss)
            loss = np.maximum(0.0, np.abs(G_rest - self.epsilon + b) - self.epsilon)
            hinge += float(V.Cp[active:] @ np.where(self.yp[active:] > 0, loss, 0.0))
        cost = time.perf_counter() - now
        self.primal_next = time.perf_counter() + max(PRIMAL_EVERY_S, 4.0 * cost)
        return quad, hinge

    def reconstruct(self, check: bool = True) -> StopReason | None:
        """Rebuild G for the inactive variables in chunks, then make every variable active."""
        istate, n, V = self.istate, self.n, self.V
        active = int(istate[IS_ACTIVE])
        if istate[IS_SLOT_LEN] < n:
            reslot(n, int(min(n, max(2, self.budget // n))), self.ca, istate)
        if active < n:
            computed0 = int(istate[IS_COMPUTED])
            V.G[active:] = V.G_bar[active:] + V.P[active:]
            free_pos = np.flatnonzero(V.status[:active] == FREE).astype(np.int64)
            chunk = max(1, int(2_000_000 // n))  # a row fetched here costs up to n kernel values
            last_check = time.perf_counter()
            for start in range(0, free_pos.size, chunk):
                rebuild_gradient(
                    self.X,
                    self.kp,
                    self.ca,
                    istate,
                    V.alpha,
                    V.G,
                    free_pos,
                    start,
                    min(free_pos.size, start + chunk),
                    active,
                    n,
                )
                if check and time.perf_counter() - last_check > SLICE_SECONDS:
                    last_check = time.perf_counter()
                    reason = self.control.check()
                    if reason is not None:
                        istate[IS_RECONSTRUCTED] += int(istate[IS_COMPUTED]) - computed0
                        return reason
            istate[IS_RECONSTRUCTED] += int(istate[IS_COMPUTED]) - computed0
            istate[IS_ACTIVE] = n
        return None

    def restart_full_check(self) -> None:
        """After a rebuild: test the whole problem before shrinking again (shrinking first could loop forever)."""
        istate = self.istate
        istate[IS_SHRINK_COUNTER] = 2
        istate[IS_EXAMINE_ALL] = 1
        istate[IS_PASS_POS] = 0
        istate[IS_NUM_CHANGED] = 0

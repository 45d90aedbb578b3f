"""The working set of cuts of the sampled-cut solver (``solve.solve_sampled_cuts``): each cut's rows and
weights, its expansion's values at every row (A_k(x_i)), the Gram matrix of the cuts, and the cuts' removal
when they stay inactive. The math and the names are in ``worker.solvers.sampled_cuts.solve``'s docstring.
"""

from __future__ import annotations

import numpy as np

from worker.solvers.reduced_qp import reduced_dual_smo
from worker.solvers.sampled_cuts.blocks import _entries_group, _entries_keep, _entries_merge
from worker.solvers.sampled_cuts.master import ACTIVE_SET_FAILED, ACTIVE_SET_OK, master_active_set, master_refactor

QP_MAX_STEPS = 1_000_000
"""Steps of the SMO fallback of one master solve."""


class Cuts:
    """Cuts as kernel expansions: rows, coefficients (beta), offset c, Gram matrix H, alpha, A rows."""

    def __init__(self, n_rows: int, keep_a: bool) -> None:
        self.rows: list[np.ndarray] = []
        # every cut's basis entries (row, cut index, beta), sorted by row and then cut
        self.e_rows = np.zeros(0, dtype=np.int64)
        self.e_cut = np.zeros(0, dtype=np.int64)
        self.e_coef = np.zeros(0)
        self.coef: list[np.ndarray] = []
        self.c: list[float] = []
        self.exact: list[bool] = []  # whether each cut is a subgradient cut of the risk (all its loss rows)
        self.inactive = np.zeros(16, dtype=np.int64)  # consecutive solves with alpha_k = 0, per cut
        self.H = np.zeros((16, 16))
        self.alpha = np.zeros(16)
        self.grad = np.zeros(16)
        self.keep_a = keep_a
        self.A = np.zeros((16 if keep_a else 0, n_rows if keep_a else 0))
        # the master's free set (cuts with alpha > 0, in factor order) and the Cholesky factor of H over it;
        # n_free = -1: to be refactored from alpha before the next solve
        self.L = np.zeros((16, 16))
        self.free = np.zeros(16, dtype=np.int64)
        self.n_free = 0

    @property
    def t(self) -> int:
        return len(self.c)

    def _grow(self) -> None:
        t = self.t
        if t < self.H.shape[0]:
            return
        size = 2 * self.H.shape[0]
        H = np.zeros((size, size))
        H[:t, :t] = self.H[:t, :t]
        self.H = H
        L = np.zeros((size, size))
        L[:t, :t] = self.L[:t, :t]
        self.L = L
        free = np.zeros(size, dtype=np.int64)
        free[:t] = self.free[:t]
        self.free = free
        inactive = np.zeros(size, dtype=np.int64)
        inactive[:t] = self.inactive[:t]
        self.inactive = inactive
        for name in ("alpha", "grad"):
            old = getattr(self, name)
            new = np.zeros(size)
            new[:t] = old[:t]
            setattr(self, name, new)
        if self.keep_a:
            A = np.zeros((size, self.A.shape[1]))
            A[:t] = self.A[:t]
            self.A = A

    def add(
        self,
        rows: np.ndarray,
        coef: np.ndarray,
        c: float,
        column: np.ndarray,
        self_dot: float,
        a_row: np.ndarray | None,
        exact: bool = False,
    ) -> None:
        self._grow()
        t = self.t
        self.H[t, :t] = column
        self.H[:t, t] = column
        self.H[t, t] = self_dot
        self.alpha[t] = 0.0
        if self.keep_a:
            self.A[t] = a_row
        self.e_rows, self.e_cut, self.e_coef = _entries_merge(self.e_rows, self.e_cut, self.e_coef, rows, t, coef)
        self.rows.append(rows)
        self.coef.append(coef)
        self.c.append(float(c))
        self.exact.append(bool(exact))
        self.inactive[t] = 0

    def drop_inactive(self, max_inactive: int) -> None:
        t = self.t
        inactive = self.inactive[:t]
        inactive[:] = np.where(self.alpha[:t] > 0.0, 0, inactive + 1)
        if int(inactive.max(initial=0)) < max_inactive:
            return
        idx = np.flatnonzero(inactive < max_inactive)
        keep = idx.tolist()
        m = idx.size
        self.H[:m, :m] = self.H[np.ix_(idx, idx)]
        self.alpha[:m] = self.alpha[idx]
        self.alpha[m:] = 0.0
        new_index = np.full(t, -1, dtype=np.int64)
        new_index[idx] = np.arange(m)
        if self.n_free > 0:  # the free cuts have alpha > 0, so they are all kept: renumber them
            self.free[: self.n_free] = new_index[self.free[: self.n_free]]
        if self.keep_a:
            self.A[:m] = self.A[idx]
        self.e_rows, self.e_cut, self.e_coef = _entries_keep(self.e_rows, self.e_cut, self.e_coef, new_index)
        self.rows = [self.rows[k] for k in keep]
        self.coef = [self.coef[k] for k in keep]
        self.c = [self.c[k] for k in keep]
        self.exact = [self.exact[k] for k in keep]
        self.inactive[:m] = self.inactive[idx]

    def solve_master(self, C_paper: float, qp_tol: float, max_inactive: int) -> tuple[float, float, bool]:
        """SOLVE_QP(J) (line 7 of Algorithms 2 and 3): OP2 in its dual from the current alpha, by the active-set
        method (SMO finishing from the same alpha on a numerically singular face), then the cuts inactive for
        ``max_inactive`` solves dropped (Section 6.1: 20 in the paper). Returns (xi, the master's dual value,
        whether SMO finished it)."""
        t = self.t
        h = np.asarray(self.c + [0.0] * (self.H.shape[0] - t))
        status = ACTIVE_SET_FAILED
        xi = master_dual = 0.0
        if self.n_free < 0:
            self.n_free = master_refactor(self.H, self.alpha, t, self.L, self.free)
        if self.n_free >= 0:
            status, self.n_free, _changes, master_dual, _gap, xi = master_active_set(
                self.H, h, self.alpha, t, C_paper, qp_tol, self.L, self.free, self.n_free, 10 * t + 100, self.grad
            )
        fell_back = status != ACTIVE_SET_OK
        if fell_back:  # numerically singular face or no progress: SMO finishes from this alpha
            _steps, master_dual, _gap, xi = reduced_dual_smo(
                self.H, h, self.alpha, t, C_paper, qp_tol, QP_MAX_STEPS, self.grad
            )
            self.n_free = -1
        self.drop_inactive(max_inactive)
        return float(xi), float(master_dual), fell_back

    def bound_is_certified(self) -> bool:
        """Whether the master's dual value bounds the true optimum: every cut with alpha > 0 is exact (the others do
        not enter the dual's value)."""
        return all(exact for exact, a in zip(self.exact, self.alpha[: self.t]) if a > 0.0)

    def grouped_basis(self):
        """Unique basis rows (ascending) with CSR-like ranges over the (cut, coef) entries, and
        gamma_u = sum_k alpha_k beta_ku per unique row."""
        urows, uptr, gamma = _entries_group(self.e_rows, self.e_cut, self.e_coef, self.alpha)
        return urows, uptr, self.e_cut, self.e_coef, gamma

    @property
    def basis_size(self) -> int:
        """Basis entries over all cuts (a row counts once per cut that holds it)."""
        return int(self.e_rows.size)

    def expansion(self) -> tuple[np.ndarray, np.ndarray]:
        """(rows, gamma) with gamma = sum_k alpha_k beta_k, rows ascending, zeros dropped."""
        if self.t == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        rows = np.concatenate(self.rows)
        coef = np.concatenate([self.alpha[k] * self.coef[k] for k in range(self.t)])
        urows, inverse = np.unique(rows, return_inverse=True)
        gamma = np.bincount(inverse, weights=coef, minlength=urows.size)
        keep = gamma != 0.0
        return urows[keep].astype(np.int64), gamma[keep]

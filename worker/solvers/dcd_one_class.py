"""The linear one-class SVM (LIBLINEAR's -s 21) by dual coordinate descent on pairs of variables, w kept.

Problem
-------
Rows x_i (their labels unused), nu in (0, 1]. In LIBSVM's and LIBLINEAR's scaling (the same problem as smo's
``one_class`` with the linear kernel, ``smo.one_class``), the primal

    min_{w, rho}  P(w, rho) = 0.5 * |w|^2 - nu n rho + sum_i max(0, rho - <w, x_i>)

and its dual

    min_alpha  f(alpha) = 0.5 * |w(alpha)|^2,   w(alpha) = sum_i alpha_i x_i,   0 <= alpha_i <= 1,   sum_i alpha_i = nu n.

The gradient is G_i = <w, x_i>; with m = max_{alpha_i < 1} (-G_i) and M = min_{alpha_j > 0} (-G_j) the KKT conditions
hold when m - M <= 0, and m - M is the largest violation (the rule LIBSVM's -e stops on). The model is
f(x) = <w, x> - rho, +1 (inlier) where f > 0; rho is the mean of G over the free variables (else the middle of
[max_{alpha = 1} G, min_{alpha = 0} G]). The certified gap is P(w, rho) - D with D = -f(alpha) (weak duality; P is
negative at the optimum, gap_rel is over |P|).

Algorithm
---------
The dual has one equality constraint, so a coordinate step moves two variables: alpha_i up and alpha_j down by the
same d keeps sum_i alpha_i, and along that direction f changes by d (G_i - G_j) + 0.5 d^2 |x_i - x_j|^2, minimized
at d = (G_j - G_i) / |x_i - x_j|^2 clipped to the box (Platt's two-variable step, as smo's, with the kernel linear and
w kept as in Hsieh et al.'s dual coordinate descent, paper 002, so that a gradient costs one sparse row). An outer
iteration computes every active G in one pass, then takes pairs in order of violation: the variables that can go up
sorted by -G descending against those that can go down sorted by -G ascending, the k-th of each paired while the
pair violates by more than ``tol``, each step on fresh gradients (two sparse dot products) and the exact
|x_i - x_j|^2 (a scatter of x_i). Shrinking as LIBSVM's: a variable at 0 with -G_i < M, or at 1 with -G_i > m,
leaves the passes; when the violation over the active ones falls below tol, all come back for a full check. The
stopping rule is m - M < ``tol`` over every variable (LIBSVM's -e; default 0.01, LIBLINEAR -s 21's -e), then the gap
must certify ``tol_rel`` (``common.run_dual_passes``: else tol is divided by 10 and the passes go on). The start is
LIBSVM's (alpha_i = 1 for the first floor(nu n) rows, the remainder on the next).
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp
from numba import njit

from worker.solvers.common import SolverControl, SolverResult, run_dual_passes
from worker.solvers.kernels import clear_row, gather_dot, row_sq_norms, scatter_row
from worker.solvers.smo.one_class import check_one_class, initial_alpha


@njit(cache=True)
def _outer(indptr, indices, data, sq, w, alpha, G, index, active, tol, scratch, shrink):
    """One outer iteration (module docstring) over index[:active]: returns (active, violation before the steps)."""
    m = -np.inf
    M = np.inf
    for s in range(active):
        i = index[s]
        g = gather_dot(indptr, indices, data, i, w)
        G[i] = g
        if alpha[i] < 1.0 and -g > m:
            m = -g
        if alpha[i] > 0.0 and -g < M:
            M = -g
    violation = m - M
    if shrink:
        s = 0
        while s < active:
            i = index[s]
            if (alpha[i] <= 0.0 and -G[i] < M) or (alpha[i] >= 1.0 and -G[i] > m):
                active -= 1
                index[s] = index[active]
                index[active] = i
            else:
                s += 1
    if violation < tol:
        return active, violation
    ups = np.empty(active, dtype=np.int64)
    lows = np.empty(active, dtype=np.int64)
    n_up = 0
    n_low = 0
    for s in range(active):  # only the variables that violate by more than tol with some partner
        i = index[s]
        if alpha[i] < 1.0 and -G[i] > M + tol:
            ups[n_up] = i
            n_up += 1
        if alpha[i] > 0.0 and -G[i] < m - tol:
            lows[n_low] = i
            n_low += 1
    up_keys = np.empty(n_up)
    for k in range(n_up):
        up_keys[k] = G[ups[k]]  # ascending G: -G descending
    low_keys = np.empty(n_low)
    for k in range(n_low):
        low_keys[k] = -G[lows[k]]  # ascending -G
    up_order = ups[:n_up][np.argsort(up_keys, kind="mergesort")]
    low_order = lows[:n_low][np.argsort(low_keys, kind="mergesort")]
    for k in range(min(n_up, n_low)):
        i = up_order[k]
        j = low_order[k]
        if -G[i] + G[j] <= tol:  # the pairs left violate less than tol (by their gradients at the pass)
            break
        if i == j:
            continue
        gi = gather_dot(indptr, indices, data, i, w)
        gj = gather_dot(indptr, indices, data, j, w)
        if gj - gi <= 0.0:
            continue
        scatter_row(indptr, indices, data, i, scratch)
        dot = gather_dot(indptr, indices, data, j, scratch)  # x_i'x_j
        clear_row(indptr, indices, i, scratch)
        eta = sq[i] + sq[j] - 2.0 * dot
        eta = eta if eta > 1e-12 else 1e-12
        d = (gj - gi) / eta
        d = min(d, 1.0 - alpha[i], alpha[j])
        if d <= 0.0:
            continue
        alpha[i] = 1.0 if alpha[i] + d >= 1.0 - 1e-12 else alpha[i] + d
        alpha[j] = 0.0 if alpha[j] - d <= 1e-12 else alpha[j] - d
        for p in range(indptr[i], indptr[i + 1]):
            w[indices[p]] += d * data[p]
        for p in range(indptr[j], indptr[j + 1]):
            w[indices[p]] -= d * data[p]
    return active, violation


@njit(cache=True)
def _objectives(indptr, indices, data, w, alpha, nu_n):
    """(P(w, rho), D, rho) over every row (module docstring)."""
    n = indptr.shape[0] - 1
    free_sum = 0.0
    n_free = 0
    low = -np.inf  # max G at alpha = 1
    high = np.inf  # min G at alpha = 0
    G = np.empty(n)
    for i in range(n):
        g = gather_dot(indptr, indices, data, i, w)
        G[i] = g
        if alpha[i] >= 1.0:
            low = max(low, g)
        elif alpha[i] <= 0.0:
            high = min(high, g)
        else:
            free_sum += g
            n_free += 1
    if n_free > 0:
        rho = free_sum / n_free
    elif np.isfinite(low) and np.isfinite(high):
        rho = 0.5 * (low + high)
    else:
        rho = low if np.isfinite(low) else high
    half = 0.0
    for j in range(w.shape[0]):
        half += 0.5 * w[j] * w[j]
    hinge = 0.0
    for i in range(n):
        hinge += max(0.0, rho - G[i])
    return half - nu_n * rho + hinge, -half, rho


class _Passes:
    """The outer iterations for ``run_dual_passes``: shrinking, and every variable back when the active ones satisfy
    the rule."""

    def __init__(self, arrays, w, alpha, shrinking: bool) -> None:
        self.arrays = arrays
        self.w, self.alpha = w, alpha
        self.n = alpha.size
        self.index = np.arange(self.n, dtype=np.int64)
        self.active = self.n
        self.G = np.zeros(self.n)
        self.scratch = np.zeros(w.size)
        self.shrinking = shrinking
        self.tol = 0.0
        self.full = True

    def one_pass(self, stop_at: float) -> tuple[float, bool]:
        self.full = self.active == self.n
        indptr, indices, data, sq = self.arrays
        self.active, violation = _outer(
            indptr, indices, data, sq, self.w, self.alpha, self.G, self.index, self.active, self.tol, self.scratch,
            self.shrinking,
        )  # fmt: skip
        return violation, True

    def after_pass(self, violation: float, threshold: float) -> bool:
        self.tol = threshold
        if violation >= threshold:
            return False
        if not self.full:
            self.active = self.n
            return False
        return True


def solve_one_class_linear(indptr, indices, data, n_features: int, params, control=None) -> SolverResult:
    """Train the linear one-class SVM (module docstring); ``params``: nu, tol, tol_rel, max_iter, shrinking,
    trace_every, trace_budget (dcd's). The result's ``w`` and ``bias`` = -rho score rows as f(x) = <w, x> + bias."""
    control = control or SolverControl()
    started = time.perf_counter()
    indptr = np.asarray(indptr, dtype=np.int64)
    n = indptr.size - 1
    nu = check_one_class(n, params.nu)
    data = np.asarray(data, dtype=np.float64)
    sq = row_sq_norms(indptr, data)
    alpha = initial_alpha(n, nu)
    w = np.asarray(sp.csr_matrix((data, indices, indptr), shape=(n, int(n_features))).T @ alpha).reshape(-1)
    arrays = (indptr, np.asarray(indices), data, sq)
    passes = _Passes(arrays, w, alpha, bool(params.shrinking))
    passes.tol = float(params.tol)
    nu_n = nu * n
    rho = [0.0]

    def objectives():
        primal, dual, rho[0] = _objectives(indptr, arrays[1], data, w, alpha, nu_n)
        return float(primal), float(dual)

    setup = time.perf_counter() - started
    run = run_dual_passes(passes.one_pass, passes.after_pass, objectives, lambda: passes.active, params, control)
    objectives()  # rho of the returned w
    note = "primal minus the dual value of the returned alpha (weak duality), over |primal|"
    # the offset is -rho: a bias "feature" of value 1 whose weight is -rho
    return run.result(np.append(w, -rho[0]), 1.0, setup, note, alpha=alpha.copy(), rho=rho[0])

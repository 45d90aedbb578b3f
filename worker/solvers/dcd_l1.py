"""L1-regularized L2-loss linear SVM by coordinate descent with Newton steps (CDN; LIBLINEAR's -s 5), which ``dcd``
runs on data with many features (with few, where a dense Hessian fits, ``dcd_l1_glmnet``'s newGLMNET is 2-4x
faster: ``dcd_l1_glmnet.suits``).

Problem
-------
Rows x_i (CSR), labels y_i in {-1, +1}, per-row costs C_i = C * class_weight(y_i); with ``bias=B`` the constant
feature B of ``worker.solvers.dcd`` (its weight w_B is regularized too, as LIBLINEAR's -B). In the service's
convention

    min_w  P(w) = |w|_1 + sum_i C_i * max(0, 1 - y_i w'x_i)^2.

The L1 norm makes the weights sparse. Its Fenchel dual (for the certificate):

    max_alpha  D(alpha) = sum_i (alpha_i - alpha_i^2 / (4 C_i)),   alpha >= 0,   |sum_i alpha_i y_i x_i|_inf <= 1,

and D(alpha) <= P(w*) <= P(w). From the current w, alpha_i = 2 C_i max(0, 1 - y_i w'x_i) (the dual point w would
have at the optimum), scaled by s = min(1, 1 / |sum_i alpha_i y_i x_i|_inf) to be feasible, gives the certified gap
P(w) - D(s alpha).

Algorithm
---------
Yuan, Chang, Hsieh and Lin, "A comparison of optimization methods and software for large-scale L1-regularized
linear classification", JMLR 11 (2010), Section 4.1 (CDN), the method LIBLINEAR's -s 5 runs: passes over the
features in a seeded random order (columns of a CSC copy of the data, each value times its row's label); at feature j, with b_i = 1 - y_i w'x_i and
I = {i : b_i > 0}, the loss's derivatives L' = -2 sum_{i in I} C_i y_i x_ij b_i and L'' = 2 sum_{i in I} C_i x_ij^2
(at least 1e-12) give the Newton direction of the one-variable problem with |w_j + d| (its eq. (29)):
d = -(L' + 1) / L'' when L' + 1 <= L'' w_j, d = -(L' - 1) / L'' when L' - 1 >= L'' w_j, else d = -w_j; a
backtracking line search (Armijo, sigma 0.01, step halved, at most 100 times; each trial first against the bound
G lambda d + (lambda d)^2 sum_i C_i x_ij^2 of the loss's change, as the paper's implementation, and only when that
fails against the change itself) takes lambda d where
|w_j + lambda d| - |w_j| + L(w + lambda d e_j) - L(w) <= sigma lambda (L' d + |w_j + d| - |w_j|), the loss summed
over column j's rows only. The violation of feature j is the minimum-norm subgradient: |L' + 1| (w_j > 0),
|L' - 1| (w_j < 0), max(0, -(L' + 1), L' - 1) (w_j = 0).

Shrinking (the paper's Section 4.1.2, as LIBLINEAR): a feature at 0 whose subgradient interval holds 0 by more than
M / n (M the previous pass's largest violation, n the rows) leaves the passes. Stopping (LIBLINEAR -s 5's -e, as its usage
states it): after a pass whose summed violation is below ``tol`` * min(positives, negatives) / n times the first
pass's (``common.l1_rule_scale``; without that factor, as until 2026-11-29, a9a stopped after 7 passes 0.15% above
the optimum where LIBLINEAR goes on to 49); on the shrunk features, every feature comes
back and the passes go on; on all of them, the certified gap must be within ``tol_rel`` too (when it is not, the
threshold is divided by 10), as dcd's other losses (``common.run_dual_passes``). The scaled dual point is a loose
certificate here (its gap 0.9 on a9a at 0.03% from the optimum, where a few features' g_j still exceed 1 by a
little times a large sum of alpha): the schema does not require ``tol_rel`` unless it is given.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp
from numba import njit

from worker.solvers.common import (
    RelativeRulePasses,
    SolverControl,
    SolverResult,
    l1_rule_scale,
    monotonic_s,
    rng_state,
    run_dual_passes,
    shuffle_prefix,
)

SIGMA = 0.01  # Armijo's constant
SQUARED_HINGE_GAP_NOTE = (
    "objective minus the Fenchel dual value of w's dual point scaled to feasibility (weak duality; a loose bound)"
)
MAX_HALVINGS = 100


@njit(cache=True, inline="always")
def subgradient_violation(g, wj, margin):
    """The minimum-norm subgradient of |w_j| + L at w_j (``g`` = dL/dw_j), and whether feature j may leave the passes:
    at w_j = 0 with g + 1 > margin and g - 1 < -margin (0 inside its subgradient interval by more than ``margin``)."""
    if wj > 0.0:
        return abs(g + 1.0), False
    if wj < 0.0:
        return abs(g - 1.0), False
    if g + 1.0 < 0.0:
        return -(g + 1.0), False
    if g - 1.0 > 0.0:
        return g - 1.0, False
    return 0.0, g + 1.0 > margin and g - 1.0 < -margin


@njit(cache=True, inline="always")
def newton_step(g, h, wj):
    """The minimizer d of g d + 0.5 h d^2 + |w_j + d| (the paper's eq. (29)), and whether it is the step to 0."""
    if g + 1.0 <= h * wj:
        return -(g + 1.0) / h, False
    if g - 1.0 >= h * wj:
        return -(g - 1.0) / h, False
    return -wj, True


@njit(cache=True)
def _pass(col_ptr, col_rows, col_vals, costs, xj_sq, b, w, index, active, shrink_at, n_rows, rng, resume, stop_at):
    """One pass over the features index[:active] (or a slice of one: ``resume`` = [next position, largest violation,
    summed violation], position < 0 for a new pass). Returns (active, largest violation, summed violation, done)."""
    if resume[0] < 0.0:
        shuffle_prefix(index, active, rng)
        s = 0
        worst = 0.0
        total = 0.0
    else:
        s = int(resume[0])
        worst = resume[1]
        total = resume[2]
    first = s
    while s < active:
        if (s & 255) == 0 and s - first >= 256 and monotonic_s() >= stop_at:
            resume[0] = s
            resume[1] = worst
            resume[2] = total
            return active, worst, total, False
        j = index[s]
        start = np.uint64(col_ptr[j])  # (unsigned indices: kernels.gather_dot)
        end = np.uint64(col_ptr[j + 1])
        G = 0.0
        H = 0.0
        for p in range(start, end):
            i = np.uint64(col_rows[p])
            if b[i] > 0.0:
                v = col_vals[p]
                c = costs[i]
                G -= 2.0 * c * v * b[i]
                H += 2.0 * c * v * v
        if H < 1e-12:
            H = 1e-12
        wj = w[j]
        violation, shrinkable = subgradient_violation(G, wj, shrink_at / n_rows)
        if shrinkable:  # well inside: out of the passes
            active -= 1
            index[s] = index[active]
            index[active] = j
            continue
        if violation > worst:
            worst = violation
        total += violation
        d, _ = newton_step(G, H, wj)
        if abs(d) < 1e-12:
            s += 1
            continue
        delta = abs(wj + d) - abs(wj) + G * d
        step = 1.0
        accepted = False
        for _ in range(MAX_HALVINGS):
            z = step * d
            # first a bound of the loss's change, G z + z^2 sum_i C_i x_ij^2 (max(0, t)^2 has curvature <= 2): when
            # it passes the test, so does the change itself, and no pass over the column is needed to know it
            if abs(wj + z) - abs(wj) + G * z + xj_sq[j] * z * z <= SIGMA * step * delta:
                accepted = True
                break
            change = 0.0  # the loss's change, summed row by row (a difference of two sums loses it near the optimum)
            for p in range(start, end):
                i = np.uint64(col_rows[p])
                old = b[i]
                bi = old - z * col_vals[p]
                change += costs[i] * ((bi * bi if bi > 0.0 else 0.0) - (old * old if old > 0.0 else 0.0))
            if abs(wj + z) - abs(wj) + change <= SIGMA * step * delta:
                accepted = True
                break
            step *= 0.5
        if accepted:
            z = step * d
            w[j] = wj + z
            for p in range(start, end):
                i = np.uint64(col_rows[p])
                b[i] -= z * col_vals[p]
        s += 1
    resume[0] = -1.0
    return active, worst, total, True


@njit(cache=True)
def _column_squares(col_ptr, col_rows, col_vals, costs, out):
    """out[j] = sum_i C_i x_ij^2."""
    for j in range(out.shape[0]):
        total = 0.0
        for p in range(col_ptr[j], col_ptr[j + 1]):
            total += costs[col_rows[p]] * col_vals[p] * col_vals[p]
        out[j] = total


@njit(cache=True)
def squared_hinge_objectives(col_ptr, col_rows, col_vals, costs, b, w):
    """(P(w), D(s alpha)) of the L1-regularized squared hinge at margins' complements b_i = 1 - y_i w'x_i: the primal,
    and the dual value of the scaled dual point of w (module docstring)."""
    l1 = 0.0
    for j in range(w.shape[0]):
        l1 += abs(w[j])
    loss = 0.0
    linear = 0.0
    quadratic = 0.0
    for i in range(b.shape[0]):
        if b[i] > 0.0:
            loss += costs[i] * b[i] * b[i]
            a = 2.0 * costs[i] * b[i]
            linear += a
            quadratic += a * a / (4.0 * costs[i])
    largest = 0.0  # |sum_i alpha_i y_i x_i|_inf
    for j in range(w.shape[0]):
        g = 0.0
        for p in range(col_ptr[j], col_ptr[j + 1]):
            i = col_rows[p]
            if b[i] > 0.0:
                g += 2.0 * costs[i] * b[i] * col_vals[p]
        if abs(g) > largest:
            largest = abs(g)
    scale = 1.0 if largest <= 1.0 else 1.0 / largest
    return l1 + loss, scale * linear - scale * scale * quadratic


@njit(cache=True)
def _transpose(indptr, indices, data, n_features, B, signs, col_ptr, col_rows, col_vals):
    """CSR -> CSC of signs_i x_ij, rows ascending in every column, with the bias column signs_i B (when B > 0) last."""
    n = indptr.shape[0] - 1
    for p in range(indices.shape[0]):
        col_ptr[indices[p] + 1] += 1
    if B > 0.0:
        col_ptr[n_features + 1] = n
    for j in range(col_ptr.shape[0] - 1):
        col_ptr[j + 1] += col_ptr[j]
    fill = col_ptr[:-1].copy()
    for i in range(n):
        for p in range(indptr[i], indptr[i + 1]):
            j = indices[p]
            q = fill[j]
            col_rows[q] = i
            col_vals[q] = signs[i] * data[p]
            fill[j] = q + 1
        if B > 0.0:
            q = fill[n_features]
            col_rows[q] = i
            col_vals[q] = signs[i] * B
            fill[n_features] = q + 1


def columns(indptr, indices, data, n_features: int, B: float, y=None):
    """The CSC arrays of the rows, with the bias feature B as the last column when B > 0, each value times its row's
    label when ``y`` is given (y_i x_ij: the passes then read no label); a transposition in one pass (scipy's, with
    the column stacked on, took 9 ms of a9a's 25 ms to LIBLINEAR -s 6's objective; the labels multiplied in after it,
    2-2.7 ms more on a9a, w8a and ijcnn1)."""
    indptr = np.asarray(indptr, dtype=np.int64)
    n = indptr.shape[0] - 1
    width = int(n_features) + (1 if B > 0.0 else 0)
    nnz = int(indptr[-1]) + (n if B > 0.0 else 0)
    rows = np.int32 if n < 2**31 else np.int64  # half the index bytes a pass reads
    col_ptr = np.zeros(width + 1, dtype=np.int64)
    col_rows = np.empty(nnz, dtype=rows)
    col_vals = np.empty(nnz, dtype=np.float64)
    signs = np.ones(n) if y is None else np.ascontiguousarray(y, dtype=np.float64)
    _transpose(indptr, np.asarray(indices), np.asarray(data, dtype=np.float64), int(n_features), float(B), signs,
               col_ptr, col_rows, col_vals)  # fmt: skip
    return col_ptr, col_rows, col_vals


def solve_l1(
    indptr, indices, data, y, n_features: int, C_neg: float, C_pos: float, B: float, params, control=None
) -> SolverResult:
    """Train the L1-regularized L2-loss SVM (module docstring). ``y`` in {-1, +1}; ``B`` the bias feature's value (0:
    none); ``params``: tol, tol_rel, max_iter, seed, trace_every, trace_budget (dcd's). The result's ``w`` has the
    n_features weights, ``bias`` = B * w_B."""
    control = control or SolverControl()
    started = time.perf_counter()
    y = np.ascontiguousarray(y, dtype=np.float64)
    n = y.shape[0]
    col_ptr, col_rows, col_vals = columns(indptr, indices, data, n_features, B, y)  # y_i x_ij
    width = col_ptr.shape[0] - 1
    costs = np.where(y > 0, C_pos, C_neg).astype(np.float64)
    xj_sq = np.zeros(width)  # sum_i C_i x_ij^2 per column: the line search's bound
    _column_squares(col_ptr, col_rows, col_vals, costs, xj_sq)
    b = np.ones(n)
    w = np.zeros(width)
    index = np.arange(width, dtype=np.int64)
    rng = rng_state(int(params.seed))
    passes = RelativeRulePasses(
        width,
        lambda active, shrink_at, resume, stop_at: _pass(
            col_ptr, col_rows, col_vals, costs, xj_sq, b, w, index, active, shrink_at, n, rng, resume, stop_at
        ),
        rule_scale=l1_rule_scale(y),
    )

    def objectives():
        primal, dual = squared_hinge_objectives(col_ptr, col_rows, col_vals, costs, b, w)
        return float(primal), float(dual)

    setup = time.perf_counter() - started
    run = run_dual_passes(passes.one_pass, passes.after_pass, objectives, lambda: passes.active, params, control)
    w_full = w if B > 0.0 else np.append(w, 0.0)
    return run.result(w_full, B, setup, SQUARED_HINGE_GAP_NOTE)


def margins(indptr, indices, data, w_full, B: float) -> np.ndarray:
    """w'x_i + B w_B of every row (``w_full``: the weights, then w_B when B > 0)."""
    matrix = sp.csr_matrix((data, indices, indptr), shape=(indptr.shape[0] - 1, len(w_full) - (1 if B > 0 else 0)))
    return np.asarray(matrix @ np.asarray(w_full[: matrix.shape[1]])).reshape(-1) + (B * w_full[-1] if B > 0 else 0.0)


def primal_value(indptr, indices, data, y, w_full, B: float, C_neg: float, C_pos: float) -> float:
    """P(w) = |w|_1 + sum_i C_i max(0, 1 - y_i w'x_i)^2 (``w_full``: the weights, then w_B when B > 0)."""
    slack = np.maximum(0.0, 1.0 - np.asarray(y) * margins(indptr, indices, data, w_full, B))
    costs = np.where(np.asarray(y) > 0, C_pos, C_neg)
    return float(np.abs(w_full).sum() + costs @ (slack * slack))

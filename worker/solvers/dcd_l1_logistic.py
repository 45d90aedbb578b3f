"""L1-regularized logistic regression by coordinate descent with Newton steps (CDN; LIBLINEAR's -s 6 problem).

Problem
-------
Rows x_i, labels y_i in {-1, +1}, per-row costs C_i = C * class_weight(y_i), the bias feature of ``dcd_l1`` (its
weight regularized too, as LIBLINEAR's -B), in the service's convention:

    min_w  P(w) = |w|_1 + sum_i C_i * log(1 + exp(-y_i w'x_i)).

Its Fenchel dual, for the certificate: with the logistic loss's conjugate (a binary entropy),

    max_alpha  D(alpha) = sum_i C_i * H(alpha_i / C_i),   0 <= alpha_i <= C_i,   |sum_i alpha_i y_i x_i|_inf <= 1,

H(p) = -p log p - (1 - p) log(1 - p), and D(alpha) <= P(w*) <= P(w). The current w's dual point alpha_i = C_i /
(1 + exp(y_i w'x_i)) (the one of the optimum when w is), scaled by s = min(1, 1 / |sum_i alpha_i y_i x_i|_inf), gives
the certified gap P(w) - D(s alpha).

Algorithm
---------
Yuan, Chang, Hsieh and Lin, JMLR 11 (2010), Section 4.1 (CDN), with the logistic loss (the paper's Section 4.1.1
applies it to both losses; LIBLINEAR's -s 6 now runs newGLMNET, Yuan, Ho and Lin 2012, on the same problem): the
passes, random order, Newton direction of the one-variable problem with |w_j + d|, Armijo line search, shrinking and
stopping rule of ``dcd_l1`` (its docstring), with the logistic loss's derivatives at feature j, t_i = y_i w'x_i and
tau_i = 1 / (1 + exp(-t_i)):

    L' = -sum_i C_i (1 - tau_i) y_i x_ij,   L'' = sum_i C_i tau_i (1 - tau_i) x_ij^2   (at least 1e-12),

the line search testing the loss's change summed over column j's rows (no bound: the logistic loss's curvature is
not bounded by a constant as the squared hinge's is, but at most 1/4, so the test G z + z^2 / 8 sum_i C_i x_ij^2
accepts a step as safely). The margins t_i are kept and moved with w_j.
"""

from __future__ import annotations

import math
import time

import numpy as np
from numba import njit

from worker.solvers.common import (
    RelativeRulePasses,
    SolverControl,
    SolverResult,
    monotonic_s,
    rng_state,
    run_dual_passes,
    shuffle_prefix,
)
from worker.solvers.dcd_l1 import MAX_HALVINGS, SIGMA, _column_squares, columns


@njit(cache=True, inline="always")
def _log_loss(t):
    """log(1 + exp(-t)), without overflow."""
    return math.log1p(math.exp(-t)) if t > 0.0 else -t + math.log1p(math.exp(t))


@njit(cache=True, inline="always")
def _tau(t):
    """1 / (1 + exp(-t)), without overflow."""
    if t >= 0.0:
        return 1.0 / (1.0 + math.exp(-t))
    e = math.exp(t)
    return e / (1.0 + e)


@njit(cache=True)
def _pass(col_ptr, col_rows, col_vals, costs, xj_sq, t, w, index, active, shrink_at, n_rows, rng, resume, stop_at):
    """One pass (or a slice of one) over the features index[:active], as ``dcd_l1._pass`` with the logistic loss;
    returns (active, largest violation, summed violation, done)."""
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
        start = col_ptr[j]
        end = col_ptr[j + 1]
        G = 0.0
        H = 0.0
        for p in range(start, end):
            i = col_rows[p]
            v = col_vals[p]
            c = costs[i]
            tau = _tau(t[i])
            G -= c * (1.0 - tau) * v
            H += c * tau * (1.0 - tau) * v * v
        if H < 1e-12:
            H = 1e-12
        Gp = G + 1.0
        Gn = G - 1.0
        wj = w[j]
        if wj == 0.0:
            if Gp < 0.0:
                violation = -Gp
            elif Gn > 0.0:
                violation = Gn
            else:
                violation = 0.0
                if Gp > shrink_at / n_rows and Gn < -shrink_at / n_rows:  # well inside: out of the passes
                    active -= 1
                    index[s] = index[active]
                    index[active] = j
                    continue
        elif wj > 0.0:
            violation = abs(Gp)
        else:
            violation = abs(Gn)
        if violation > worst:
            worst = violation
        total += violation
        if Gp < H * wj:
            d = -Gp / H
        elif Gn > H * wj:
            d = -Gn / H
        else:
            d = -wj
        if abs(d) < 1e-12:
            s += 1
            continue
        delta = abs(wj + d) - abs(wj) + G * d
        step = 1.0
        accepted = False
        for _ in range(MAX_HALVINGS):
            z = step * d
            # the loss's curvature is at most 1/4: G z + z^2 / 8 sum_i C_i x_ij^2 bounds its change
            if abs(wj + z) - abs(wj) + G * z + 0.125 * xj_sq[j] * z * z <= SIGMA * step * delta:
                accepted = True
                break
            change = 0.0
            for p in range(start, end):
                i = col_rows[p]
                change += costs[i] * (_log_loss(t[i] + z * col_vals[p]) - _log_loss(t[i]))
            if abs(wj + z) - abs(wj) + change <= SIGMA * step * delta:
                accepted = True
                break
            step *= 0.5
        if accepted:
            z = step * d
            w[j] = wj + z
            for p in range(start, end):
                t[col_rows[p]] += z * col_vals[p]
        s += 1
    resume[0] = -1.0
    return active, worst, total, True


@njit(cache=True)
def _objectives(col_ptr, col_rows, col_vals, costs, t, w):
    """(P(w), D(s alpha)): the primal, and the dual value of the scaled dual point of w (module docstring)."""
    l1 = 0.0
    for j in range(w.shape[0]):
        l1 += abs(w[j])
    loss = 0.0
    for i in range(t.shape[0]):
        loss += costs[i] * _log_loss(t[i])
    largest = 0.0  # |sum_i alpha_i y_i x_i|_inf, alpha_i = C_i (1 - tau_i)
    for j in range(w.shape[0]):
        g = 0.0
        for p in range(col_ptr[j], col_ptr[j + 1]):
            i = col_rows[p]
            g += costs[i] * (1.0 - _tau(t[i])) * col_vals[p]
        if abs(g) > largest:
            largest = abs(g)
    scale = 1.0 if largest <= 1.0 else 1.0 / largest
    dual = 0.0
    for i in range(t.shape[0]):
        p = scale * (1.0 - _tau(t[i]))
        if 0.0 < p < 1.0:
            dual -= costs[i] * (p * math.log(p) + (1.0 - p) * math.log1p(-p))
    return l1 + loss, dual


def solve_l1_logistic(
    indptr, indices, data, y, n_features: int, C_neg: float, C_pos: float, B: float, params, control=None
) -> SolverResult:
    """Train the L1-regularized logistic regression (module docstring); arguments and result as
    ``dcd_l1.solve_l1``'s. The decision value w'x + b is the log-odds of the positive label."""
    control = control or SolverControl()
    started = time.perf_counter()
    y = np.ascontiguousarray(y, dtype=np.float64)
    n = y.shape[0]
    col_ptr, col_rows, col_vals = columns(indptr, indices, data, n_features, B)
    col_vals *= y[col_rows]  # y_i x_ij
    width = col_ptr.shape[0] - 1
    costs = np.where(y > 0, C_pos, C_neg).astype(np.float64)
    xj_sq = np.zeros(width)
    _column_squares(col_ptr, col_rows, col_vals, costs, xj_sq)
    t = np.zeros(n)
    w = np.zeros(width)
    index = np.arange(width, dtype=np.int64)
    rng = rng_state(int(params.seed))
    passes = RelativeRulePasses(
        width,
        lambda active, shrink_at, resume, stop_at: _pass(
            col_ptr, col_rows, col_vals, costs, xj_sq, t, w, index, active, shrink_at, n, rng, resume, stop_at
        ),
    )

    def objectives():
        primal, dual = _objectives(col_ptr, col_rows, col_vals, costs, t, w)
        return float(primal), float(dual)

    setup = time.perf_counter() - started
    run = run_dual_passes(passes.one_pass, passes.after_pass, objectives, lambda: passes.active, params, control)
    w_full = w if B > 0.0 else np.append(w, 0.0)
    note = "objective minus the Fenchel dual value (binary entropies) of w's dual point scaled to feasibility"
    return run.result(w_full, B, setup, note)


def primal_value(indptr, indices, data, y, w_full, B: float, C_neg: float, C_pos: float) -> float:
    """P(w) = |w|_1 + sum_i C_i log(1 + exp(-y_i w'x_i)) (``w_full``: the weights, then w_B when B > 0)."""
    import scipy.sparse as sp

    matrix = sp.csr_matrix((data, indices, indptr), shape=(indptr.shape[0] - 1, len(w_full) - (1 if B > 0 else 0)))
    margins = np.asarray(matrix @ np.asarray(w_full[: matrix.shape[1]])).reshape(-1) + (B * w_full[-1] if B else 0.0)
    costs = np.where(np.asarray(y) > 0, C_pos, C_neg)
    return float(np.abs(w_full).sum() + costs @ np.logaddexp(0.0, -np.asarray(y) * margins))

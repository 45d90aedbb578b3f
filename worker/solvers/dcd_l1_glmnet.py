"""L1-regularized logistic regression (LIBLINEAR's -s 6) and L1-regularized squared hinge (its -s 5, on data with few
features) by newGLMNET.

Problem
-------
Rows x_i, labels y_i in {-1, +1}, per-row costs C_i = C * class_weight(y_i), the bias feature of ``dcd_l1`` (its
weight regularized too, as LIBLINEAR's -B), in the service's convention, with t_i = y_i w'x_i:

    min_w  P(w) = |w|_1 + L(w),   L(w) = sum_i C_i * log(1 + exp(-t_i))      (logistic)
                                  L(w) = sum_i C_i * max(0, 1 - t_i)^2       (squared hinge)

The logistic loss's Fenchel dual, for the certificate: with its conjugate (a binary entropy),

    max_alpha  D(alpha) = sum_i C_i * H(alpha_i / C_i),   0 <= alpha_i <= C_i,   |sum_i alpha_i y_i x_i|_inf <= 1,

H(p) = -p log p - (1 - p) log(1 - p), and D(alpha) <= P(w*) <= P(w). The current w's dual point alpha_i = C_i /
(1 + exp(y_i w'x_i)) (the one of the optimum when w is), scaled by s = min(1, 1 / |sum_i alpha_i y_i x_i|_inf), gives
the certified gap P(w) - D(s alpha). The squared hinge's is ``dcd_l1``'s.

Algorithm
---------
Yuan, Ho and Lin, "An improved GLMNET for L1-regularized logistic regression", JMLR 13 (2012) (newGLMNET, what
LIBLINEAR's -s 6 runs). Each outer iteration is a Newton step on the smooth part: with tau_i = 1 / (1 + exp(-t_i))
and D_i = C_i tau_i (1 - tau_i) (logistic),

    d = argmin_d  q(d) = grad L' d + 0.5 d' (X' D X + nu I) d + |w + d|_1 - |w|_1     (nu = 1e-12),

grad_j L = -sum_i C_i (1 - tau_i) y_i x_ij. The squared hinge is once differentiable, its gradient
grad_j L = -2 sum_i C_i max(0, 1 - t_i) y_i x_ij piecewise linear: its generalized Hessian, D_i = 2 C_i where
1 - t_i > 0 and 0 elsewhere (Mangasarian, "A finite Newton method for classification", 2002; the Hessian LIBLINEAR's
trust-region Newton uses for -s 2), takes D's place, and the method is the same (LIBLINEAR runs CDN for -s 5, as
``dcd_l1`` does; on a9a, w8a and ijcnn1 this, with the Hessian below, reaches its objective in 0.25-0.62x of its
time where CDN took 1.00-1.17x; on sector's 55,197 features it took 1.2-3x CDN's, so ``dcd`` runs it only where
the dense Hessian fits, ``suits``). q is solved inexactly by coordinate descent over the features (the
one-variable minimizer of q with |w_j + d_j| in closed form, as CDN's step; the products X d kept per row, so that a
coordinate costs its column), in a seeded random order, with shrinking (a feature at w_j + d_j = 0 whose
quadratic's subgradient interval holds 0 by more than the last inner pass's largest violation / n leaves the inner
passes; all come back for a last check), until the inner passes' summed violation is below inner_tol times the
first outer iteration's (inner_tol starts at 1 and is divided by 4 whenever the inner loop ends after one pass; at
most 100 passes). With few features (``DENSE_HESSIAN_FEATURES``), an inner loop that has run as many passes as
forming the Hessian X'DX costs (each row's pairs of stored values against a pass's two reads of each, about five
passes on a9a, w8a and ijcnn1) goes on over H instead: a coordinate then costs the features, not its column, so the
quadratic is solved a thousand times more closely (``HESSIAN_INNER_SHARE``) for about one more pass, and the Newton
steps get that close to exact; an iteration that needed ``HESSIAN_AGAIN_AFTER`` passes on H has the next start on
it. Where the inner coordinate descent crawls (ijcnn1's correlated dense features: 20-30 passes an iteration near
the optimum, its summed violation not falling), this takes the run to LIBLINEAR's objective in 7-11 Newton steps
where the paper's rule alone took 12-15 (the iterations before the first switch are the paper's, pass for pass).
Then a backtracking line search on the step: lambda = 1, 1/2, ... until
P(w + lambda d) - P(w) <= sigma lambda (grad L' d + |w + d|_1 - |w|_1), sigma = 0.01, at most 20 halvings, which
costs no pass over the data (the margins move by lambda y_i x_i'd, kept; for the logistic loss a try's exp(-|t_i|)
and loss are kept too, so that a row's exponential and logarithm in the try are the iteration's only transcendental
work: the next iteration's tau_i and the loss before its line search come from them). When no step passes the line
search three times in a row with the inner problem solved to rounding (a ``tol_rel`` below what float64 certifies),
the run stops with stop reason max_iter. Every outer iteration starts with every feature (its gradient covers them
all anyway) and shrinks within itself those at w_j = 0 inside their interval by more than the last iteration's
largest violation / n, as the paper and LIBLINEAR do (keeping them out across iterations, as ``dcd_l1``'s passes do,
made the later Newton steps slower: w8a reached LIBLINEAR's objective at step 11 instead of 10). The stopping rule
(LIBLINEAR's -e: the outer iteration's summed minimum-norm subgradient below tol * min(positives, negatives) / n
times the first one's, ``common.l1_rule_scale``; for the squared hinge a tenth of that, ``SQUARED_HINGE_RULE``) and
the certified gap required by ``tol_rel`` as ``dcd_l1``'s (``common.RelativeRulePasses`` with ``every_pass_full``,
``common.run_dual_passes``); an outer iteration counts as a pass. The certificate is loose away from the optimum
(0.87 on a9a at 0.25% above it, LIBLINEAR's default stop): the schema requires ``tol_rel`` only when given. Deadline
and cancel are seen between outer iterations.
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
    l1_rule_scale,
    rng_state,
    run_dual_passes,
    shuffle_prefix,
)
from worker.solvers.data_passes import column_copy, column_counts, gather_columns
from worker.solvers.dcd_l1 import (
    SIGMA,
    SQUARED_HINGE_GAP_NOTE,
    columns,
    margins,
    newton_step,
    squared_hinge_objectives,
    subgradient_violation,
)
from worker.solvers.kernels import fast_exp


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


SQUARED_HINGE_RULE = 0.1
"""A factor on the squared hinge's stopping rule here: LIBLINEAR's -s 5 rule is CDN's, whose summed violation is
taken along a pass; at a Newton iterate the same threshold held far earlier (digits' zeros against the rest, -e
0.01: 18% above the optimum at Newton step 8, where CDN and LIBLINEAR stop within 1%); with a tenth of it the run
ends at step 13, at the optimum to 3e-6 (18.7974 against LIBLINEAR's 18.92)."""
LOGISTIC_GAP_NOTE = "objective minus the Fenchel dual value (binary entropies) of w's dual point scaled to feasibility"
MAX_INNER = 100
"""Most inner coordinate-descent passes of an outer iteration."""
MAX_LINE_SEARCH = 20
STALLED_SEARCHES = 3
"""Line searches failed in a row, the inner problem solved to rounding, after which the run stops (stop reason
max_iter: the rule did not hold; the gap says how far it got)."""
NU = 1e-12
"""Added to the quadratic's diagonal (its curvature along a feature no row has)."""
MAX_INNER_ON_HESSIAN = 1000
HESSIAN_INNER_SHARE = 1e-3
"""On the Hessian, the inner loop goes on until its summed violation is this share of the usual threshold."""
HESSIAN_AGAIN_AFTER = 20
"""An iteration whose inner loop ran this many passes on the Hessian has the next one start on it (its quadratic is
as badly conditioned)."""
DENSE_HESSIAN_FEATURES = 1024
"""Up to this many features (the bias's included), an inner loop that has run long enough goes on over the
quadratic's Hessian X'DX, formed once (``_dense_hessian``): a coordinate then costs the features, not its column."""
DENSE_HESSIAN_VALUES = 1 << 24
"""Up to this many stored values (the bias's included): forming H reads the rows, a copy of the columns made when
first needed (12 bytes a value, 200 MB at most)."""


@njit(cache=True)
def _dense_hessian(row_ptr, row_cols, row_vals, factors, H):
    """H = X'DX (without NU) over every feature, D_i = factors[i, 1]: each row's outer product, the upper triangle,
    then mirrored."""
    width = H.shape[0]
    flat = H.reshape(width * width)
    flat[:] = 0.0
    for i in range(row_ptr.shape[0] - 1):
        Di = factors[i, 1]
        end = row_ptr[i + 1]
        for a in range(row_ptr[i], end):
            base = row_cols[a] * width
            va = Di * row_vals[a]
            for b in range(a, end):  # columns ascending in a row: the upper triangle
                flat[base + row_cols[b]] += va * row_vals[b]
    for j in range(width):
        for k in range(j + 1, width):
            H[k, j] = H[j, k]


# The column loops index with unsigned integers (kernels.gather_dot): on w8a's columns the gradient's pass took 1.7x
# and the inner passes up to 1.5x their time with signed ones.


@njit(cache=True, inline="always")
def _column_gradient(col_ptr, col_rows, col_vals, factors, Dx, j):
    """(grad_j L, (X'DX)_jj + NU) over column j, D_i x_ij written to Dx alongside."""
    g = 0.0
    h = NU
    for p in range(np.uint64(col_ptr[j]), np.uint64(col_ptr[j + 1])):
        i = np.uint64(col_rows[p])
        v = col_vals[p]
        g += factors[i, 0] * v
        dv = factors[i, 1] * v
        Dx[p] = dv
        h += dv * v
    return g, h


@njit(cache=True, inline="always")
def _column_dot(col_ptr, col_rows, Dx, u, j, total):
    """``total`` + sum_i D_i x_ij u_i over column j (summed onto ``total``, in the column's order)."""
    for p in range(np.uint64(col_ptr[j]), np.uint64(col_ptr[j + 1])):
        total += Dx[p] * u[np.uint64(col_rows[p])]
    return total


@njit(cache=True, inline="always")
def _column_axpy(col_ptr, col_rows, col_vals, z, u, j):
    """u += z x_j over column j."""
    for p in range(np.uint64(col_ptr[j]), np.uint64(col_ptr[j + 1])):
        u[np.uint64(col_rows[p])] += z * col_vals[p]


@njit(cache=True)
def _newton_iteration(
    col_ptr, col_rows, col_vals, costs, t, w, index, active, shrink_at, n_rows, rng, state, work, factors, Dx, G, Hd, d,
    inner, dense, squared,
):  # fmt: skip
    """One outer iteration (module docstring) over the features index[:active], outer shrinking against
    ``shrink_at``: its gradient, violation and shrinking, the inner coordinate descent and the line search; the
    squared hinge if ``squared``, else the logistic loss.
    ``state``: [inner_tol, the first iteration's summed violation (-1 before it), line searches failed in a row at
    an inner_tol below 1e-15 (no step left above rounding), the loss at t, the last inner loop's passes on H];
    ``work``: 3 x n scratch (X d, exp(-|t|), the line search's exp(-|t + lambda X d|)); ``factors``: n x 2, each
    row's factor of the loss's gradient and D_i side by side (the gradient's pass reads both at a row: one cache
    line, not two; 0.95 ms a pass over w8a's columns against 1.7 from two arrays): each row's one exponential
    and one logarithm a line search's try are all the transcendental work of an iteration (the next one's tau and
    loss come from them); ``Dx``: D_i x_ij per stored entry (written with the gradient, read by the inner passes
    in column order instead of D at random rows); ``dense``: (the rows, made once when first needed; H; H d; the
    inner passes after which the Hessian pays, 0: never), sized 0 when there are too many features. Returns
    (active, largest violation, summed violation, True)."""
    rows, H, Hdir, dense_after = dense
    n = t.shape[0]
    u = work[0]
    e = work[1]
    e_try = work[2]
    for i in range(n):
        if squared:  # the generalized Hessian: 2 C_i on the rows inside the margin
            inside = 1.0 - t[i] > 0.0
            factors[i, 0] = -2.0 * costs[i] * (1.0 - t[i]) if inside else 0.0
            factors[i, 1] = 2.0 * costs[i] if inside else 0.0
        else:
            tau = 1.0 / (1.0 + e[i]) if t[i] >= 0.0 else e[i] / (1.0 + e[i])
            factors[i, 0] = -costs[i] * (1.0 - tau)
            factors[i, 1] = costs[i] * tau * (1.0 - tau)
        u[i] = 0.0
    for j in range(d.shape[0]):
        d[j] = 0.0
    worst = 0.0
    total = 0.0
    s = 0
    while s < active:
        j = index[s]
        g, h = _column_gradient(col_ptr, col_rows, col_vals, factors, Dx, j)
        G[j] = g
        Hd[j] = h
        violation, shrinkable = subgradient_violation(g, w[j], shrink_at / n_rows)
        if shrinkable:
            active -= 1
            index[s] = index[active]
            index[active] = j
            continue
        if violation > worst:
            worst = violation
        total += violation
        s += 1
    if state[1] < 0.0:
        state[1] = total
    # ---- the quadratic's minimizer, by coordinate descent over index[:active]
    inner_tol = state[0]
    for s in range(active):
        inner[s] = index[s]
    inner_active = active
    largest_old = np.inf
    passes = 0
    on_hessian = False
    hessian_from = 0
    limit = inner_tol * state[1]
    most = MAX_INNER
    while passes < most:
        if not on_hessian and dense_after > 0 and (passes >= dense_after or state[4] >= HESSIAN_AGAIN_AFTER):
            # on the Hessian from here (H d from d, u = X d at the end), and solved closely: a pass costs little now
            on_hessian = True
            hessian_from = passes
            limit *= HESSIAN_INNER_SHARE
            # as many passes more as cost about one pass over the columns (a pass on H costs active x width)
            affordable = col_rows.shape[0] // max(1, active * H.shape[0])
            most = passes + min(MAX_INNER_ON_HESSIAN, max(MAX_INNER - passes, affordable))
            row_ptr, row_cols, row_vals = rows
            if row_ptr[-1] == 0:  # the rows of the columns (y_i x_ij, the bias's included), columns ascending
                row_counts = np.empty(n + 1, np.int64)
                column_counts(col_rows, n, row_counts)
                column_copy(col_ptr, col_rows, col_vals, row_counts, n, row_ptr, row_cols, row_vals)
            _dense_hessian(row_ptr, row_cols, row_vals, factors, H)
            for j in range(H.shape[0]):
                acc = 0.0
                for k in range(H.shape[0]):
                    acc += H[j, k] * d[k]
                Hdir[j] = acc
        passes += 1
        shuffle_prefix(inner, inner_active, rng)
        largest = 0.0
        summed = 0.0
        s = 0
        while s < inner_active:
            j = inner[s]
            gq = G[j]
            if on_hessian:
                gq += Hdir[j]
            else:
                gq = _column_dot(col_ptr, col_rows, Dx, u, j, gq)
            h = Hd[j]
            wpd = w[j] + d[j]
            violation, shrinkable = subgradient_violation(gq, wpd, largest_old / n_rows)
            if shrinkable:
                inner_active -= 1
                inner[s] = inner[inner_active]
                inner[inner_active] = j
                continue
            if violation > largest:
                largest = violation
            summed += violation
            z, to_zero = newton_step(gq, h, wpd)
            if abs(z) > 1e-12 or (to_zero and wpd != 0.0):
                z = min(max(z, -10.0), 10.0)
                old_d = d[j]
                # to zero exactly: w_j + d_j == 0 in floating point (a residue would read as a weight's violation)
                d[j] = -w[j] if to_zero and abs(z) < 10.0 else old_d + z
                z = d[j] - old_d
                if on_hessian:
                    for k in range(H.shape[0]):
                        Hdir[k] += z * H[k, j]
                else:
                    _column_axpy(col_ptr, col_rows, col_vals, z, u, j)
            s += 1
        if summed <= limit:
            if inner_active == active:
                break
            for s in range(active):  # every feature back for a last inner check
                inner[s] = index[s]
            inner_active = active
            largest_old = np.inf
            continue
        largest_old = largest
    state[4] = passes - hessian_from if on_hessian else 0.0
    if on_hessian:  # the margins' change X d, which the passes on the Hessian did not keep
        gather_columns(col_ptr, col_rows, col_vals, d, d.shape[0], 0.0, u)
    if passes == 1:
        state[0] = inner_tol * 0.25
    # ---- the line search on w + lambda d (margins t + lambda u)
    delta = 0.0
    for s in range(active):
        j = index[s]
        delta += G[j] * d[j] + abs(w[j] + d[j]) - abs(w[j])
    loss_old = state[3]
    step = 1.0
    for _ in range(MAX_LINE_SEARCH):
        change = 0.0
        for s in range(active):
            j = index[s]
            change += abs(w[j] + step * d[j]) - abs(w[j])
        loss = 0.0
        if squared:
            for i in range(n):
                inside = 1.0 - (t[i] + step * u[i])
                if inside > 0.0:
                    loss += costs[i] * inside * inside
        else:
            for i in range(n):  # (a loop of its own: fast_exp vectorizes)
                e_try[i] = fast_exp(-abs(t[i] + step * u[i]))
            for i in range(n):  # log(1 + exp(-m)) = log1p(exp(-|m|)) + max(-m, 0)
                loss += costs[i] * (math.log1p(e_try[i]) + max(-(t[i] + step * u[i]), 0.0))
        if change + loss - loss_old <= SIGMA * step * delta:
            for s in range(active):
                j = index[s]
                w[j] = 0.0 if step == 1.0 and d[j] == -w[j] else w[j] + step * d[j]
            for i in range(n):
                t[i] += step * u[i]
                e[i] = e_try[i]  # (the squared hinge's are unused)
            state[3] = loss
            break
        step *= 0.5
    else:  # no step passed: the next quadratic is solved more closely; at rounding's scale, the run has stalled
        state[0] = inner_tol * 0.25
        if state[0] < 1e-15:
            state[2] += 1.0
        return active, worst, total, True
    state[2] = 0.0
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


def _dense_room(col_ptr, col_rows, n: int, width: int, memory_bytes: int | None = None):
    """``_newton_iteration``'s ``dense``: room for the rows, H and H d, and the inner passes after which forming H
    costs no more than the passes so far did (a pass reads every stored value twice, H each row's pairs, the rows
    once); sized 0 and never, where ``dense_hessian_fits`` says no."""
    nnz = int(col_ptr[-1])
    if not dense_hessian_fits(width, nnz, memory_bytes):
        rows = (np.zeros(1, np.int64), np.empty(0, col_rows.dtype), np.empty(0))
        return rows, np.empty((0, 0)), np.empty(0), 0
    rows = (np.zeros(n + 1, np.int64), np.empty(nnz, col_rows.dtype), np.empty(nnz))  # (filled when first needed)
    pairs = nnz * (nnz / max(n, 1) + 1.0) / 2.0 + width * width  # each row's pairs, and H d
    return rows, np.empty((width, width)), np.empty(width), max(1, math.ceil((pairs + 2.0 * nnz) / (2.0 * nnz)))


def dense_hessian_fits(width: int, stored_values: int, memory_bytes: int | None = None) -> bool:
    """Whether the dense Hessian path may run: ``DENSE_HESSIAN_FEATURES`` features with the bias's,
    ``DENSE_HESSIAN_VALUES`` stored values with its column and, given what the training may hold (``memory_bytes``),
    room for the data, its columns and the rows H is formed from (12 bytes a stored value each) and H."""
    if memory_bytes is not None and 3 * 12 * stored_values + 8 * width * width > memory_bytes:
        return False
    return width <= DENSE_HESSIAN_FEATURES and 0 < stored_values <= DENSE_HESSIAN_VALUES


def suits(n_features: int, stored_values: int, B: float, memory_bytes: int | None = None) -> bool:
    """Whether the squared hinge trains here rather than by ``dcd_l1``'s CDN: where the dense Hessian fits
    (``dense_hessian_fits``; CDN needs neither the rows nor H)."""
    return dense_hessian_fits(int(n_features) + (1 if B > 0.0 else 0), stored_values, memory_bytes)


def solve_l1_glmnet(
    indptr, indices, data, y, n_features: int, C_neg: float, C_pos: float, B: float, params, loss: str, control=None,
    memory_bytes: int | None = None,
) -> SolverResult:  # fmt: skip
    """Train the L1-regularized ``loss`` (``logistic`` or ``squared_hinge``; module docstring); arguments and result
    as ``dcd_l1.solve_l1``'s; ``memory_bytes``: what the training may hold (None: no limit), which the dense Hessian
    path must fit in. With the logistic loss the decision value w'x + b is the log-odds of the positive label."""
    control = control or SolverControl()
    started = time.perf_counter()
    squared = loss == "squared_hinge"
    y = np.ascontiguousarray(y, dtype=np.float64)
    n = y.shape[0]
    col_ptr, col_rows, col_vals = columns(indptr, indices, data, n_features, B, y)  # y_i x_ij
    width = col_ptr.shape[0] - 1
    costs = np.where(y > 0, C_pos, C_neg).astype(np.float64)
    t = np.zeros(n)
    w = np.zeros(width)
    index = np.arange(width, dtype=np.int64)
    rng = rng_state(int(params.seed))
    # inner_tol, the first iteration's summed violation, stalled line searches, the loss at t = 0, the last inner
    # loop's passes on the Hessian
    loss_at_zero = float(costs.sum()) * (1.0 if squared else math.log(2.0))
    state = np.array([1.0, -1.0, 0.0, loss_at_zero, 0.0])
    work = np.zeros((3, n))
    factors = np.empty((n, 2))  # each row's gradient factor and D_i
    Dx = np.empty(col_vals.size)  # D_i x_ij per stored entry, column order: the inner passes read it in order
    work[1] = 1.0  # exp(-|t|) at t = 0
    G, Hd, d = np.zeros(width), np.zeros(width), np.zeros(width)
    inner = np.zeros(width, dtype=np.int64)
    dense = _dense_room(col_ptr, col_rows, n, width, memory_bytes)
    arrays = (col_ptr, col_rows, col_vals, costs, t, w, index)
    room = (n, rng, state, work, factors, Dx, G, Hd, d, inner, dense, squared)
    passes = RelativeRulePasses(
        width,
        lambda active, shrink_at, resume, stop_at: _newton_iteration(*arrays, active, shrink_at, *room),
        rule_scale=l1_rule_scale(y) * (SQUARED_HINGE_RULE if squared else 1.0),
        every_pass_full=True,
    )

    def objectives():
        if squared:
            primal, dual = squared_hinge_objectives(col_ptr, col_rows, col_vals, costs, 1.0 - t, w)
        else:
            primal, dual = _objectives(col_ptr, col_rows, col_vals, costs, t, w)
        return float(primal), float(dual)

    setup = time.perf_counter() - started
    run = run_dual_passes(
        passes.one_pass, passes.after_pass, objectives, lambda: passes.active, params, control,
        stalled=lambda: state[2] >= STALLED_SEARCHES,
    )  # fmt: skip
    w_full = w if B > 0.0 else np.append(w, 0.0)
    note = SQUARED_HINGE_GAP_NOTE if squared else LOGISTIC_GAP_NOTE
    return run.result(w_full, B, setup, note)


def primal_value(indptr, indices, data, y, w_full, B: float, C_neg: float, C_pos: float) -> float:
    """The logistic loss's P(w) = |w|_1 + sum_i C_i log(1 + exp(-y_i w'x_i)) (``w_full``: the weights, then w_B when
    B > 0)."""
    costs = np.where(np.asarray(y) > 0, C_pos, C_neg)
    values = margins(indptr, indices, data, w_full, B)
    return float(np.abs(w_full).sum() + costs @ np.logaddexp(0.0, -np.asarray(y) * values))

"""Dual coordinate descent for L2-regularized logistic regression: dcd's ``loss: logistic`` (LIBLINEAR's -s 7).

Problem
-------
Rows x_i (CSR), labels y_i in {-1, +1}, per-row costs C_i = C * class_weight(y_i); in the service's convention

    min_w  P(w) = 0.5 * |w|^2 + sum_i C_i * log(1 + exp(-y_i w'x_i))

with ``bias=B`` the virtual constant feature of ``worker.solvers.dcd`` (w's last slot is w_B, b = B * w_B). Its
dual (Yu, Huang and Lin, "Dual coordinate descent methods for logistic regression and maximum entropy models",
Machine Learning 85, 2011, Section 3, eq. (3.2)) is

    min_alpha  f(alpha) = 0.5 * alpha' Q alpha + sum_i [alpha_i log alpha_i + (C_i - alpha_i) log(C_i - alpha_i)],
    0 <= alpha_i <= C_i,   Q_ij = y_i y_j [x_i; B]'[x_j; B],   w = sum_i y_i alpha_i [x_i; B].

By weak duality every alpha gives a lower bound of the optimum,

    D(alpha) = sum_i C_i H(alpha_i / C_i) - 0.5 * |w(alpha)|^2 <= P(w*) <= P(w),

H(p) = -p log p - (1 - p) log(1 - p) the binary entropy (nats): D = -f(alpha) + sum_i C_i log C_i. The trace's
``dual``, the certified gap and ``tol_rel`` use it exactly as dcd does for the hinge losses.

Algorithm
---------
The paper's Algorithm 3: passes over the rows in a random order (the seeded shuffle of ``common.shuffle_prefix``);
at row i the one-variable sub-problem (Section 3.2), with a = Q_ii = |x_i|^2 + B^2 and b = y_i w'x_i,

    min_s  g(s) = s log s + (C_i - s) log(C_i - s) + a/2 (s - alpha_i)^2 + b (s - alpha_i),   0 < s < C_i,

is solved by the paper's modified Newton method (Algorithm 4). g is strictly convex and
g'(s) = log(s / (C_i - s)) + a (s - alpha_i) + b. Since g'(C_i/2) = a (C_i/2 - alpha_i) + b, its sign says which
half holds the minimum: g'(C_i/2) >= 0, in (0, C_i/2], solved for s; else in [C_i/2, C_i), solved for
t = C_i - s, the same problem with alpha_i -> C_i - alpha_i and b -> -b. On the half chosen, v in (0, C_i/2] and
Newton steps v <- v - g'(v) / g''(v), g''(v) = a + C_i / (v (C_i - v)), start from min(current value, C_i/2); a
step that would leave (0, C_i/2] ... to v <= 0 is replaced by v <- 0.1 v (the paper's eta). g' is concave and
increasing on the half, so from the left of the root the steps rise to it monotonically. Every row keeps the
pair (alpha_i, C_i - alpha_i) as two numbers, so that alpha_i close to C_i keeps its distance to the bound (the
log terms need it). A sub-problem stops when |g'(v)| <= the inner tolerance, which starts at INNER_TOL_START and is divided by 10 after
every pass whose sub-problems took at most one Newton step for ten rows, down to min(INNER_TOL_MIN, tol) (early
passes need not solve their sub-problems closely; later ones must, or the passes stall at the inner tolerance).

alpha starts strictly inside the box, at min(1e-3 C_i, 1e-8) (w near 0): the log terms have no finite derivative
at the bounds, and the optimum is never on them (each alpha_i* = C_i sigma(-y_i w*'x_i) is in (0, C_i)).

Stopping: after a pass, with G_max its largest |g'_i(alpha_i)| at the visits (the dual's gradient,
log(alpha_i / (C_i - alpha_i)) + y_i w'x_i), ``tol`` as LIBLINEAR's -e for -s 7: G_max < tol. Then the duality gap must certify the model too (``tol_rel``, default 0.01, as in dcd): when it does not,
the threshold is divided by 10 and the passes go on. No shrinking (no alpha_i reaches a bound).
"""

from __future__ import annotations

import math
import time

import numpy as np
from numba import njit

from worker.solvers.common import SolverControl, SolverResult, monotonic_s, rng_state, run_dual_passes, shuffle_prefix
from worker.solvers.dcd_passes import PREFETCH_AHEAD, prefetch, prefetch_row_ahead

INNER_TOL_START = 1e-2
"""Inner (Newton) tolerance of the first pass on |g'|."""
INNER_TOL_MIN = 1e-8
"""The inner tolerance never goes below this (or ``tol``, when smaller)."""
MAX_NEWTON = 100
"""Newton steps at most per sub-problem."""
ETA = 0.1
"""A Newton step that would leave the half-interval shrinks v by this factor instead (paper's Algorithm 4)."""
START = 1e-8
"""alpha_i starts at min(1e-3 C_i, START)."""


@njit(cache=True)
def _diagonal(indptr, indices, data, B, QD):
    """Q_ii = |x_i|^2 + B^2."""
    for i in range(indptr.shape[0] - 1):
        s = B * B
        for p in range(indptr[i], indptr[i + 1]):
            s += data[p] * data[p]
        QD[i] = s


@njit(cache=True)
def _newton_half(v_now, grad_now, a, b, C, tol):
    """The minimum of g on (0, C/2] (module docstring), by Newton steps from min(v_now, C/2); v_now: the row's
    current value on this half (alpha_i, or C_i - alpha_i), ``grad_now`` g' there (the pass has it), b already
    signed for the half. Returns (v, Newton steps taken)."""
    half = 0.5 * C
    v = v_now
    grad = grad_now
    if v > half:
        v = half
        grad = a * (v - v_now) + b  # log(v / (C - v)) = 0 at C/2
    steps = 0
    for _ in range(MAX_NEWTON):
        if abs(grad) <= tol:
            break
        steps += 1
        u = C - v
        step = v - grad / (a + C / (v * u))
        if step <= 0.0:
            v *= ETA
        elif step > half:
            v = half
        else:
            v = step
        grad = math.log(v / (C - v)) + a * (v - v_now) + b
    return v, steps


@njit(cache=True)
def _pass(indptr, indices, data, y, QD, B, C_neg, C_pos, alpha, alpha_c, w, index, rng, resume, inner_tol, stop_at):
    """One pass (or a slice of one: ``resume`` = [next position, G_max so far, Newton steps so far], position < 0
    for a new pass, like ``dcd_passes._dcd_epoch``). Returns (G_max, Newton steps, done)."""
    n = indptr.shape[0] - 1
    nf = w.shape[0] - 1
    if resume[0] < 0.0:
        shuffle_prefix(index, n, rng)
        s = 0
        gmax = 0.0
        steps = 0
    else:
        s = int(resume[0])
        gmax = resume[1]
        steps = int(resume[2])
    first = s
    while s < n:
        if (s & 1023) == 0 and s - first >= 1024 and monotonic_s() >= stop_at:
            resume[0] = s
            resume[1] = gmax
            resume[2] = steps
            return gmax, steps, False
        ahead = s + PREFETCH_AHEAD
        if ahead < n:  # (as dcd's passes: the row a few steps on, while this one is worked)
            j = prefetch_row_ahead(indptr, indices, data, index, ahead, n)
            prefetch(alpha, j)
            prefetch(alpha_c, j)
            prefetch(QD, j)
            prefetch(y, j)
        i = index[s]
        yi = y[i]
        C = C_pos if yi > 0.0 else C_neg
        start = np.uint64(indptr[i])  # (unsigned indices: kernels.gather_dot)
        end = np.uint64(indptr[i + 1])
        wx = w[nf] * B
        for p in range(start, end):
            wx += w[np.uint64(indices[p])] * data[p]
        b = yi * wx
        a = QD[i]
        ai = alpha[i]
        ci = alpha_c[i]
        grad = math.log(ai / ci) + b
        if abs(grad) > gmax:
            gmax = abs(grad)
        if a * (0.5 * C - ai) + b >= 0.0:  # the minimum in (0, C/2]: solve for alpha_i
            new, taken = _newton_half(ai, grad, a, b, C, inner_tol)
            new_c = C - new
        else:  # in [C/2, C): solve for C - alpha_i
            new_c, taken = _newton_half(ci, -grad, a, -b, C, inner_tol)
            new = C - new_c
        steps += taken
        d = (new - ai) * yi
        alpha[i] = new
        alpha_c[i] = new_c
        if d != 0.0:
            for p in range(start, end):
                w[np.uint64(indices[p])] += d * data[p]
            w[nf] += d * B
        s += 1
    resume[0] = -1.0
    return gmax, steps, True


@njit(cache=True)
def primal_value(indptr, indices, data, y, w, B, C_neg, C_pos):
    """P(w) = 0.5 |w|^2 + sum_i C_i log(1 + exp(-y_i w'x_i)), without overflow."""
    nf = w.shape[0] - 1
    reg = 0.0
    for j in range(w.shape[0]):
        reg += w[j] * w[j]
    loss = 0.0
    for i in range(indptr.shape[0] - 1):
        wx = w[nf] * B
        for p in range(indptr[i], indptr[i + 1]):
            wx += w[indices[p]] * data[p]
        z = -y[i] * wx
        term = z + math.log1p(math.exp(-z)) if z > 0.0 else math.log1p(math.exp(z))
        loss += (C_pos if y[i] > 0 else C_neg) * term
    return 0.5 * reg + loss


@njit(cache=True)
def _dual(alpha, alpha_c, y, w, C_neg, C_pos):
    """D(alpha) = sum_i C_i H(alpha_i / C_i) - 0.5 |w|^2, from the pairs (alpha_i, C_i - alpha_i)."""
    reg = 0.0
    for j in range(w.shape[0]):
        reg += w[j] * w[j]
    entropy = 0.0
    for i in range(alpha.shape[0]):
        C = C_pos if y[i] > 0 else C_neg
        a = alpha[i]
        c = alpha_c[i]
        entropy -= a * math.log(a / C) + c * math.log(c / C)
    return entropy - 0.5 * reg


@njit(cache=True)
def _build_w(indptr, indices, data, y, alpha, B, w):
    """w = sum_i y_i alpha_i [x_i; B]."""
    nf = w.shape[0] - 1
    w[:] = 0.0
    for i in range(indptr.shape[0] - 1):
        a = alpha[i] * y[i]
        for p in range(indptr[i], indptr[i + 1]):
            w[indices[p]] += a * data[p]
        w[nf] += a * B


def solve_logistic(
    indptr,
    indices,
    data,
    y,
    n_features: int,
    C_neg: float,
    C_pos: float,
    B: float,
    params,
    control: SolverControl,
    alpha0: np.ndarray | None = None,
) -> SolverResult:
    """Train a binary L2-regularized logistic regression by dual coordinate descent (module docstring).

    The arguments are ``dcd.solve_dcd``'s, checked there: C_neg, C_pos the costs of rows with y = -1 and +1, B the
    bias feature's value (0: none), ``params`` the job's dcd parameters (tol, tol_rel, max_iter, seed, trace_every,
    trace_budget); ``alpha0`` a warm start (dcd's checks done), moved strictly inside the box.
    ``extra["alpha"]`` holds the final dual variables."""
    n = indptr.shape[0] - 1
    costs = np.where(y > 0, C_pos, C_neg)
    inside = np.minimum(1e-3 * costs, START)
    alpha = inside.copy() if alpha0 is None else np.clip(alpha0, inside, costs - inside)
    alpha_c = costs - alpha
    started = time.perf_counter()
    w = np.zeros(n_features + 1)
    _build_w(indptr, indices, data, y, alpha, B, w)
    QD = np.empty(n)
    _diagonal(indptr, indices, data, B, QD)
    index = np.arange(n, dtype=np.int32 if n < 2**31 else np.int64)
    rng = rng_state(int(params.seed))
    resume = np.array([-1.0, 0.0, 0.0])
    inner = {"tol": INNER_TOL_START, "floor": min(INNER_TOL_MIN, float(params.tol)), "steps": 0}

    def one_pass(stop_at):
        gmax, inner["steps"], done = _pass(
            indptr, indices, data, y, QD, B, C_neg, C_pos, alpha, alpha_c, w, index, rng, resume, inner["tol"], stop_at
        )
        return gmax, done

    def after_pass(gmax, threshold):
        if inner["steps"] <= n // 10:  # the sub-problems were cheap: solve them closer from now on
            inner["tol"] = max(inner["floor"], 0.1 * inner["tol"])
        return gmax < threshold

    def objectives():
        return (
            float(primal_value(indptr, indices, data, y, w, B, C_neg, C_pos)),
            float(_dual(alpha, alpha_c, y, w, C_neg, C_pos)),
        )

    setup = time.perf_counter() - started
    run = run_dual_passes(one_pass, after_pass, objectives, lambda: n, params, control)
    return run.result(
        w,
        B,
        setup,
        "objective minus the entropy dual of the returned dual variables (weak duality)",
        alpha=alpha,
        active_size=n,
    )

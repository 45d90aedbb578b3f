"""The master problem of the sampled-cut solver (paper 003's SOLVE_QP, OP2) by a primal active-set method.

Problem (OP2 in its dual, as in ``reduced_qp``): over the t cuts,

    max_alpha  D(alpha) = h' alpha - 0.5 alpha' H alpha   s.t.  alpha >= 0,  sum(alpha) <= C,

with the slack s = C - sum(alpha) as one more coordinate (gradient 0). The gradient is g = h - H alpha,
G = max(0, max_j g_j) is the master's xi at w = -sum_k alpha_k g_k, and the duality gap is
sum_j alpha_j (G - g_j) + s G, the same measure and the same stopping test as ``reduced_dual_smo``.

Why not SMO alone. Sampled cuts are many (150-300 in the working set on ijcnn1) and nearly parallel
(each is a mean over a few hundred random rows of nearly the same loss-making set), so H is badly
conditioned and two-coordinate steps zigzag: on 49,990 ijcnn1 rows the SMO master took 2.5 million
steps over 436 solves (5,300 per solve, 28-35% of the training time at r = 400 and 95% at r = 100).

Method (the textbook primal active-set method for a convex QP, e.g. Nocedal & Wright, Numerical
Optimization, Section 16.5, specialized to the scaled simplex). The free set F holds the cuts with
alpha > 0 (plus, when free, the slack). On F the equality-constrained problem is solved exactly:

* slack free (sum(alpha) < C, xi = 0):   H_FF x = h_F;
* slack at 0 (sum(alpha) = C):           H_FF x + nu 1 = h_F,  1'x = C,  so x = u - nu v with
  H_FF u = h_F, H_FF v = 1, nu = (1'u - C) / 1'v; at that point every free gradient equals nu = xi.

The iterate moves toward that point and stops at the first bound it meets (that coordinate leaves F).
At a face optimum the coordinate of largest g_j - xi outside F enters F (or the slack, when nu < 0);
the solve ends when the gap is <= tol. The Cholesky factor L of H_FF is kept across solves and updated
in O(|F|^2): a row appended when a cut enters, Givens rotations when one leaves. A cut that would make
H_FF numerically singular (its new pivot below 1e-10 of its diagonal) ends the active-set solve, and
the caller finishes with SMO from the same alpha (any alpha is a warm start for SMO).

Nothing runs in parallel (|F|^2 work per change, independent of n).
"""

from __future__ import annotations

import numpy as np
from numba import njit

ACTIVE_SET_OK = 0
ACTIVE_SET_FAILED = 1  # singular pivot, no progress or too many changes: the caller finishes with SMO
_PIVOT_REL = 1e-10


@njit(cache=True)
def _chol_solve(L, m, rhs, out, tmp):
    """out = (L L')^{-1} rhs for the leading m x m block of L."""
    for i in range(m):
        acc = rhs[i]
        for k in range(i):
            acc -= L[i, k] * tmp[k]
        tmp[i] = acc / L[i, i]
    for i in range(m - 1, -1, -1):
        acc = tmp[i]
        for k in range(i + 1, m):
            acc -= L[k, i] * out[k]
        out[i] = acc / L[i, i]


@njit(cache=True)
def _chol_append(L, m, H, free, j):
    """Append cut j to the factor of H_FF (rows/columns in the order of ``free``); False if the pivot is
    numerically zero (H_FF + j singular), in which case L is unchanged."""
    for i in range(m):
        acc = H[free[i], j]
        for k in range(i):
            acc -= L[i, k] * L[m, k]
        L[m, i] = acc / L[i, i]
    d2 = H[j, j]
    for k in range(m):
        d2 -= L[m, k] * L[m, k]
    if not (d2 > _PIVOT_REL * H[j, j]):
        return False
    L[m, m] = np.sqrt(d2)
    for k in range(m + 1, L.shape[1]):
        L[m, k] = 0.0
    return True


@njit(cache=True)
def _chol_delete(L, m, p):
    """Remove row/column p from the m x m factor (rows shifted up, Givens rotations restore the triangle)."""
    for i in range(p, m - 1):
        for k in range(i + 2):
            L[i, k] = L[i + 1, k]
    for k in range(p, m - 1):
        a = L[k, k]
        b = L[k, k + 1]
        r = np.sqrt(a * a + b * b)
        c = a / r
        s = b / r
        for i in range(k, m - 1):
            x = L[i, k]
            z = L[i, k + 1]
            L[i, k] = c * x + s * z
            L[i, k + 1] = -s * x + c * z
        L[k, k + 1] = 0.0
    for i in range(m):
        L[i, m - 1] = 0.0 if i < m - 1 else L[i, m - 1]
    for k in range(m):
        L[m - 1, k] = 0.0


@njit(cache=True)
def master_refactor(H, alpha, t, L, free):
    """Factor H_FF from scratch for F = {k < t : alpha_k > 0}; returns |F|, or -1 if H_FF is singular."""
    m = np.int64(0)  # (a constant would compile _chol_append again for m = 0)
    for k in range(t):
        if alpha[k] > 0.0:
            if not _chol_append(L, m, H, free, k):
                return -1
            free[m] = k
            m += 1
    return m


@njit(cache=True)
def _gradient(H, h, alpha, t, free, m, g):
    for j in range(t):
        acc = h[j]
        for q in range(m):
            k = free[q]
            acc -= H[j, k] * alpha[k]
        g[j] = acc


@njit(cache=True)
def _gap(alpha, g, t, C):
    total = 0.0
    G = 0.0
    for j in range(t):
        total += alpha[j]
        if g[j] > G:
            G = g[j]
    s = max(C - total, 0.0)
    gap = s * G
    for j in range(t):
        if alpha[j] > 0.0:
            gap += alpha[j] * (G - g[j])
    return gap, G


@njit(cache=True)
def master_active_set(H, h, alpha, t, C, tol, L, free, m, max_changes, g):
    """Solve OP2 from the feasible ``alpha`` (warm start; F = ``free[:m]`` with its factor L, which must
    be the cuts with alpha > 0). Returns (status, m, changes, dual, gap, G); alpha, free, L, g updated
    in place (g = h - H alpha on return)."""
    n_cap = L.shape[0]
    u = np.empty(n_cap)
    v = np.empty(n_cap)
    tmp = np.empty(n_cap)
    hF = np.empty(n_cap)
    ones = np.ones(n_cap)
    total = 0.0
    for q in range(m):
        total += alpha[free[q]]
    slack_free = total < C * (1.0 - 1e-12)
    changes = 0
    status = ACTIVE_SET_OK
    _gradient(H, h, alpha, t, free, m, g)
    gap, G = _gap(alpha, g, t, C)
    while gap > tol:
        if changes >= max_changes:
            status = ACTIVE_SET_FAILED
            break
        changes += 1
        # the optimum of the face F (slack free: xi = 0; slack at 0: the free gradients all equal nu)
        nu = 0.0
        if m > 0:
            for q in range(m):
                hF[q] = h[free[q]]
            _chol_solve(L, m, hF, u, tmp)
            if not slack_free:
                _chol_solve(L, m, ones, v, tmp)
                su = 0.0
                sv = 0.0
                for q in range(m):
                    su += u[q]
                    sv += v[q]
                nu = (su - C) / sv
                for q in range(m):
                    u[q] -= nu * v[q]
        # move toward it until the first bound (a free alpha or the slack reaches 0)
        step = 1.0
        block = -1  # position in free, or m for the slack
        total = 0.0
        target_total = 0.0
        for q in range(m):
            a = alpha[free[q]]
            total += a
            target_total += u[q]
            if u[q] < a:
                ratio = a / (a - u[q])
                if ratio < step:
                    step = ratio
                    block = q
        if slack_free and target_total > C:
            ratio = (C - total) / (target_total - total)
            if ratio < step:
                step = max(ratio, 0.0)
                block = m
        for q in range(m):
            k = free[q]
            alpha[k] += step * (u[q] - alpha[k])
            if block < 0 and alpha[k] <= 0.0:
                block = q  # a full step that ends on a bound
        if block >= 0:
            if block == m:
                slack_free = False
            else:
                alpha[free[block]] = 0.0
            # every free alpha at or below 0 (the blocking one, and ties) leaves F
            for q in range(m - 1, -1, -1):
                if alpha[free[q]] <= 0.0:
                    alpha[free[q]] = 0.0
                    _chol_delete(L, m, q)
                    for r in range(q, m - 1):
                        free[r] = free[r + 1]
                    m -= 1
            if m == 0:
                slack_free = True
            total = 0.0
            for q in range(m):
                total += alpha[free[q]]
            if total > C:  # rounding after the slack reached 0
                scale = C / total
                for q in range(m):
                    alpha[free[q]] *= scale
            continue
        # at the face optimum: the gradient, the gap, and the coordinate that enters
        _gradient(H, h, alpha, t, free, m, g)
        gap, G = _gap(alpha, g, t, C)
        if gap <= tol:
            break
        xi = 0.0 if slack_free else nu
        best = 0.0
        enter = -1
        for j in range(t):
            if alpha[j] == 0.0 and g[j] - xi > best:
                best = g[j] - xi
                enter = j
        if not slack_free and -nu > best:
            slack_free = True  # the slack enters: sum(alpha) may fall below C
            continue
        if enter < 0 or m >= n_cap or not _chol_append(L, m, H, free, enter):
            status = ACTIVE_SET_FAILED
            break
        free[m] = enter
        m += 1
    _gradient(H, h, alpha, t, free, m, g)
    gap, G = _gap(alpha, g, t, C)
    dual = 0.0
    for j in range(t):
        dual += 0.5 * alpha[j] * (h[j] + g[j])
    return status, m, changes, dual, gap, G

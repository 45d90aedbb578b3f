"""The reduced (master) problem of the cutting-plane solvers, solved in its dual over the cuts.

Problem. Every cutting-plane solver here (``cpa``, ``ocas``) approximates a convex risk R(w) >= 0 from
below by cuts R(w) >= b_j - <z_j, w>, j = 1..t, and solves the reduced problem

    min_w  F_t(w) = 0.5*|w|^2 + C * max(0, max_j (b_j - <z_j, w>))                              (P_t)

which is equation (3) of Franc & Sonnenburg 2008 (paper 000) with R_t of (6), and Line 4 of
Algorithms 1 and 2 of Joachims 2006 (paper 001, OP2/OP5 restricted to the working set W), all in the
service's convention (C multiplies a *sum* of losses; z_j = -a_j in paper 000's notation, so that
the cut reads like OP2's constraint (1/n) w^T sum_i c_i y_i x_i >= (1/n) sum_i c_i - xi scaled by n).
Writing (P_t) with a slack, min 0.5|w|^2 + C xi s.t. xi >= b_j - <z_j, w>, xi >= 0, the Lagrangian
0.5|w|^2 + C xi - sum_j alpha_j (xi - b_j + <z_j, w>) - mu xi gives w = sum_j alpha_j z_j and
C = sum_j alpha_j + mu, hence the dual (paper 001's OP3 over the working set, rescaled):

    max_alpha  D(alpha) = sum_j alpha_j b_j - 0.5 * alpha^T H alpha,   H_jk = <z_j, z_k>,
    s.t.       alpha_j >= 0,  sum_j alpha_j <= C.                                               (D_t)

The feasible set is a scaled simplex once the slack ``s = C - sum_j alpha_j`` (the multiplier of the
zero cut xi >= 0, gradient 0) is counted as one more coordinate. With the gradient g = b - H alpha
(g_slack = 0) and G = max(0, max_j g_j), the duality gap of (P_t)/(D_t) at w = sum_j alpha_j z_j is

    F_t(w) - D(alpha) = sum_j alpha_j (G - g_j) + s * G        (>= 0, and 0 exactly at the optimum),

because <z_j, w> = (H alpha)_j, |w|^2 = alpha^T H alpha and max(0, max_j (b_j - <z_j, w>)) = G.

Algorithm. Sequential minimal optimization on the simplex: move mass delta from a coordinate j
with alpha_j > 0 to the coordinate i of largest gradient, delta = min(alpha_j, (g_i - g_j)/eta_ij)
with eta_ij = H_ii + H_jj - 2 H_ij = |z_i - z_j|^2, and j chosen by the second-order rule of Fan, Chen
& Lin 2005 (the "improved SMO" that paper 000, Section 4, uses for its reduced problem): among the
coordinates that can decrease and have g_j < g_i, maximise (g_i - g_j)^2 / eta_ij. Each step raises
D, so warm-starting from the previous alpha (a new cut enters with alpha = 0, which leaves D
unchanged) makes the reduced objective non-decreasing over the outer iterations, as both papers'
convergence proofs require. The solve stops when the gap above is <= ``tol`` (absolute, in objective
units; the callers set it to a small fraction of the current outer gap) or after ``max_steps`` steps.

Working set. Cuts whose alpha has been exactly 0 for more than ``max_inactive`` consecutive solves
are dropped (paper 003, Yu & Joachims 2008, Section 6, removes cuts inactive for 20 iterations; we
default to 50 in the callers because a cut costs only one dense row here and dropping a cut that
becomes active again costs a full pass over the data). Dropping a cut with alpha = 0 does not change
D, so the lower bound stays monotone.

Inputs and outputs. ``ReducedProblem(C)`` holds the Gram matrix of the cuts, their offsets b_j, the
warm-started alpha and, per cut, the slot where the caller keeps the cut itself (``cut_store``: as a
dense vector, or as its coefficients over the rows and its outputs). ``add_cut(h_row, h_self, b, slot)``,
``solve(tol)`` -> (D, gap, steps) and ``drop_inactive(max_inactive)`` -> freed slots are the whole
interface.
Nothing here runs in parallel (the reduced problem is O(t^2) per step and independent of n).
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def reduced_dual_smo(H, b, alpha, t, C, tol, max_steps, g):
    """SMO on max b^T alpha - 0.5 alpha^T H alpha, alpha >= 0, sum(alpha) <= C (first t coordinates).

    ``alpha`` is updated in place (warm start); ``g`` is scratch of length >= t and holds the
    gradient b - H alpha on return. Returns (steps, dual value, gap, G) with G = max(0, max_j g_j).
    """
    # fresh gradient (no drift carried from the previous solve)
    total = 0.0
    for j in range(t):
        acc = b[j]
        for k in range(t):
            if alpha[k] != 0.0:
                acc -= H[j, k] * alpha[k]
        g[j] = acc
        total += alpha[j]
    s = C - total
    if s < 0.0:
        s = 0.0
    steps = 0
    gap = 0.0
    G = 0.0
    while True:
        # the coordinate that gains: largest gradient (slack = index t, gradient 0)
        i = t
        G = 0.0
        for j in range(t):
            if g[j] > G:
                G = g[j]
                i = j
        gap = s * G
        for j in range(t):
            if alpha[j] > 0.0:
                gap += alpha[j] * (G - g[j])
        if gap <= tol or steps >= max_steps:
            break
        # the coordinate that gives: second-order choice among those with mass and g_j < G
        Hii = H[i, i] if i < t else 0.0
        best = -1.0
        jsel = -1
        for j in range(t + 1):
            if j < t:
                avail = alpha[j]
                gj = g[j]
                eta = Hii + H[j, j] - 2.0 * (H[i, j] if i < t else 0.0)
            else:
                avail = s
                gj = 0.0
                eta = Hii
            if j == i or avail <= 0.0 or gj >= G:
                continue
            diff = G - gj
            if eta <= 1e-12 * (Hii + 1.0):
                eta = 1e-12 * (Hii + 1.0)
            score = diff * diff / eta
            if score > best:
                best = score
                jsel = j
        if jsel < 0:
            break
        j = jsel
        if j < t:
            avail = alpha[j]
            gj = g[j]
            eta = Hii + H[j, j] - 2.0 * (H[i, j] if i < t else 0.0)
        else:
            avail = s
            gj = 0.0
            eta = Hii
        if eta <= 1e-12 * (Hii + 1.0):
            eta = 1e-12 * (Hii + 1.0)
        delta = (G - gj) / eta
        if delta >= avail:
            delta = avail
        if delta <= 0.0:
            break
        # move delta from j to i and update the gradient: g -= delta * (H[:, i] - H[:, j])
        if i < t:
            alpha[i] += delta
        else:
            s += delta
        if j < t:
            alpha[j] = 0.0 if delta == avail else alpha[j] - delta
        else:
            s = 0.0 if delta == avail else s - delta
        # H is symmetric: read rows i and j (contiguous) instead of columns
        if i < t and j < t:
            for k in range(t):
                g[k] -= delta * (H[i, k] - H[j, k])
        elif i < t:
            for k in range(t):
                g[k] -= delta * H[i, k]
        else:
            for k in range(t):
                g[k] += delta * H[j, k]
        steps += 1
    dual = 0.0
    for j in range(t):
        dual += 0.5 * alpha[j] * (b[j] + g[j])
    return steps, dual, gap, G


@njit(cache=True)
def _rqp_compact(H, b, alpha, inactive, slot, keep, t):
    """Keep the cuts with keep[k] true, in order, moving rows/columns down; return the new count."""
    pos = 0
    for k in range(t):
        if keep[k]:
            if pos != k:
                b[pos] = b[k]
                alpha[pos] = alpha[k]
                inactive[pos] = inactive[k]
                slot[pos] = slot[k]
                for r in range(t):
                    H[pos, r] = H[k, r]
            pos += 1
    for r in range(pos):
        q = 0
        for k in range(t):
            if keep[k]:
                H[r, q] = H[r, k]
                q += 1
    return pos


@njit(cache=True)
def _rqp_h_alpha(H, alpha, t, out):
    """out[j] = (H alpha)_j for j < t (cuts with alpha_k = 0 skipped)."""
    for j in range(t):
        acc = 0.0
        for k in range(t):
            a = alpha[k]
            if a != 0.0:
                acc += H[j, k] * a
        out[j] = acc


class ReducedProblem:
    """The working set of cuts R(w) >= b_j - <z_j, w> and the warm-started dual (D_t) over it.

    The cut vectors z_j themselves live with the caller (``worker.solvers.cut_store``), which hands
    over each new cut's Gram row; here are only H, b, alpha, the inactivity counters, and for each
    cut the ``slot`` where the caller keeps its data.
    """

    def __init__(self, C: float, capacity: int = 16) -> None:
        self.C = float(C)
        self.t = 0
        self.capacity = 0
        self.H = np.zeros((0, 0))
        self.b = np.zeros(0)
        self.alpha = np.zeros(0)
        self.inactive = np.zeros(0, dtype=np.int64)
        self.slot = np.zeros(0, dtype=np.int64)
        self._alloc(max(int(capacity), 1))
        self.total_steps = 0

    def _alloc(self, capacity: int) -> None:
        t = self.t
        H = np.zeros((capacity, capacity))
        b = np.zeros(capacity)
        alpha = np.zeros(capacity)
        inactive = np.zeros(capacity, dtype=np.int64)
        slot = np.zeros(capacity, dtype=np.int64)
        if t:
            H[:t, :t] = self.H[:t, :t]
            b[:t] = self.b[:t]
            alpha[:t] = self.alpha[:t]
            inactive[:t] = self.inactive[:t]
            slot[:t] = self.slot[:t]
        self.H, self.b, self.alpha, self.inactive, self.slot = H, b, alpha, inactive, slot
        self.capacity = capacity
        self._g = np.zeros(capacity)
        self.h_alpha = np.zeros(capacity)

    def add_cut(self, h_row: np.ndarray, h_self: float, b: float, slot: int) -> None:
        """Append the cut R(w) >= b - <z, w> with alpha = 0 (so D does not change).

        ``h_row[k] = <z, z_k>`` for the t cuts already here (in their order), ``h_self = <z, z>``;
        ``slot`` is where the caller keeps the cut's data.
        """
        if self.t == self.capacity:
            self._alloc(2 * self.capacity)
        t = self.t
        self.H[t, :t] = h_row[:t]
        self.H[:t, t] = h_row[:t]
        self.H[t, t] = h_self
        self.b[t] = b
        self.alpha[t] = 0.0
        self.inactive[t] = 0
        self.slot[t] = slot
        self.t = t + 1

    def solve(self, tol: float, max_steps: int = 0) -> tuple[float, float, int]:
        """Solve (D_t) to duality gap <= tol from the current alpha.

        Returns (D, gap, steps): the dual value D (a lower bound of the full problem's optimum), the
        remaining gap and the SMO steps taken. ``self.alpha[:t]`` holds the solution and
        ``self.h_alpha[:t]`` the products H alpha (so <z_j, w> for w = sum_k alpha_k z_k).
        ``max_steps`` 0 means 1000 * t + 10000. Inactivity counters are updated here.
        """
        t = self.t
        if t == 0:
            return 0.0, 0.0, 0
        if max_steps <= 0:
            max_steps = 1000 * t + 10000
        steps, dual, gap, _ = reduced_dual_smo(
            self.H, self.b, self.alpha, t, self.C, float(tol), int(max_steps), self._g
        )
        _rqp_h_alpha(self.H, self.alpha, t, self.h_alpha)
        active = self.alpha[:t] > 0.0
        self.inactive[:t] = np.where(active, 0, self.inactive[:t] + 1)
        self.total_steps += int(steps)
        return float(dual), float(gap), int(steps)

    def sq_norm(self) -> float:
        """|w|^2 = alpha^T H alpha for w = sum_k alpha_k z_k (after ``solve``)."""
        t = self.t
        return float(self.alpha[:t] @ self.h_alpha[:t])

    def aggregate(self, i: int, j: int) -> tuple[float, float, int]:
        """Replace cuts i and j (alpha_i + alpha_j > 0) by their aggregate, the convex combination with weights
        alpha_i / (alpha_i + alpha_j) and alpha_j / (...), at i with alpha_i + alpha_j; drop j. The aggregate is
        a valid cut (a convex combination of cuts of R), and H alpha, so w and the dual value D, are unchanged:
        the lower bound holds, and the caller keeps the cut store within its memory (a bundle method's
        aggregation). Returns (weight of i, weight of j, j's slot), for the caller to combine the cut vectors
        (into i's slot) and free j's."""
        t = self.t
        s = float(self.alpha[i] + self.alpha[j])
        wi, wj = (0.5, 0.5) if s <= 0.0 else (float(self.alpha[i]) / s, float(self.alpha[j]) / s)
        H = self.H
        h_ij = float(H[i, j])
        h_self = wi * wi * float(H[i, i]) + 2.0 * wi * wj * h_ij + wj * wj * float(H[j, j])
        row = wi * H[i, :t] + wj * H[j, :t]
        H[i, :t] = row
        H[:t, i] = row
        H[i, i] = h_self
        self.b[i] = wi * self.b[i] + wj * self.b[j]
        self.alpha[i] = s
        self.h_alpha[i] = wi * self.h_alpha[i] + wj * self.h_alpha[j]
        self.inactive[i] = 0
        freed = int(self.slot[j])
        keep = np.ones(t, dtype=np.bool_)
        keep[j] = False
        h_alpha = np.delete(self.h_alpha[:t], j)
        self.t = int(_rqp_compact(self.H, self.b, self.alpha, self.inactive, self.slot, keep, t))
        self.h_alpha[: self.t] = h_alpha
        return wi, wj, freed

    def replace(self, i: int, h_row: np.ndarray, b: float) -> None:
        """Cut i becomes another cut with the same alpha: ``h_row[k] = <z_new, z_k>`` for the t cuts (its own
        entry included), offset b (``cut_store.DenseCuts``: an aggregate as stored, rounded)."""
        t = self.t
        self.H[i, :t] = h_row[:t]
        self.H[:t, i] = h_row[:t]
        self.b[i] = b
        _rqp_h_alpha(self.H, self.alpha, t, self.h_alpha)

    def drop_inactive(self, max_inactive: int) -> np.ndarray:
        """Drop cuts whose alpha has been 0 for more than max_inactive solves; return their slots."""
        t = self.t
        keep = self.inactive[:t] <= max_inactive
        if keep.all():
            return np.zeros(0, dtype=np.int64)
        dropped = self.slot[:t][~keep].copy()
        self.t = int(_rqp_compact(self.H, self.b, self.alpha, self.inactive, self.slot, keep, t))
        return dropped


def warm_up() -> None:
    """Compile every kernel of this module on a tiny problem."""
    rp = ReducedProblem(1.0, capacity=1)
    rp.add_cut(np.zeros(0), 1.25, 1.0, 0)
    rp.add_cut(np.array([0.25]), 1.25, 1.0, 1)
    rp.solve(1e-9)
    rp.sq_norm()
    rp.inactive[0] = 5
    rp.drop_inactive(1)
    rp.add_cut(np.array([0.5]), 1.0, 0.5, 0)
    rp.aggregate(0, 1)

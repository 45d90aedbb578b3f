"""SMO's iterations in numba: the two-variable step, shrinking, the two run loops and the gradient rebuild.

The math, the rules and the names are in ``worker.solvers.smo.solve``'s docstring (Platt 1998, Section 2.1-2.2;
the second-order working set of Fan, Chen & Lin 2005). The variables are kept permuted so that the
active ones come first; ``Variables`` holds the per-variable arrays in that position order. The run
loops return after about ``max_work`` units of work (so that the Python loop can look at the deadline
and the cancel flag) or at ``stop_iter`` steps, with a ``smo.state.RUN_*`` code.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from worker.solvers.common import rng_below
from worker.solvers.smo.cache import get_row, permute_cached, reslot
from worker.solvers.smo.nu import extremes_by_sign, nu_parts, select_pair
from worker.solvers.smo.rows import reorder
from worker.solvers.smo.scans import TAU, extremes, extremes_threads, in_up, select_j_threads, support_counts
from worker.solvers.smo.state import (
    FREE,
    FS_B,
    FS_F,
    FS_VIOL,
    IS_ACTIVE,
    IS_COMPUTED,
    IS_EXAMINE_ALL,
    IS_FREE_TOP,
    IS_FULL_ROWS,
    IS_ITER,
    IS_MIN_ACTIVE,
    IS_NU,
    IS_NUM_CHANGED,
    IS_PASS_POS,
    IS_SAFETY_STEPS,
    IS_SHRINK_COUNTER,
    IS_SLOT_LEN,
    IS_UNCACHED,
    IS_UNSHRUNK,
    LOWER,
    NU_NONE,
    RUN_BUDGET,
    RUN_CONVERGED,
    RUN_RECONSTRUCT,
    UPPER,
)
from worker.solvers.smo.team import axpy, kernel_row, update_gradient


class Variables(NamedTuple):
    """The dual variables and what the solver keeps per variable, in position order."""

    alpha: np.ndarray
    G: np.ndarray  # gradient of f, complete over the active positions
    G_bar: np.ndarray  # sum over the variables at their upper bound of C_j Q_tj, for every t
    Cp: np.ndarray  # C_t (C times the class weight)
    QD: np.ndarray  # Q_tt
    status: np.ndarray  # LOWER, UPPER or FREE (int8)
    P: np.ndarray  # the linear term p_t of f (C-SVC: -1; epsilon-SVR: epsilon -+ y_i)


# ---------------------------------------------------------------------------------------------
# the two-variable step, shared by both working-set rules
# ---------------------------------------------------------------------------------------------


@njit(cache=True, inline="always")
def _status_of(a, c):
    if a >= c:
        return UPPER
    if a <= 0.0:
        return LOWER
    return FREE


@njit(cache=True)
def _pair_target(i, j, Kij, alpha, G, Cp, QD, y):
    """The clipped optimum (alpha_i', alpha_j') of the pair by (7)-(9), with "1" = i and "2" = j."""
    yi = y[i]
    yj = y[j]
    s = yi * yj
    ai = alpha[i]
    aj = alpha[j]
    Ci = Cp[i]
    Cj = Cp[j]
    eta = QD[i] + QD[j] - 2.0 * Kij
    if eta <= 0.0:
        eta = TAU
    aj_new = aj + yj * (yi * G[i] - yj * G[j]) / eta
    if s > 0.0:
        lo = max(0.0, ai + aj - Ci)
        hi = min(Cj, ai + aj)
    else:
        lo = max(0.0, aj - ai)
        hi = min(Cj, Ci + aj - ai)
    if aj_new < lo:
        aj_new = lo
    elif aj_new > hi:
        aj_new = hi
    ai_new = ai + s * (aj - aj_new)
    # snap rounding residue onto the bounds
    if ai_new <= 1e-12 * Ci:
        ai_new = 0.0
    elif ai_new >= Ci * (1.0 - 1e-12):
        ai_new = Ci
    if aj_new <= 1e-12 * Cj:
        aj_new = 0.0
    elif aj_new >= Cj * (1.0 - 1e-12):
        aj_new = Cj
    return ai_new, aj_new, lo, hi


@njit(cache=True)
def _gbar_row(p, coef, n, X, kp, ca, istate, G_bar):
    """G_bar[t] += coef * Q[p, t] for all t in [0, n) (the part beyond the slot length is not cached)."""
    cache = ca.pool
    L = istate[IS_SLOT_LEN]
    lim = min(n, L)
    istate[IS_FULL_ROWS] += 1
    base = get_row(p, lim, X, kp, ca, istate)
    axpy(G_bar, coef, cache, base, np.int64(0), lim, X, istate)
    if lim < n:
        kernel_row(p, lim, n, X, kp, G_bar, np.int64(0), coef, np.bool_(True), istate)
        istate[IS_COMPUTED] += n - lim
        istate[IS_UNCACHED] += n - lim


@njit(cache=True)
def _apply_step(i, j, ai_new, aj_new, base_i, base_j, n, X, kp, ca, V, istate, fstate):
    """Move (alpha_i, alpha_j) to the new values: update f, G (active part), status and G_bar."""
    alpha, G, G_bar, Cp, QD, status, P = V
    cache = ca.pool
    di = ai_new - alpha[i]
    dj = aj_new - alpha[j]
    Qij = cache[base_i + j]
    fstate[FS_F] += G[i] * di + G[j] * dj + 0.5 * (QD[i] * di * di + QD[j] * dj * dj) + Qij * di * dj
    update_gradient(G, cache, base_i, base_j, di, dj, istate[IS_ACTIVE], X, istate)
    alpha[i] = ai_new
    alpha[j] = aj_new
    old_ui = status[i] == UPPER
    old_uj = status[j] == UPPER
    status[i] = _status_of(ai_new, Cp[i])
    status[j] = _status_of(aj_new, Cp[j])
    new_ui = status[i] == UPPER
    new_uj = status[j] == UPPER
    if old_ui != new_ui:
        _gbar_row(i, Cp[i] if new_ui else -Cp[i], n, X, kp, ca, istate, G_bar)
    if old_uj != new_uj:
        _gbar_row(j, Cp[j] if new_uj else -Cp[j], n, X, kp, ca, istate, G_bar)
    istate[IS_ITER] += 1


@njit(cache=True)
def _step_on_pair_of(i, m, n, X, kp, ca, V, istate, fstate):
    """The step on i (F_i = m, the maximal violation) and its second-order partner j: the second-order rule's
    step and Platt's safety net. Returns False (no step) when no j has F_j < m."""
    y = X.y
    cache = ca.pool
    active = istate[IS_ACTIVE]
    base_i = get_row(i, active, X, kp, ca, istate)
    j = select_j_threads(i, m, base_i, X, V.G, V.QD, V.status, cache, active, istate)
    if j < 0:
        return False
    base_j = get_row(j, active, X, kp, ca, istate)
    Kij = y[i] * y[j] * cache[base_i + j]
    ai_new, aj_new, _lo, _hi = _pair_target(i, j, Kij, V.alpha, V.G, V.Cp, V.QD, y)
    _apply_step(i, j, ai_new, aj_new, base_i, base_j, n, X, kp, ca, V, istate, fstate)
    return True


@njit(cache=True)
def _step_nu(n, X, kp, ca, V, istate, fstate, tol):
    """One step of the nu duals' working set (``smo.nu``): the pair of larger second-order gain of the two signs'
    (i, j). Returns False when max(m_+ - M_+, m_- - M_-) < tol or no pair can move."""
    y = X.y
    cache = ca.pool
    active = istate[IS_ACTIVE]
    mp, Mp, ip, mn, Mn, i_n = extremes_by_sign(y, V.G, V.status, active)
    violation = max(mp - Mp, mn - Mn)
    fstate[FS_VIOL] = violation
    if violation < tol:
        return False
    # both signs' rows (the cache keeps at least two), then one pass for the pair of larger gain
    base_p = get_row(ip, active, X, kp, ca, istate) if ip >= 0 else 0
    base_n = get_row(i_n, active, X, kp, ca, istate) if i_n >= 0 else 0
    i, j = select_pair(ip, mp, base_p, i_n, mn, base_n, y, V.G, V.QD, V.status, cache, active)
    if i < 0:
        return False
    base_i = get_row(i, active, X, kp, ca, istate)
    base_j = get_row(j, active, X, kp, ca, istate)
    Kij = y[i] * y[j] * cache[base_i + j]
    ai_new, aj_new, _lo, _hi = _pair_target(i, j, Kij, V.alpha, V.G, V.Cp, V.QD, y)
    _apply_step(i, j, ai_new, aj_new, base_i, base_j, n, X, kp, ca, V, istate, fstate)
    return True


# ---------------------------------------------------------------------------------------------
# shrinking
# ---------------------------------------------------------------------------------------------


@njit(cache=True)
def _swap(p, q, perm, y, alpha, G, G_bar, Cp, QD, status, P, slot_of, slot_owner):
    perm[p], perm[q] = perm[q], perm[p]
    P[p], P[q] = P[q], P[p]
    y[p], y[q] = y[q], y[p]
    alpha[p], alpha[q] = alpha[q], alpha[p]
    G[p], G[q] = G[q], G[p]
    G_bar[p], G_bar[q] = G_bar[q], G_bar[p]
    Cp[p], Cp[q] = Cp[q], Cp[p]
    QD[p], QD[q] = QD[q], QD[p]
    status[p], status[q] = status[q], status[p]
    sp_ = slot_of[p]
    sq_ = slot_of[q]
    slot_of[p] = sq_
    slot_of[q] = sp_
    if sp_ >= 0:
        slot_owner[sp_] = q
    if sq_ >= 0:
        slot_owner[sq_] = p


@njit(cache=True, inline="always")
def _shrinkable(t, mp, Mp, mn, Mn, y, G, status):
    """Whether bounded t can be left out: it cannot join a violating pair (its sign's m and M: the C-SVC's one
    pair of them serves both signs; the nu duals' pairs stay within a sign)."""
    st = status[t]
    if st == FREE:
        return False
    yt = y[t]
    F = -yt * G[t]
    m, M = (mp, Mp) if yt > 0.0 else (mn, Mn)
    if in_up(yt, st):
        return F < M
    return F > m


@njit(cache=True)
def shrink(n, budget, X, orig, ca, V, istate, swap_p, swap_q, tol):
    """One shrinking pass. Returns RUN_RECONSTRUCT when the 10*tol un-shrink is due, else RUN_BUDGET."""
    alpha, G, G_bar, Cp, QD, status, P = V
    y = X.y
    active = istate[IS_ACTIVE]
    if istate[IS_NU] != NU_NONE:
        mp, Mp, _ip, mn, Mn, _in = extremes_by_sign(y, G, status, active)
        violation = max(mp - Mp, mn - Mn)
    else:
        mp, Mp, _i_max = extremes_threads(X, G, status, active, istate)
        mn, Mn, violation = mp, Mp, mp - Mp
    if istate[IS_UNSHRUNK] == 0 and violation <= 10.0 * tol:
        istate[IS_UNSHRUNK] = 1
        if active < n:
            return RUN_RECONSTRUCT
    n_swaps = 0
    i = np.int64(0)
    a = active
    while i < a:
        if _shrinkable(i, mp, Mp, mn, Mn, y, G, status):
            a -= 1
            while a > i and _shrinkable(a, mp, Mp, mn, Mn, y, G, status):
                a -= 1
            if a > i:
                _swap(i, a, orig.perm, y, alpha, G, G_bar, Cp, QD, status, P, ca.slot_of, ca.slot_owner)
                swap_p[n_swaps] = i
                swap_q[n_swaps] = a
                n_swaps += 1
                i += 1
        else:
            i += 1
    if n_swaps > 0:
        reorder(orig, X)
        permute_cached(ca, istate, swap_p, swap_q, n_swaps)
    istate[IS_ACTIVE] = a
    if a < istate[IS_MIN_ACTIVE]:
        istate[IS_MIN_ACTIVE] = a
    # re-cut the pool into shorter slots when the active rows have become much shorter and the pool
    # is full (while it has free slots, the longer rows it holds are worth keeping)
    L = istate[IS_SLOT_LEN]
    L_new = max(a, (budget + n - 1) // n, 1)
    if L_new < 0.75 * L and istate[IS_FREE_TOP] == 0:
        n_slots_new = min(n, max(2, budget // L_new))
        reslot(L_new, n_slots_new, ca, istate)
    return RUN_BUDGET


# ---------------------------------------------------------------------------------------------
# the two run loops
# ---------------------------------------------------------------------------------------------


@njit(cache=True)
def run_second_order(
    n, budget, X, orig, kp, ca, V, istate, fstate, swap_p, swap_q, tol, shrinking, max_work, stop_iter
):
    """Second-order working-set selection (LIBSVM's rule) until converged, a rebuild is due or the budget ends."""
    work = 0
    while True:
        if istate[IS_ITER] >= stop_iter or work >= max_work:
            return RUN_BUDGET
        computed0 = istate[IS_COMPUTED]
        if shrinking:
            istate[IS_SHRINK_COUNTER] -= 1
            if istate[IS_SHRINK_COUNTER] <= 0:
                istate[IS_SHRINK_COUNTER] = min(n, 1000)
                work += istate[IS_ACTIVE]
                code = shrink(n, budget, X, orig, ca, V, istate, swap_p, swap_q, tol)
                if code != RUN_BUDGET:
                    return code
        active = istate[IS_ACTIVE]
        if istate[IS_NU] != NU_NONE:
            if not _step_nu(n, X, kp, ca, V, istate, fstate, tol):
                return RUN_RECONSTRUCT if active < n else RUN_CONVERGED
            work += 2 * active + 4 * (istate[IS_COMPUTED] - computed0)
            continue
        m, M, i = extremes_threads(X, V.G, V.status, active, istate)
        fstate[FS_VIOL] = m - M
        if i < 0 or m - M < tol or not _step_on_pair_of(i, m, n, X, kp, ca, V, istate, fstate):
            return RUN_RECONSTRUCT if active < n else RUN_CONVERGED
        work += 2 * active + 4 * (istate[IS_COMPUTED] - computed0)


@njit(cache=True)
def _platt_take_step(i1, i2, base2, n, X, kp, ca, V, istate, fstate):
    """Platt's takeStep: optimise the pair (i1, i2) if that makes progress; returns 1 on a step."""
    if i1 == i2:
        return 0
    alpha, G, _G_bar, Cp, QD, status, _P = V
    y = X.y
    cache = ca.pool
    K12 = y[i1] * y[i2] * cache[base2 + i1]
    a1_new, a2_new, lo, hi = _pair_target(i1, i2, K12, alpha, G, Cp, QD, y)
    if hi - lo <= 0.0:
        return 0
    a2 = alpha[i2]
    if abs(a2_new - a2) <= 1e-12 * (a2 + a2_new + 1e-12):
        return 0
    active = istate[IS_ACTIVE]
    base1 = get_row(i1, active, X, kp, ca, istate)
    _apply_step(i1, i2, a1_new, a2_new, base1, base2, n, X, kp, ca, V, istate, fstate)
    F1 = -y[i1] * G[i1]
    F2 = -y[i2] * G[i2]
    if status[i1] == FREE:
        fstate[FS_B] = F1
    elif status[i2] == FREE:
        fstate[FS_B] = F2
    else:
        fstate[FS_B] = 0.5 * (F1 + F2)
    return 1


@njit(cache=True)
def _platt_examine(i2, n, X, kp, ca, V, istate, fstate, rng, eps):
    """Platt's examineExample: returns 1 if a step was taken with i2 as second variable."""
    G, status = V.G, V.status
    y = X.y
    active = istate[IS_ACTIVE]
    y2 = y[i2]
    F2 = -y2 * G[i2]
    r2 = y2 * (fstate[FS_B] - F2)
    st = status[i2]
    if not ((r2 < -eps and st != UPPER) or (r2 > eps and st != LOWER)):
        return 0
    base2 = get_row(i2, active, X, kp, ca, istate)
    best = np.int64(-1)  # (a constant -1 would compile a copy of the whole step chain for p = -1)
    best_v = -1.0
    n_free = 0
    for t in range(active):
        if status[t] == FREE:
            n_free += 1
            v = abs(-y[t] * G[t] - F2)
            if t != i2 and v > best_v:
                best_v = v
                best = t
    if n_free > 1 and best >= 0:
        if _platt_take_step(best, i2, base2, n, X, kp, ca, V, istate, fstate):
            return 1
    if n_free > 0:
        start = rng_below(rng, active)
        for k in range(active):
            t = (start + k) % active
            if status[t] == FREE:
                if _platt_take_step(t, i2, base2, n, X, kp, ca, V, istate, fstate):
                    return 1
    start = rng_below(rng, active)
    for k in range(active):
        t = (start + k) % active
        if _platt_take_step(t, i2, base2, n, X, kp, ca, V, istate, fstate):
            return 1
    return 0


@njit(cache=True)
def run_platt(n, budget, X, orig, kp, ca, V, istate, fstate, swap_p, swap_q, tol, shrinking, max_work, stop_iter, rng):
    """Platt's outer loop (Section 2.2): passes over all, then over the non-bound examples, until done."""
    eps = 0.5 * tol
    work = 0
    while True:
        if istate[IS_ITER] >= stop_iter or work >= max_work:
            return RUN_BUDGET
        active = istate[IS_ACTIVE]
        if istate[IS_PASS_POS] >= active:
            # a pass has ended
            changed = istate[IS_NUM_CHANGED]
            was_all = istate[IS_EXAMINE_ALL] == 1
            istate[IS_PASS_POS] = 0
            istate[IS_NUM_CHANGED] = 0
            if was_all:
                if changed == 0:
                    m, M, i = extremes(X.y, V.G, V.status, active)
                    fstate[FS_VIOL] = m - M
                    if i < 0 or m - M < tol:
                        return RUN_RECONSTRUCT if active < n else RUN_CONVERGED
                    # safety net: one step on the maximal violating pair, then full passes again
                    if not _step_on_pair_of(i, m, n, X, kp, ca, V, istate, fstate):
                        return RUN_RECONSTRUCT if active < n else RUN_CONVERGED
                    istate[IS_SAFETY_STEPS] += 1
                    continue
                if shrinking:
                    work += active
                    code = shrink(n, budget, X, orig, ca, V, istate, swap_p, swap_q, tol)
                    if code != RUN_BUDGET:
                        return code
                istate[IS_EXAMINE_ALL] = 0
            elif changed == 0:
                istate[IS_EXAMINE_ALL] = 1
            continue
        p = istate[IS_PASS_POS]
        istate[IS_PASS_POS] = p + 1
        work += 1
        if istate[IS_EXAMINE_ALL] == 0 and V.status[p] != FREE:
            continue
        computed0 = istate[IS_COMPUTED]
        iter0 = istate[IS_ITER]
        istate[IS_NUM_CHANGED] += _platt_examine(p, n, X, kp, ca, V, istate, fstate, rng, eps)
        work += 4 * (istate[IS_COMPUTED] - computed0) + 2 * active * (istate[IS_ITER] - iter0 + 1)


# ---------------------------------------------------------------------------------------------
# gradient reconstruction and statistics
# ---------------------------------------------------------------------------------------------


@njit(cache=True)
def start_from(alpha, gradient, gradient_bar, X, kp, V, istate, n):
    """Set the variables to ``alpha`` (feasible; position order = row order at the start) and compute what the
    steps keep: status, G = Q alpha + p and G_bar, each taken as given when it has n values (that very
    alpha's, as a previous fit returns them) and else computed from a kernel row per non-zero alpha_j (per
    variable at its upper bound for G_bar). Returns the dual value f = 0.5 alpha' (G + p)."""
    row = np.empty(n)
    given = gradient.size == n
    given_bar = gradient_bar.size == n
    for t in range(n):
        V.G[t] = gradient[t] if given else V.P[t]
        V.G_bar[t] = gradient_bar[t] if given_bar else 0.0
    for j in range(n):
        c = V.Cp[j]
        a = min(max(alpha[j], 0.0), c)
        if a >= c * (1.0 - 1e-12):  # a bound scaled by C_new / C_old, off by a rounding
            a = c
        elif a <= 1e-12 * c:
            a = 0.0
        V.alpha[j] = a
        V.status[j] = _status_of(a, c)
        need_g = not given and a != 0.0
        need_bar = not given_bar and V.status[j] == UPPER
        if not (need_g or need_bar):
            continue
        kernel_row(j, np.int64(0), n, X, kp, row, np.int64(0), 1.0, np.bool_(False), istate)
        if need_g:
            for t in range(n):
                V.G[t] += a * row[t]
        if need_bar:
            for t in range(n):
                V.G_bar[t] += c * row[t]
    f = 0.0
    for t in range(n):
        f += V.alpha[t] * (V.G[t] + V.P[t])
    return 0.5 * f


@njit(cache=True)
def rebuild_gradient(X, kp, ca, istate, alpha, G, free_pos, start, stop, active, n):
    """G[t] += sum over free_pos[start:stop] of alpha_j Q_tj, for the inactive t in [active, n).

    The rows of the free variables go through the cache at full length (the slots are full length by
    then), so the values computed here are the ones the un-shrunk iterations ask for next.
    """
    cache = ca.pool
    for idx in range(start, stop):
        j = free_pos[idx]
        base = get_row(j, n, X, kp, ca, istate)
        a = alpha[j]
        for t in range(active, n):
            G[t] += a * cache[base + t]


@njit(cache=True)
def stats(y, alpha, G, Cp, status, P, epsilon, active, n, nu):
    """(m, M, b, n_sv, n_bounded, alpha' Q alpha, loss_sum, rho) with G over [0, active): the loss is the hinge
    (``epsilon`` < 0, C-SVC), else the epsilon-insensitive loss of the rows whose first copy (y_t = +1) is active
    (epsilon-SVR: ``svr_loss``); ``nu`` (``IS_NU``'s value): the nu duals' b and rho from LIBSVM's r_1, r_2
    (``nu_parts``), rho 0 otherwise."""
    if nu != NU_NONE:
        return nu_parts(y, alpha, G, Cp, status, P, active, n, nu)
    m, M, _i_max = extremes(y, G, status, active)
    n_free = 0
    sum_free = 0.0
    for t in range(active):
        if status[t] == FREE:
            n_free += 1
            sum_free += -y[t] * G[t]
    if n_free > 0:
        b = sum_free / n_free
    elif m > -np.inf and M < np.inf:
        b = 0.5 * (m + M)
    elif m > -np.inf:
        b = m
    elif M < np.inf:
        b = M
    else:
        b = 0.0
    n_sv, n_bounded = support_counts(status, n)
    quad = 0.0
    hinge = 0.0
    for t in range(active):
        quad += alpha[t] * (G[t] - P[t])
        if epsilon < 0.0:
            loss = -G[t] - y[t] * b
        elif y[t] > 0.0:
            loss = svr_loss(G[t], b, epsilon)
        else:
            loss = 0.0
        if loss > 0.0:
            hinge += Cp[t] * loss
    return m, M, b, n_sv, n_bounded, quad, hinge, 0.0


@njit(cache=True, inline="always")
def svr_loss(G_t, b, epsilon):
    """epsilon-SVR: the loss max(0, |f(x_i) - y_i| - epsilon) of row i from the gradient of its first copy t
    (p_t = epsilon - y_i, so f(x_i) - y_i = (K beta)_i + b - y_i = G_t - epsilon + b)."""
    return max(0.0, abs(G_t - epsilon + b) - epsilon)

"""The scans of the nu formulations (nu-SVC, nu-SVR): SMO's working set kept within one sign of y.

The nu duals (Chang and Lin, "LIBSVM: a library for support vector machines", 2011, Sections 2.2 and 2.5, and
"Training nu-support vector classifiers: theory and algorithms", Neural Computation 2001) have two equality
constraints, sum_t y_t alpha_t = const and sum_t alpha_t = const. A pair of variables of the same sign of y keeps
both; so the selection is the C-SVC's (``smo.scans``) within each sign: with F_t = -y_t G_t,
m_s = max_{t in I_up, y_t = s} F_t and M_s = min_{t in I_low, y_t = s} F_t, the KKT conditions hold when
max(m_+ - M_+, m_- - M_-) <= tol (the nu solver's stopping rule); each sign's i is its first maximum of F, and the
pair taken is the (i, j) of larger second-order gain over both signs, j of the same sign as its i (as LIBSVM's
Solver_NU does), found in one pass over the active variables. One thread: these scans are not split.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from worker.solvers.smo.scans import TAU, in_low, in_up, support_counts
from worker.solvers.smo.state import LOWER, NU_SVR, UPPER


@njit(cache=True)
def extremes_by_sign(y, G, status, active):
    """(m_+, M_+, i_+, m_-, M_-, i_-) over the active positions (module docstring); i_s = -1 when I_up of sign s
    is empty."""
    mp = -np.inf
    Mp = np.inf
    mn = -np.inf
    Mn = np.inf
    ip = -1
    i_n = -1
    for t in range(active):
        yt = y[t]
        st = status[t]
        F = -yt * G[t]
        if yt > 0.0:
            if in_up(yt, st) and F > mp:
                mp = F
                ip = t
            if in_low(yt, st) and F < Mp:
                Mp = F
        else:
            if in_up(yt, st) and F > mn:
                mn = F
                i_n = t
            if in_low(yt, st) and F < Mn:
                Mn = F
    return mp, Mp, ip, mn, Mn, i_n


@njit(cache=True)
def select_pair(ip, mp, base_p, i_n, mn, base_n, y, G, QD, status, cache, active):
    """(i, j) of larger second-order gain over both signs, in one pass: for each t in I_low with F_t below its sign's
    m, the gain (m_s - F_t)^2 / eta_(i_s t) against that sign's i (``base_p``, ``base_n``: their cached rows; -1
    when that sign has no i); (-1, -1) when no t qualifies."""
    best = -np.inf
    bi = -1
    bj = -1
    for t in range(active):
        yt = y[t]
        if not in_low(yt, status[t]):
            continue
        if yt > 0.0:
            i, m, base = ip, mp, base_p
        else:
            i, m, base = i_n, mn, base_n
        if i < 0:
            continue
        diff = m + yt * G[t]
        if diff <= 0.0:
            continue
        eta = QD[i] + QD[t] - 2.0 * cache[base + t]  # y_i y_t = 1: Q_it is K_it
        eta = eta if eta > 0.0 else TAU
        gain = diff * diff / eta
        if gain > best:
            best = gain
            bi = i
            bj = t
    return bi, bj


@njit(cache=True)
def thresholds(y, G, status, active):
    """LIBSVM's r_1 (y = +1) and r_2 (y = -1) of the nu duals: the mean gradient over a sign's free variables, else
    the middle of the interval its bounded ones allow (at its lower bound G_t >= r, at its upper bound G_t <= r)."""
    sums = np.zeros(2)
    counts = np.zeros(2)
    low = np.full(2, -np.inf)  # largest G of a variable at its upper bound
    high = np.full(2, np.inf)  # smallest G of a variable at its lower bound
    for t in range(active):
        s = 0 if y[t] > 0.0 else 1
        st = status[t]
        if st == UPPER:
            low[s] = max(low[s], G[t])
        elif st == LOWER:
            high[s] = min(high[s], G[t])
        else:
            sums[s] += G[t]
            counts[s] += 1.0
    r = np.zeros(2)
    for s in range(2):
        if counts[s] > 0:
            r[s] = sums[s] / counts[s]
        elif np.isfinite(low[s]) and np.isfinite(high[s]):
            r[s] = 0.5 * (low[s] + high[s])
        elif np.isfinite(low[s]):
            r[s] = low[s]
        elif np.isfinite(high[s]):
            r[s] = high[s]
    return r[0], r[1]


@njit(cache=True)
def nu_parts(y, alpha, G, Cp, status, P, active, n, nu):
    """``stats`` of the nu duals. With r_1, r_2 (``smo.nu.thresholds``): b = (r_2 - r_1) / 2 and rho = (r_1 + r_2)
    / 2; the loss of row t is nu-SVC's max(0, rho - G_t - y_t b) (G = Q alpha, so y_t f(x_t) = G_t + y_t b), or
    nu-SVR's max(0, |G_t + b| - epsilon) with epsilon = -rho for the rows whose first copy is active (p_t = -y_i
    there, so f(x_i) - y_i = G_t + b). m, M: the larger of the two signs' violations and 0."""
    mp, Mp, _ip, mn, Mn, _in = extremes_by_sign(y, G, status, active)
    r1, r2 = thresholds(y, G, status, active)
    b = 0.5 * (r2 - r1)
    rho = 0.5 * (r1 + r2)
    n_sv, n_bounded = support_counts(status, n)
    quad = 0.0
    hinge = 0.0
    for t in range(active):
        quad += alpha[t] * (G[t] - P[t])
        if nu == NU_SVR:
            loss = max(0.0, abs(G[t] + b) + rho) if y[t] > 0.0 else 0.0
        else:
            loss = max(0.0, rho - G[t] - y[t] * b)
        hinge += Cp[t] * loss
    return max(mp - Mp, mn - Mn), 0.0, b, n_sv, n_bounded, quad, hinge, rho

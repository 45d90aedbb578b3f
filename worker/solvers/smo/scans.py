"""SMO's passes over the gradient: the working-set scans (split over threads when long) and the gradient updates.

``extremes``: m = max_{I_up} F and M = min_{I_low} F (F_t = -y_t G_t) and the first position of m;
``select_j``: the second-order choice of j given i (Fan, Chen & Lin 2005); ``update_g_chunk`` and
``axpy_chunk``: G += two rows (a step) or one row (G_bar), over a range (``smo.team`` splits them over its
threads). Each scan takes block maxima, then looks for the first maximum in its block; split over the
threads (``IS_PAR_MIN_SCAN`` positions and more, numba's prange), each thread's first maximum is kept and
the first of those wins, so the choice is the one a single scan makes and 1 and 2 threads take the very
same steps.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from worker.solvers.smo.state import IS_PAR_MIN_SCAN, IS_THREADS, LOWER, UPPER

TAU = 1e-12  # eta's floor when eta <= 0 (LIBSVM's TAU)
_SCAN_BLOCK = 256  # the working-set scans take block maxima, then look for the first maximum in its block


@njit(cache=True, inline="always")
def in_up(yt, st):
    return (yt > 0.0 and st != UPPER) or (yt < 0.0 and st != LOWER)


@njit(cache=True, inline="always")
def in_low(yt, st):
    return (yt < 0.0 and st != UPPER) or (yt > 0.0 and st != LOWER)


@njit(cache=True, inline="always")
def _up_low(yt, st):
    """(t in I_up, t in I_low) without branches (so that the scans below run straight through)."""
    pos = yt > 0.0
    return (pos & (st != UPPER)) | ((~pos) & (st != LOWER)), ((~pos) & (st != UPPER)) | (pos & (st != LOWER))


@njit(cache=True)
def _extremes_range(y, G, status, lo, hi):
    """(m, M, i_max) over positions [lo, hi): block maxima first, then the first maximum in its block."""
    m = -np.inf
    M = np.inf
    best_block = -1
    for b0 in range(lo, hi, _SCAN_BLOCK):
        b1 = min(b0 + _SCAN_BLOCK, hi)
        yy = y[b0:b1]
        gg = G[b0:b1]
        st = status[b0:b1]
        bm = -np.inf
        bM = np.inf
        for t in range(b1 - b0):
            yt = yy[t]
            F = -yt * gg[t]
            up, low = _up_low(yt, st[t])
            v = F if up else -np.inf
            w = F if low else np.inf
            bm = v if v > bm else bm
            bM = w if w < bM else bM
        if bm > m:
            m = bm
            best_block = b0
        if bM < M:
            M = bM
    i_max = -1
    if best_block >= 0:
        for t in range(best_block, min(best_block + _SCAN_BLOCK, hi)):
            if in_up(y[t], status[t]) and -y[t] * G[t] == m:
                i_max = t
                break
    return m, M, i_max


@njit(cache=True, parallel=True)
def _extremes_parallel(y, G, status, active, n_chunks, part_f, part_g, part_i):
    for c in prange(n_chunks):
        m, M, i = _extremes_range(y, G, status, active * c // n_chunks, active * (c + 1) // n_chunks)
        part_f[c] = m
        part_g[c] = M
        part_i[c] = i


@njit(cache=True)
def extremes(y, G, status, active):
    """(m, M, i_max) over the active variables: m = max_{I_up} F, M = min_{I_low} F."""
    return _extremes_range(y, G, status, np.int64(0), active)


@njit(cache=True)
def extremes_threads(X, G, status, active, istate):
    """extremes, split over the threads when long (the first maximum wins, as in one scan)."""
    threads = istate[IS_THREADS]
    y = X.y
    if threads <= 1 or active < istate[IS_PAR_MIN_SCAN]:
        return _extremes_range(y, G, status, np.int64(0), active)
    part_f, part_g, part_i = X.part_f, X.part_g, X.part_i
    _extremes_parallel(y, G, status, active, threads, part_f, part_g, part_i)
    m = -np.inf
    M = np.inf
    i_max = -1
    for c in range(threads):
        if part_f[c] > m:
            m = part_f[c]
            i_max = part_i[c]
        if part_g[c] < M:
            M = part_g[c]
    return m, M, i_max


@njit(cache=True, inline="always")
def _gain(yi, QDi, m, yt, Gt, st, QDt, Qit):
    """Second-order gain of the pair (i, t), or -inf when t is not in I_low with F_t < m."""
    _up, low = _up_low(yt, st)
    diff = m + yt * Gt
    eta = QDi + QDt - 2.0 * (yi * yt * Qit)
    eta = eta if eta > 0.0 else TAU
    gain = diff * diff / eta
    return gain if low & (diff > 0.0) else -np.inf


@njit(cache=True)
def _select_j_range(i, m, base_i, y, G, QD, status, cache, lo, hi):
    """(j, gain) over positions [lo, hi): block maxima first, then the first maximum in its block."""
    yi = y[i]
    QDi = QD[i]
    best = -np.inf
    best_block = -1
    for b0 in range(lo, hi, _SCAN_BLOCK):
        b1 = min(b0 + _SCAN_BLOCK, hi)
        yy = y[b0:b1]
        gg = G[b0:b1]
        st = status[b0:b1]
        qd = QD[b0:b1]
        row = cache[base_i + b0 : base_i + b1]
        bb = -np.inf
        for t in range(b1 - b0):
            gain = _gain(yi, QDi, m, yy[t], gg[t], st[t], qd[t], row[t])
            bb = gain if gain > bb else bb
        if bb > best:
            best = bb
            best_block = b0
    j = -1
    if best_block >= 0:
        for t in range(best_block, min(best_block + _SCAN_BLOCK, hi)):
            if _gain(yi, QDi, m, y[t], G[t], status[t], QD[t], cache[base_i + t]) == best:
                j = t
                break
    return j, best


@njit(cache=True, parallel=True)
def _select_j_parallel(i, m, base_i, y, G, QD, status, cache, active, n_chunks, part_f, part_i):
    for c in prange(n_chunks):
        j, best = _select_j_range(
            i, m, base_i, y, G, QD, status, cache, active * c // n_chunks, active * (c + 1) // n_chunks
        )
        part_f[c] = best
        part_i[c] = j


@njit(cache=True)
def select_j(i, m, base_i, y, G, QD, status, cache, active):
    """Second-order choice of j given i (F_i = m): argmax (m - F_t)^2 / eta_it over I_low with F_t < m."""
    return _select_j_range(i, m, base_i, y, G, QD, status, cache, np.int64(0), active)[0]


@njit(cache=True)
def select_j_threads(i, m, base_i, X, G, QD, status, cache, active, istate):
    """select_j, split over the threads when long (the first maximum wins, as in one scan)."""
    threads = istate[IS_THREADS]
    y = X.y
    if threads <= 1 or active < istate[IS_PAR_MIN_SCAN]:
        return _select_j_range(i, m, base_i, y, G, QD, status, cache, np.int64(0), active)[0]
    part_f, part_i = X.part_f, X.part_i
    _select_j_parallel(i, m, base_i, y, G, QD, status, cache, active, threads, part_f, part_i)
    j = -1
    best = -np.inf
    for c in range(threads):
        if part_f[c] > best:
            best = part_f[c]
            j = part_i[c]
    return j


@njit(cache=True)
def support_counts(status, n):
    """(support vectors, those at their upper bound) over the first n positions."""
    n_sv = 0
    n_bounded = 0
    for t in range(n):
        if status[t] != LOWER:
            n_sv += 1
            if status[t] == UPPER:
                n_bounded += 1
    return n_sv, n_bounded


@njit(cache=True)
def axpy_chunk(v, a, cache, base, lo, hi):
    """v[t] += a * cache[base + t] for t in [lo, hi) (G_bar's updates; ``smo.team.axpy`` splits it)."""
    vv = v[lo:hi]
    cc = cache[base + lo : base + hi]
    for t in range(hi - lo):
        vv[t] += a * cc[t]


@njit(cache=True)
def update_g_chunk(G, cache, base_i, base_j, di, dj, lo, hi):
    """G[t] += Q[i, t] di + Q[j, t] dj for t in [lo, hi), from two cached rows (``smo.team.update_gradient``
    splits it)."""
    g = G[lo:hi]
    qi = cache[base_i + lo : base_i + hi]
    qj = cache[base_j + lo : base_j + hi]
    for t in range(hi - lo):
        g[t] += qi[t] * di + qj[t] * dj

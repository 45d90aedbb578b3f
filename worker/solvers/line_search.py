"""OCAS's exact line search (paper 000, Change 2, eq. (7), solved as in Appendix A) in linear time.

Along w(k) = (1 - k) w_b + k w_t, k >= 0, the primal objective is

    G(k) = 0.5 k^2 A0 + k B0 + C0 + sum_i max(0, k B_i + C_i)                                 (Appendix A)

with A0 = |w_t - w_b|^2, B0 = <w_b, w_t - w_b>, B_i = C y_i (o_b_i - o_t_i), C_i = C (1 - y_i o_b_i)
(o_b, o_t: the outputs of w_b and w_t). G is convex; its derivative is A0 k + B0 plus the slopes B_i of
the active terms, increasing and piecewise linear, jumping up by |B_i| at the breakpoints
k_i = -C_i / B_i > 0 of the terms that switch on or off along the ray.

``prepare`` (parallel over fixed row chunks) computes the right derivative at k = 0 per chunk and
writes each chunk's breakpoints (k_i, |B_i|) at the start of the chunk's row range; ``compact`` moves
them together in row order. ``minimize`` returns k* = argmin_{k >= 0} G(k) given the breakpoints and
S = G'(0+) < 0. Appendix A sorts the breakpoints (O(m log m)) and sweeps them in order; we find the
same point without a full sort, by selection: a pivot splits the breakpoints into those below, at and
above it; the derivative just left and just right of the pivot tells on which side k* lies (or that
it is the pivot), and only that side is kept. With median-of-three pivots this is O(m) expected; after
2 log2(m) + 16 rounds without finishing (adversarial inputs) the remaining range is sorted and swept,
so the worst case is O(m log m). The result is the minimiser of G over k >= 0 either way: the kink
where the subdifferential contains 0, or k = -S'/A0 between two kinks where the derivative
A0 k + S' crosses zero. The order of the breakpoints in memory is the row order, and every sum is
taken in a fixed order, so the result does not depend on the number of threads.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from worker.solvers.data_passes import compact_chunks


@njit(cache=True)
def _prepare_chunk(y, o_b, o_t, C, c, chunks, slope_parts, count_parts, keys, wts):
    base = chunks[c]
    acc = 0.0
    count = 0
    for i in range(chunks[c], chunks[c + 1]):
        Bi = C * y[i] * (o_b[i] - o_t[i])
        Ci = C * (1.0 - y[i] * o_b[i])
        if Ci > 0.0 or (Ci == 0.0 and Bi > 0.0):
            acc += Bi
        if (Ci > 0.0 and Bi < 0.0) or (Ci < 0.0 and Bi > 0.0):
            keys[base + count] = -Ci / Bi
            wts[base + count] = abs(Bi)
            count += 1
    slope_parts[c] = acc
    count_parts[c] = count


@njit(cache=True, parallel=True)
def prepare(y, o_b, o_t, C, chunks, slope_parts, count_parts, keys, wts, serial):
    """Per chunk c: slope_parts[c] = sum of B_i over the terms active just right of k = 0; the chunk's
    breakpoints (k_i, |B_i|) at keys/wts[chunks[c] : chunks[c] + count_parts[c]], in row order."""
    if serial:
        for c in range(chunks.shape[0] - 1):
            _prepare_chunk(y, o_b, o_t, C, c, chunks, slope_parts, count_parts, keys, wts)
    else:
        for c in prange(chunks.shape[0] - 1):
            _prepare_chunk(y, o_b, o_t, C, c, chunks, slope_parts, count_parts, keys, wts)


def compact(chunks, count_parts, keys, wts) -> int:
    """Move every chunk's breakpoints down so that they are contiguous from 0; return their number."""
    compact_chunks(chunks, count_parts, keys)
    return int(compact_chunks(chunks, count_parts, wts))


@njit(cache=True)
def _sweep_sorted(keys, wts, lo, hi, A0, S):
    """Minimiser of G on the breakpoints keys[lo:hi] (sorted here), S the derivative just right of the
    breakpoints below keys[lo:hi]."""
    order = np.argsort(keys[lo:hi], kind="mergesort")
    for q in range(order.shape[0]):
        k = keys[lo + order[q]]
        if A0 * k + S >= 0.0:
            return -S / A0
        S += wts[lo + order[q]]
        if A0 * k + S >= 0.0:
            return k
    return -S / A0


@njit(cache=True)
def minimize(keys, wts, m, A0, S):
    """argmin_{k >= 0} of G given m breakpoints in keys/wts[:m] (reordered in place), A0 > 0 and the
    right derivative at 0, S < 0."""
    lo = np.int64(0)  # (a constant would compile _sweep_sorted again for lo = 0)
    hi = m
    rounds = 0
    limit = 2 * int(math.log2(m + 1)) + 16
    while hi > lo:
        if rounds >= limit:
            return _sweep_sorted(keys, wts, lo, hi, A0, S)
        rounds += 1
        a = keys[lo]
        b = keys[(lo + hi) >> 1]
        c = keys[hi - 1]
        if a > b:
            a, b = b, a
        if b > c:
            b = c
        if a > b:
            b = a
        pivot = b
        # three-way partition of [lo, hi): [lo, lt) < pivot, [lt, gt) == pivot, [gt, hi) > pivot
        lt = lo
        q = lo
        gt = hi
        w_below = 0.0
        w_equal = 0.0
        while q < gt:
            kq = keys[q]
            if kq < pivot:
                w_below += wts[q]
                keys[q], keys[lt] = keys[lt], kq
                wts[q], wts[lt] = wts[lt], wts[q]
                lt += 1
                q += 1
            elif kq > pivot:
                gt -= 1
                keys[q], keys[gt] = keys[gt], kq
                wts[q], wts[gt] = wts[gt], wts[q]
            else:
                w_equal += wts[q]
                q += 1
        left = A0 * pivot + S + w_below  # derivative just left of the pivot
        if left > 0.0:
            hi = lt
        elif left + w_equal >= 0.0:
            return pivot
        else:
            S += w_below + w_equal
            lo = gt
    return -S / A0


def warm_up() -> None:
    """Compile every kernel of this module on a tiny problem."""
    y = np.array([1.0, -1.0, 1.0, -1.0])
    o_b = np.array([0.5, 0.2, -0.3, 1.5])
    o_t = np.array([1.5, -1.0, 0.8, -0.5])
    chunks = np.array([0, 2, 4], dtype=np.int64)
    slope = np.zeros(2)
    counts = np.zeros(2, dtype=np.int64)
    keys = np.zeros(4)
    wts = np.zeros(4)
    prepare(y, o_b, o_t, 1.0, chunks, slope, counts, keys, wts, False)
    prepare(y, o_b, o_t, 1.0, chunks, slope, counts, keys, wts, True)
    m = compact(chunks, counts, keys, wts)
    minimize(keys, wts, m, 1.0, -1.0)
    _sweep_sorted(keys, wts, 0, m, 1.0, -1.0)

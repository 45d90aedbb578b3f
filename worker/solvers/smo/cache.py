"""The least-recently-used cache of rows of Q (LIBSVM's Cache, apart from the solver).

A pool of float32 values (LIBSVM's Qfloat) cut into equal slots of ``IS_SLOT_LEN`` values; slot s holds the
first ``slot_fill[s]`` positions of the row of variable ``slot_owner[s]`` (``slot_of`` is the inverse,
-1 when a row is not cached). Slots sit on a doubly linked list in recency order (``lru_prev``,
``lru_next``, head and tail in istate) or on the free stack. ``get_row`` makes a row valid up to a
length, computing only the missing part (``smo.rows.kernel_row``). ``reslot`` re-cuts the pool into
shorter, more numerous slots when the active set has shrunk (rows keep their prefix), or back into full
rows (keeping the most recently used ones). ``permute_cached`` follows the solver's swaps of positions
when it shrinks. At least two rows are always kept, whatever the budget.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from worker.solvers.smo.state import (
    IS_COMPUTED,
    IS_FREE_TOP,
    IS_HITS,
    IS_LRU_HEAD,
    IS_LRU_TAIL,
    IS_MISSES,
    IS_N_SLOTS,
    IS_SLOT_LEN,
)
from worker.solvers.smo.team import kernel_row


class RowCache(NamedTuple):
    """The pool and its bookkeeping (the scalars live in istate)."""

    pool: np.ndarray  # float32, slot s at [s * slot length, (s + 1) * slot length)
    slot_of: np.ndarray  # per variable (position): its slot or -1
    slot_owner: np.ndarray  # per slot: the position whose row it holds or -1
    slot_fill: np.ndarray  # per slot: how many leading positions are valid
    lru_prev: np.ndarray
    lru_next: np.ndarray
    free_stack: np.ndarray


def new_row_cache(n: int, budget: int) -> tuple[RowCache, int]:
    """An empty cache for n variables in ``budget`` float32 values (at least two rows); returns it and its
    number of slots (full rows)."""
    n_slots = int(min(n, max(2, budget // n)))
    pool = np.empty(max(budget, 2 * n), dtype=np.float32)
    free_stack = np.empty(n, dtype=np.int64)
    free_stack[:n_slots] = np.arange(n_slots - 1, -1, -1)
    cache = RowCache(
        pool,
        np.full(n, -1, dtype=np.int64),
        np.full(n, -1, dtype=np.int64),
        np.zeros(n, dtype=np.int64),
        np.full(n, -1, dtype=np.int64),
        np.full(n, -1, dtype=np.int64),
        free_stack,
    )
    return cache, n_slots


@njit(cache=True)
def _lru_unlink(s, lru_prev, lru_next, istate):
    p = lru_prev[s]
    q = lru_next[s]
    if p >= 0:
        lru_next[p] = q
    else:
        istate[IS_LRU_HEAD] = q
    if q >= 0:
        lru_prev[q] = p
    else:
        istate[IS_LRU_TAIL] = p
    lru_prev[s] = -1
    lru_next[s] = -1


@njit(cache=True)
def _lru_push_front(s, lru_prev, lru_next, istate):
    head = istate[IS_LRU_HEAD]
    lru_prev[s] = -1
    lru_next[s] = head
    if head >= 0:
        lru_prev[head] = s
    else:
        istate[IS_LRU_TAIL] = s
    istate[IS_LRU_HEAD] = s


@njit(cache=True)
def get_row(p, length, X, kp, ca, istate):
    """Make row p of Q (positions [0, length), length <= slot length) valid in the cache; return its offset."""
    cache, slot_of, slot_owner, slot_fill, lru_prev, lru_next, free_stack = ca
    L = istate[IS_SLOT_LEN]
    s = slot_of[p]
    if s >= 0:
        if istate[IS_LRU_HEAD] != s:
            _lru_unlink(s, lru_prev, lru_next, istate)
            _lru_push_front(s, lru_prev, lru_next, istate)
    else:
        if istate[IS_FREE_TOP] > 0:
            istate[IS_FREE_TOP] -= 1
            s = free_stack[istate[IS_FREE_TOP]]
        else:
            s = istate[IS_LRU_TAIL]
            _lru_unlink(s, lru_prev, lru_next, istate)
            slot_of[slot_owner[s]] = -1
        slot_owner[s] = p
        slot_of[p] = s
        slot_fill[s] = 0
        _lru_push_front(s, lru_prev, lru_next, istate)
    base = s * L
    fill = slot_fill[s]
    if fill < length:
        istate[IS_MISSES] += 1
        kernel_row(p, fill, length, X, kp, cache, base, 0.0, np.bool_(False), istate)
        slot_fill[s] = length
        istate[IS_COMPUTED] += length - fill
    else:
        istate[IS_HITS] += 1
    return base


@njit(cache=True)
def reslot(L_new, n_slots_new, ca, istate):
    """Re-cut the pool into n_slots_new slots of length L_new, keeping row prefixes (MRU rows first when growing)."""
    cache, slot_of, slot_owner, slot_fill, lru_prev, lru_next, free_stack = ca
    L_old = istate[IS_SLOT_LEN]
    n_old = istate[IS_N_SLOTS]
    if L_new < L_old:
        # more, shorter slots: slot s moves from s*L_old to s*L_new <= s*L_old, copy ascending
        for s in range(n_old):
            if slot_owner[s] >= 0:
                keep = min(slot_fill[s], L_new)
                src = s * L_old
                dst = s * L_new
                for k in range(keep):
                    cache[dst + k] = cache[src + k]
                slot_fill[s] = keep
        top = istate[IS_FREE_TOP]
        for s in range(n_slots_new - 1, n_old - 1, -1):
            slot_owner[s] = -1
            slot_fill[s] = 0
            lru_prev[s] = -1
            lru_next[s] = -1
            free_stack[top] = s
            top += 1
        istate[IS_FREE_TOP] = top
    else:
        # fewer, longer slots: keep the n_slots_new most recently used rows in slots 0..n_keep-1
        owners = np.empty(n_slots_new, dtype=np.int64)
        n_keep = 0
        s = istate[IS_LRU_HEAD]
        while s >= 0 and n_keep < n_slots_new:
            owners[n_keep] = slot_owner[s]
            n_keep += 1
            s = lru_next[s]
        for k in range(n_keep):
            s = slot_of[owners[k]]
            if s != k:
                other = slot_owner[k]
                base_s = s * L_old
                base_k = k * L_old
                for e in range(L_old):
                    tmp = cache[base_s + e]
                    cache[base_s + e] = cache[base_k + e]
                    cache[base_k + e] = tmp
                fill_k = slot_fill[k]
                slot_fill[k] = slot_fill[s]
                slot_fill[s] = fill_k
                slot_owner[k] = owners[k]
                slot_of[owners[k]] = k
                slot_owner[s] = other
                if other >= 0:
                    slot_of[other] = s
        for s in range(n_keep, n_old):
            if slot_owner[s] >= 0:
                slot_of[slot_owner[s]] = -1
            slot_owner[s] = -1
            slot_fill[s] = 0
        for k in range(n_keep - 1, -1, -1):
            src = k * L_old
            dst = k * L_new
            if dst != src:
                for e in range(slot_fill[k] - 1, -1, -1):
                    cache[dst + e] = cache[src + e]
        for s in range(n_old):
            lru_prev[s] = -1
            lru_next[s] = -1
        istate[IS_LRU_HEAD] = -1
        istate[IS_LRU_TAIL] = -1
        for k in range(n_keep - 1, -1, -1):
            _lru_push_front(k, lru_prev, lru_next, istate)
        top = 0
        for s in range(n_slots_new - 1, n_keep - 1, -1):
            free_stack[top] = s
            top += 1
        istate[IS_FREE_TOP] = top
    istate[IS_SLOT_LEN] = L_new
    istate[IS_N_SLOTS] = n_slots_new


@njit(cache=True)
def permute_cached(ca, istate, swap_p, swap_q, n_swaps):
    """Swap positions swap_p[k] and swap_q[k] (k < n_swaps, in order) in every cached row; a row that holds
    only the first of a pair is cut before it."""
    pool, slot_fill, lru_next = ca.pool, ca.slot_fill, ca.lru_next
    L = istate[IS_SLOT_LEN]
    s = istate[IS_LRU_HEAD]
    while s >= 0:
        base = s * L
        fill = slot_fill[s]
        for k in range(n_swaps):
            p = swap_p[k]
            if p >= fill:
                continue
            q = swap_q[k]
            if q < fill:
                tmp = pool[base + p]
                pool[base + p] = pool[base + q]
                pool[base + q] = tmp
            else:
                fill = p
        slot_fill[s] = fill
        s = lru_next[s]

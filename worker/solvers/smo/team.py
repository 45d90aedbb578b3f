"""SMO's kernel rows and gradient updates split over a team of threads that stay awake between them
(OpenMP's way, not numba's).

Why a team
----------
An SMO step needs one or two kernel rows of active_size values: on ijcnn1 (49,990 rows) about 0.1-0.4
ms of work each, thousands of times. A numba ``prange`` region on its fork-safe ``workqueue`` layer wakes
its threads through the operating system every time, which costs about as much as the row itself, so
two threads ran no faster than one (measured, see tests/benchmarks/README.md). LIBSVM's OpenMP build
gains 1.6-1.8x on the same rows because its threads spin between regions. This module does the same with
plain threads: ``RowTeam`` starts ``threads - 1`` partner threads for one solve, each running
``partner_loop`` (a numba kernel that releases the GIL); they watch one shared int64 array, ``X.team``.
Handing a row to them costs a few hundred nanoseconds (measured: 0.4-0.5 us for a round trip).

Protocol (``X.team``, slots ``T_*``; the atomics are ``worker.solvers.atomics``)
--------------------------------------------------------------------------------
The solver's own thread, the owner, calls ``kernel_row`` (a row of Q), ``update_gradient`` (G += two
cached rows, after a step) or ``axpy`` (G_bar += one cached row). A pass over [lo, hi) of at least
``istate[IS_TEAM_MIN_ROW]`` positions, with partners running, is cut into ``CHUNKS_PER_THREAD`` chunks
per thread. The owner writes the order (its kind ``TEAM_*``, range, the arrays' addresses, lengths and
item sizes, coefficients), resets the done count, then publishes ``T_ORDER = seq << SEQ_SHIFT`` with a
release store (seq counts orders). Every thread, the owner included, claims the next chunk by
compare-and-swap on ``T_ORDER`` (only while its seq is still the one it read the order for), computes it
with the one-thread code (``smo.rows._row_chunk``, ``smo.scans.update_g_chunk``, ``smo.scans.axpy_chunk``)
and adds one to ``T_DONE``; the owner returns when ``T_DONE`` reaches the number of chunks. A partner that reads an order late, after every chunk is taken or the owner has moved on,
fails its compare-and-swap and takes nothing, so it never computes with a torn order, and a partner the
system has descheduled does not hold a row up: the owner takes the chunks left.

Chunks are disjoint ranges of positions and each value is computed by the same arithmetic whatever the
range, so any split, any thread count and any timing give the very same row: the run is
the one thread's, bit for bit (tested).

Waiting
-------
A partner polls ``T_ORDER``; after ``SPIN_POLLS`` polls with nothing to do it yields its core on each
poll (``sched_yield``), and after ``NAP_AFTER_S`` idle it naps ``NAP_NS`` between polls (the owner is
then in Python between slices of numba work, or the solve is over), so an idle team costs nothing
measurable. The owner waits for the last chunk the same way, without naps. ``RowTeam.stop`` sets
``T_QUIT`` and joins the partners; ``solve_smo`` stops the team however the solve ends. Threads
come from the job's thread budget (``n_threads``: processes x threads <= cores).
"""

from __future__ import annotations

import threading

import numpy as np
from numba import njit

from worker.solvers.atomics import array_at, compare_and_swap, fetch_add, load_acquire, nap_ns, store_release, yield_cpu
from worker.solvers.common import monotonic_s
from worker.solvers.smo.rows import _row_chunk
from worker.solvers.smo.scans import axpy_chunk, update_g_chunk
from worker.solvers.smo.state import (
    IS_TEAM_MIN_ROW,
    T_ACCUMULATE,
    T_BASE,
    T_BASE_J,
    T_DONE,
    T_HI,
    T_KIND,
    T_LO,
    T_N_CHUNKS,
    T_ORDER,
    T_OUT_ADDRESS,
    T_OUT_ITEMSIZE,
    T_OUT_LENGTH,
    T_P,
    T_PARTNERS,
    T_QUIT,
    T_SEQ,
    T_SRC_ADDRESS,
    T_SRC_LENGTH,
)

TEAM_ROW = 0  # order kinds: a kernel row (smo.rows._row_chunk)
TEAM_AXPY = 1  # v += a * one cached row (smo.scans.axpy_chunk: G_bar's updates)
TEAM_UPDATE_G = 2  # G += di * Q_i + dj * Q_j from two cached rows (smo.scans.update_g_chunk)

SEQ_SHIFT = 24  # chunk numbers fit below this bit
CHUNKS_PER_THREAD = 4  # chunks of a split row per thread, first come first served
SPIN_POLLS = 2000  # polls before a waiting thread starts yielding its core
NAP_AFTER_S = 0.002  # a partner idle this long (seconds) naps between polls
NAP_NS = 100_000

TEAM_MIN_ROW = 8192
"""Shortest kernel row split over the team (positions); shorter ones cost less than a hand-over gains."""


@njit(cache=True)
def _claim(team, seq, n_chunks):
    """The next chunk of order seq for this thread, or -1 when none is left (or the order is no longer seq)."""
    while True:
        word = load_acquire(team, T_ORDER)
        if (word >> SEQ_SHIFT) != seq:
            return -1
        c = word & ((1 << SEQ_SHIFT) - 1)
        if c >= n_chunks:
            return -1
        if compare_and_swap(team, T_ORDER, word, word + 1):
            return c


@njit(cache=True)
def _take_row_chunks(seq, team, p, lo, hi, n_chunks, X, kp, out, base, coef, accumulate):
    """Claim and compute chunks of a row order until none is left."""
    span = hi - lo
    c = _claim(team, seq, n_chunks)
    while c >= 0:
        _row_chunk(p, lo + span * c // n_chunks, lo + span * (c + 1) // n_chunks, X, kp, out, base, coef, accumulate)
        fetch_add(team, T_DONE, 1)
        c = _claim(team, seq, n_chunks)


@njit(cache=True)
def _take_update_chunks(seq, team, kind, lo, hi, n_chunks, v, cache, base_i, base_j, a_i, a_j):
    """Claim and compute chunks of an update order (``TEAM_AXPY`` or ``TEAM_UPDATE_G``) until none is left."""
    span = hi - lo
    c = _claim(team, seq, n_chunks)
    while c >= 0:
        a, b = lo + span * c // n_chunks, lo + span * (c + 1) // n_chunks
        if kind == TEAM_UPDATE_G:
            update_g_chunk(v, cache, base_i, base_j, a_i, a_j, a, b)
        else:
            axpy_chunk(v, a_i, cache, base_i, a, b)
        fetch_add(team, T_DONE, 1)
        c = _claim(team, seq, n_chunks)


@njit(cache=True)
def _publish(team, kind, lo, hi, out, base, accumulate):
    """Write an order's common fields and publish it; returns (seq, number of chunks). The caller has
    written the order's own fields before (they are published with it)."""
    n_chunks = CHUNKS_PER_THREAD * (team[T_PARTNERS] + 1)
    seq = team[T_SEQ] + 1
    team[T_SEQ] = seq
    team[T_KIND] = kind
    team[T_LO] = lo
    team[T_HI] = hi
    team[T_BASE] = base
    team[T_ACCUMULATE] = 1 if accumulate else 0
    team[T_OUT_ADDRESS] = out.ctypes.data
    team[T_OUT_LENGTH] = out.size
    team[T_OUT_ITEMSIZE] = out.itemsize
    team[T_N_CHUNKS] = n_chunks
    store_release(team, T_DONE, 0)
    store_release(team, T_ORDER, seq << SEQ_SHIFT)  # publishes everything written before
    return seq, n_chunks


@njit(cache=True)
def _wait_done(team, n_chunks):
    """Wait (spinning, then yielding) until every chunk of the current order is done."""
    polls = 0
    while load_acquire(team, T_DONE) < n_chunks:
        polls += 1
        if polls > SPIN_POLLS:
            yield_cpu()


@njit(cache=True)
def team_row(p, lo, hi, X, kp, out, base, coef, accumulate):
    """Row p over [lo, hi) into out (as ``smo.rows._row_chunk``), computed by the owner and the partners."""
    team = X.team
    team[T_P] = p
    X.team_coef[0] = coef
    seq, n_chunks = _publish(team, np.int64(TEAM_ROW), lo, hi, out, base, accumulate)
    _take_row_chunks(seq, team, p, lo, hi, n_chunks, X, kp, out, base, coef, accumulate)
    _wait_done(team, n_chunks)


@njit(cache=True)
def _team_update(kind, v, a_i, a_j, cache, base_i, base_j, lo, hi, X):
    team = X.team
    team[T_SRC_ADDRESS] = cache.ctypes.data
    team[T_SRC_LENGTH] = cache.size
    team[T_BASE_J] = base_j
    X.team_coef[0] = a_i
    X.team_coef[1] = a_j
    seq, n_chunks = _publish(team, kind, lo, hi, v, base_i, np.bool_(False))
    _take_update_chunks(seq, team, kind, lo, hi, n_chunks, v, cache, base_i, base_j, a_i, a_j)
    _wait_done(team, n_chunks)


@njit(cache=True)
def _team_takes(X, length, istate):
    return X.team[T_PARTNERS] > 0 and length >= istate[IS_TEAM_MIN_ROW]


@njit(cache=True)
def kernel_row(p, lo, hi, X, kp, out, base, coef, accumulate, istate):
    """Row p of Q over positions [lo, hi) into out (see ``smo.rows._row_chunk``), split over the team when long."""
    if _team_takes(X, hi - lo, istate):
        team_row(p, lo, hi, X, kp, out, base, coef, accumulate)
    else:
        _row_chunk(p, lo, hi, X, kp, out, base, coef, accumulate)


@njit(cache=True)
def axpy(v, a, cache, base, lo, hi, X, istate):
    """v[t] += a * cache[base + t] for t in [lo, hi) (``smo.scans.axpy_chunk``), split over the team when long."""
    if _team_takes(X, hi - lo, istate) and cache.itemsize == 4 and v.itemsize == 8:
        _team_update(np.int64(TEAM_AXPY), v, a, 0.0, cache, base, base, lo, hi, X)
    else:
        axpy_chunk(v, a, cache, base, lo, hi)


@njit(cache=True)
def update_gradient(G, cache, base_i, base_j, di, dj, active, X, istate):
    """G[t] += Q[i, t] di + Q[j, t] dj for the active t (``smo.scans.update_g_chunk``), split over the team
    when long."""
    if _team_takes(X, active, istate) and cache.itemsize == 4 and G.itemsize == 8:
        _team_update(np.int64(TEAM_UPDATE_G), G, di, dj, cache, base_i, base_j, np.int64(0), active, X)
    else:
        update_g_chunk(G, cache, base_i, base_j, di, dj, np.int64(0), active)


@njit(cache=True)
def inactive_gradient(X, kp, alpha, free_pos, start, stop, active, n, istate, out):
    """out[t - active] += sum over free_pos[start:stop] of alpha_j Q_tj, for t in [active, n), outside the cache.

    For the trace's primal while shrunk: the shrunk variables' gradients without touching G, the
    cache or any counter the solver steers by.
    """
    for idx in range(start, stop):
        j = free_pos[idx]
        kernel_row(j, active, n, X, kp, out, -active, alpha[j], np.bool_(True), istate)


@njit(cache=True)
def _serve(seq, team, X, kp):
    """A partner's share of order seq: read the order, then claim chunks while any are left."""
    kind, lo, hi, base = team[T_KIND], team[T_LO], team[T_HI], team[T_BASE]
    n_chunks = team[T_N_CHUNKS]
    coef, coef_j = X.team_coef[0], X.team_coef[1]
    address, length = team[T_OUT_ADDRESS], team[T_OUT_LENGTH]
    # a late reader may see the next order's fields half written: it then fails every compare-and-swap
    # (the seq moved on) and never touches the views
    if kind == TEAM_ROW:
        p, accumulate = team[T_P], team[T_ACCUMULATE] != 0
        if team[T_OUT_ITEMSIZE] == 4:
            out32 = array_at(address, length, np.empty(0, dtype=np.float32))
            _take_row_chunks(seq, team, p, lo, hi, n_chunks, X, kp, out32, base, coef, accumulate)
        else:
            out64 = array_at(address, length, X.dots)
            _take_row_chunks(seq, team, p, lo, hi, n_chunks, X, kp, out64, base, coef, accumulate)
    else:
        v = array_at(address, length, X.dots)
        cache = array_at(team[T_SRC_ADDRESS], team[T_SRC_LENGTH], np.empty(0, dtype=np.float32))
        _take_update_chunks(seq, team, kind, lo, hi, n_chunks, v, cache, base, team[T_BASE_J], coef, coef_j)


@njit(cache=True, nogil=True)
def partner_loop(team, X, kp, rank):
    """A partner thread's life: serve the owner's orders until ``T_QUIT`` (spinning, then yielding, then
    napping); partner ``rank`` (from 0) serves only while rank < ``T_PARTNERS`` (the owner lowers it when
    the job's share of the cores shrinks, ``RowTeam.limit``)."""
    last = load_acquire(team, T_ORDER) >> SEQ_SHIFT
    polls = 0
    idle_since = monotonic_s()
    while load_acquire(team, T_QUIT) == 0:
        seq = load_acquire(team, T_ORDER) >> SEQ_SHIFT
        if seq != last:
            last = seq
            if rank < load_acquire(team, T_PARTNERS):
                _serve(seq, team, X, kp)
                polls = 0
                idle_since = monotonic_s()
            continue
        polls += 1
        if polls > SPIN_POLLS:
            if monotonic_s() - idle_since > NAP_AFTER_S:
                nap_ns(NAP_NS)
            else:
                yield_cpu()


class RowTeam:
    """``partners`` threads that take chunks of long kernel rows for one solve (see the module docstring)."""

    def __init__(self, X, kp, partners: int):
        self.team = X.team
        self.team[:] = 0
        self.threads = [
            threading.Thread(target=partner_loop, args=(X.team, X, kp, k), name=f"smo-row-partner-{k}", daemon=True)
            for k in range(partners)
        ]
        for thread in self.threads:
            thread.start()
        self.team[T_PARTNERS] = partners

    def limit(self, threads: int) -> None:
        """Split rows over ``threads`` threads at most from now on (the owner's included), up to the team's size.

        Called by the owner between slices, when no order is out: partners beyond the limit see the next
        orders and take no chunk, and each order is cut for the threads that serve it."""
        self.team[T_PARTNERS] = max(0, min(len(self.threads), threads - 1))

    def stop(self) -> None:
        """Stop splitting rows, tell the partners to return and wait for them (idempotent)."""
        self.team[T_PARTNERS] = 0
        self.team[T_QUIT] = 1
        for thread in self.threads:
            thread.join()
        self.threads = []

"""The linear one-class SVM (LIBLINEAR's -s 21) by dual coordinate descent on pairs of variables, w kept.

Problem
-------
Rows x_i (their labels unused), nu in (0, 1]. In LIBSVM's and LIBLINEAR's scaling (the same problem as smo's
``one_class`` with the linear kernel, ``smo.one_class``), the primal

    min_{w, rho}  P(w, rho) = 0.5 * |w|^2 - nu n rho + sum_i max(0, rho - <w, x_i>)

and its dual

    min_alpha  f(alpha) = 0.5 * |w(alpha)|^2,   w(alpha) = sum_i alpha_i x_i,   0 <= alpha_i <= 1,   sum_i alpha_i = nu n.

The gradient is G_i = <w, x_i>; with m = max_{alpha_i < 1} (-G_i) and M = min_{alpha_j > 0} (-G_j) the KKT conditions
hold when m - M <= 0, and m - M is the largest violation (the rule LIBSVM's -e stops on). The model is
f(x) = <w, x> - rho, +1 (inlier) where f > 0; rho is the mean of G over the free variables (else the middle of
[max_{alpha = 1} G, min_{alpha = 0} G]). The certified gap is P(w, rho) - D with D = -f(alpha) (weak duality; P is
negative at the optimum, gap_rel is over |P|).

Algorithm
---------
The dual has one equality constraint, so a coordinate step moves two variables: alpha_i up and alpha_j down by the
same d keeps sum_i alpha_i, and along that direction f changes by d (G_i - G_j) + 0.5 d^2 |x_i - x_j|^2, minimized
at d = (G_j - G_i) / |x_i - x_j|^2 clipped to the box (Platt's two-variable step, as smo's, with the kernel linear and
w kept as in Hsieh et al.'s dual coordinate descent, paper 002, so that a gradient costs one sparse row). An outer
iteration follows Chou, Lin and Lin ("Dual coordinate-descent methods for linear one-class SVM and SVDD", SDM 2020,
the method of LIBLINEAR -s 21): every active G in one pass, then at most active / ``PAIRS_PER_ACTIVE`` pairs, the
most violating ones: the variables that can go up by -G descending against those that can go down by -G ascending,
the k-th of each paired while the pair violates by more than ``tol``, each step on fresh gradients (two sparse dot
products; the pair moves the other way when they have crossed) and the exact |x_i - x_j|^2 (a scatter of x_i). The
most violating are chosen by a selection (``_most_violating``: splits without branches on the keys, around pivots
from a sample) and only those are sorted. (The first version sorted every violating candidate and paired them all:
on ijcnn1's first pass the two sorts of 24,000 keys cost more than the pass's gradients and steps together, and it
took 1.3-2.1x LIBLINEAR's time.) Only the candidates that violate by more than tol with some other enter the
selection (up with -G_i > M + tol, down with -G_j < m - tol: the pairs stepped are the same), so that near the
optimum, and in a pass over every variable, it costs little. Shrinking as LIBSVM's: a variable at 0 with -G_i < M,
or at 1 with -G_i > m, leaves the passes (the active ones stay in row order, read in memory order); when the
violation over the active ones falls below tol, or below ``common.RECHECK_SHRUNK`` of the last full pass's, all come
back for a full check (without the second, a tight run could converge a wrongly shrunk problem first). The stopping
rule is m - M < ``tol`` over every variable (LIBSVM's -e; default 0.01, LIBLINEAR -s 21's -e), then the gap must
certify ``tol_rel`` (``common.run_dual_passes``: else tol is divided by 10 and the passes go on).

Rows with at least ``kernels.DENSE_ROWS_AT_LEAST`` of their entries nonzero (ijcnn1: 13 of 22) are also kept as a
dense n x d array, written in the start's pass: a gradient is then a dot product of fixed length summed in SIMD lanes,
and a step reads and moves w by the two dense rows only. The gradient pass is a function of its
own (``_gradients``): inlined into ``_outer`` it was compiled to vector gathers and scatters across rows, 1.5x slower
on sparse rows and 4x on dense ones.

The start is not LIBSVM's (alpha_i = 1 for the first floor(nu n) rows, the remainder on the next, whatever they
hold) but near the vertex a Frank-Wolfe step from the uniform point alpha_i = nu goes to: that vertex puts alpha_i = 1
on the floor(nu n) rows of smallest gradient <x_i, w(nu)>, w(nu) = nu * sum_j x_j, the rows that weigh least along
the mean. The sum is taken over ``START_SAMPLE`` evenly spaced rows, the threshold is the sample's nu-quantile, and
the rows below it, in row order, take the ones and then the remainder (if fewer rows than the sample said fall
below it, the smallest of the others make up the count): one pass over the rows, as LIBSVM's start with the squared
norms. On a9a, w8a and ijcnn1 it reaches LIBLINEAR's objective in
13, 22 and 57 passes where LIBSVM's start took 16-18, 23 and 68 (tests/benchmarks/README.md, linear one-class).
"""

from __future__ import annotations

import time

import numpy as np
from numba import njit

from worker.solvers.common import RECHECK_SHRUNK, SolverControl, SolverResult, run_dual_passes
from worker.solvers.kernels import (
    clear_row,
    dense_row_dot,
    dense_rows_dot,
    fill_dense_row,
    gather_dot,
    keeps_dense_rows,
    scatter_row,
)
from worker.solvers.smo.one_class import check_one_class

_SAMPLE = 63  # keys sampled for a pivot of the selection
_MAX_ROUNDS = 16  # splits before the selection sorts what is left
PAIRS_PER_ACTIVE = 10  # an outer iteration steps on at most active / 10 pairs, the most violating ones
START_SAMPLE = 1024  # rows (evenly spaced) whose sum ranks the rows for the start


@njit(cache=True, inline="always")  # (a call per row that numba does not inline costs more than the dot)
def _dot(indptr, indices, data, dense, i, v):
    """<x_i, v>: from the dense rows when there are (``dense`` has rows), else from the sparse row."""
    if dense.shape[0] > 0:
        return dense_row_dot(dense, i, v)
    return gather_dot(indptr, indices, data, i, v)


@njit(cache=True, inline="always")
def _move(indptr, indices, data, dense, i, j, d, w):
    """w += d (x_i - x_j) (from the dense rows when there are: the rows a step just read, no sparse row fetched)."""
    if dense.shape[0] > 0:
        for f in range(w.size):
            w[f] += d * (dense[i, f] - dense[j, f])
    else:
        for p in range(indptr[i], indptr[i + 1]):
            w[indices[p]] += d * data[p]
        for p in range(indptr[j], indptr[j + 1]):
            w[indices[p]] -= d * data[p]


@njit(cache=True, inline="always")
def _rows_dot(indptr, indices, data, dense, i, j, scratch):
    """<x_i, x_j> (sparse: x_i scattered into ``scratch``, zero again after)."""
    if dense.shape[0] > 0:
        return dense_rows_dot(dense, i, j)
    scatter_row(indptr, indices, data, i, scratch)
    dot = gather_dot(indptr, indices, data, j, scratch)
    clear_row(indptr, indices, i, scratch)
    return dot


@njit(cache=True)
def _sort(ids, keys, lo, hi, tmp_ids, tmp_keys):
    """Sort [lo, hi) by key ascending in place, ids alongside, ties in their order (a radix sort of the keys' bits,
    a byte a pass, the passes where every key has the same byte skipped: no input pattern makes it slower, and on
    5,000 keys it took a third of numba's merge sort). ``tmp_*``: room as long; -0.0 comes back as 0.0."""
    count = hi - lo
    if count < 2:
        return
    bits = keys[lo:hi].view(np.uint64)
    other = tmp_keys[:count].view(np.uint64)
    top = np.uint64(1) << np.uint64(63)
    counts = np.zeros((8, 256), np.int64)
    for t in range(count):  # the float's bits as an unsigned integer in the same order (-0.0 as 0.0)
        u = bits[t]
        u = np.uint64(0) if u == top else u
        u = ~u if u & top else u | top
        bits[t] = u
        for p in range(8):
            counts[p, (u >> np.uint64(8 * p)) & np.uint64(255)] += 1
    src_bits, dst_bits = bits, other
    src_ids, dst_ids = ids[lo:hi], tmp_ids[:count]
    moved = 0
    starts = np.empty(256, np.int64)
    for p in range(8):
        total = 0
        alike = False  # every key has the same byte here: the pass would move nothing
        for b in range(256):
            starts[b] = total
            total += counts[p, b]
            alike = alike or counts[p, b] == count
        if alike:
            continue
        shift = np.uint64(8 * p)
        for t in range(count):
            u = src_bits[t]
            b = np.int64((u >> shift) & np.uint64(255))
            at = starts[b]
            starts[b] = at + 1
            dst_bits[at] = u
            dst_ids[at] = src_ids[t]
        src_bits, dst_bits = dst_bits, src_bits
        src_ids, dst_ids = dst_ids, src_ids
        moved += 1
    if moved % 2 == 1:  # the last pass wrote the room: back in place
        for t in range(count):
            bits[t] = src_bits[t]
            ids[lo + t] = src_ids[t]
    for t in range(count):
        u = bits[t]
        bits[t] = u & ~top if u & top else ~u


@njit(cache=True)
def _split(ids, keys, lo, hi, pivot, strict, tmp_ids, tmp_keys):
    """Reorder [lo, hi) so that the keys below ``pivot`` (``strict``; else at or below it) come first; returns where
    they end. Without branches on the keys: each item is written at both ends of a buffer and only one end moves on
    (random keys make a branch on them a coin toss for the processor)."""
    front = lo
    back = hi - 1
    for t in range(lo, hi):
        key = keys[t]
        ident = ids[t]
        goes_first = np.int64(key < pivot) if strict else np.int64(key <= pivot)
        tmp_keys[front] = key
        tmp_ids[front] = ident
        tmp_keys[back] = key
        tmp_ids[back] = ident
        front += goes_first
        back -= 1 - goes_first
    for t in range(lo, hi):
        keys[t] = tmp_keys[t]
        ids[t] = tmp_ids[t]
    return front


@njit(cache=True)
def _pivot(keys, lo, hi, rank):
    """A key a little past rank ``rank`` of [lo, hi) (0-based, from the smallest), on the side of the nearer end:
    from a sorted sample of ``_SAMPLE`` evenly spaced keys (keys in a pattern, sorted or not, do not make the splits
    lopsided), one sample step beyond the rank's share of it, so that the next range holds the rank within about
    two sample steps of one of its ends."""
    size = min(_SAMPLE, hi - lo)
    sample = np.empty(size)
    for t in range(size):
        key = keys[lo + (t * (hi - lo)) // size]
        u = t - 1
        while u >= 0 and sample[u] > key:
            sample[u + 1] = sample[u]
            u -= 1
        sample[u + 1] = key
    at = (rank * size) // (hi - lo)
    at = at + 1 if 2 * rank < hi - lo else at - 1
    return sample[max(0, min(size - 1, at))]


@njit(cache=True)
def _most_violating(ids, keys, count, tmp_ids, tmp_keys):
    """Put the ``count`` ids of smallest key first, in ascending key order, in place (a selection by splits around
    pivots from a sample, then a sort of those): ``ids`` and ``keys`` are the caller's work arrays, ``tmp_*`` room
    as long."""
    lo, hi = np.int64(0), ids.size  # (np.int64: a constant 0 would compile the helpers once more for it)
    rounds = 0
    while hi - lo > 1 and lo < count < hi:  # the count-th smallest lies in [lo, hi); all before lo are smaller
        rounds += 1
        if rounds > _MAX_ROUNDS:  # keys that defeat the sampling: sort what is left
            _sort(ids, keys, lo, hi, tmp_ids, tmp_keys)
            break
        pivot = _pivot(keys, lo, hi, count - 1 - lo)
        below = _split(ids, keys, lo, hi, pivot, np.bool_(True), tmp_ids, tmp_keys)
        if count <= below:
            hi = below
        elif below > lo:
            lo = below
        else:  # the pivot is the range's smallest key: split off its ties (never empty)
            at = _split(ids, keys, below, hi, pivot, np.bool_(False), tmp_ids, tmp_keys)
            if count <= at:
                break
            lo = at
    _sort(ids, keys, np.int64(0), count, tmp_ids, tmp_keys)


@njit(cache=True)
def _start_rows(indptr, indices, data, dense, s, threshold, whole, rest, alpha, sq, w, keys_all):
    """``_start``'s pass over the rows: the ones (then the remainder) on the rows whose key <x_i, s> is below
    ``threshold``, in row order; returns (ones placed, remainder placed). (A function of its own, as ``_gradients``.)"""
    n = indptr.size - 1
    fill = dense.shape[0] > 0
    ones = 0
    rest_placed = rest <= 0.0
    for i in range(n):
        if fill:
            fill_dense_row(indptr, indices, data, i, dense)
        norm = 0.0
        key = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            v = data[k]
            norm += v * v
            key += v * s[indices[k]]
        sq[i] = norm
        keys_all[i] = key
        a = 0.0
        if key < threshold:
            if ones < whole:
                a = 1.0
                ones += 1
            elif not rest_placed:
                a = rest
                rest_placed = True
        alpha[i] = a
        if a != 0.0:
            for k in range(indptr[i], indptr[i + 1]):
                w[indices[k]] += a * data[k]
    return ones, rest_placed


@njit(cache=True)
def _start(indptr, indices, data, dense, nu_n, alpha, sq, w, keys_all, work):
    """The start (module docstring) into alpha, the rows' squared norms into sq and w = sum_i alpha_i x_i into w
    (zero), in one pass over the rows after the sample's, which also writes the dense rows (``dense`` n x d, or no
    rows: none kept); ``keys_all`` (n) and ``work`` (``_Passes.work``) are room."""
    n = indptr.size - 1
    whole = min(np.int64(np.floor(nu_n)), n)
    rest = nu_n - whole  # in [0, 1): on one more row
    s = np.zeros(w.size)  # the sum of the sampled rows
    size = min(n, START_SAMPLE)
    for t in range(size):
        i = (t * n) // size
        for k in range(indptr[i], indptr[i + 1]):
            s[indices[k]] += data[k]
    keys = np.empty(size)
    for t in range(size):
        keys[t] = gather_dot(indptr, indices, data, (t * n) // size, s)
    keys.sort()
    threshold = keys[min(size - 1, (whole * size) // n)]  # the sample's nu-quantile of <x_i, s>
    ones, rest_placed = _start_rows(indptr, indices, data, dense, s, threshold, whole, rest, alpha, sq, w, keys_all)
    if ones < whole or not rest_placed:  # fewer rows below the threshold than the sample said: the smallest others
        ids, _, keys, _, tmp_ids, tmp_keys = work
        count = 0
        for i in range(n):
            if alpha[i] == 0.0:
                ids[count] = i
                keys[count] = keys_all[i]
                count += 1
        need = whole - ones + np.int64(not rest_placed)
        _most_violating(ids[:count], keys[:count], need, tmp_ids, tmp_keys)
        for t in range(need):
            i = ids[t]
            a = 1.0 if ones < whole else rest
            ones += 1
            alpha[i] = a
            for k in range(indptr[i], indptr[i + 1]):
                w[indices[k]] += a * data[k]


@njit(cache=True)
def _keep_below(ids, keys, count, bound):
    """Keep, in order at the front, the first ``count`` candidates whose key is below ``bound``; returns how many
    (without branches on the keys: each is written and the end moves on only for the kept)."""
    kept = 0
    for t in range(count):
        ids[kept] = ids[t]
        keys[kept] = keys[t]
        kept += np.int64(keys[t] < bound)
    return kept


@njit(cache=True)
def _snapped(a):
    """alpha within 1e-12 of a bound, at the bound (so that shrinking sees it there)."""
    return 0.0 if a <= 1e-12 else (1.0 if a >= 1.0 - 1e-12 else a)


@njit(cache=True)
def _gradients(indptr, indices, data, dense, w, alpha, G, index, active, work):
    """The gradients of index[:active] into G, every variable that can go up (down) as a candidate in ``work``
    (``_outer``'s): returns (m, M, candidates up, candidates down). (A function of its own: inside ``_outer`` LLVM
    compiled this loop to vector gathers and scatters across rows, 1.5-4x slower than one row at a time.)"""
    ups, lows, up_keys, low_keys, _, _ = work
    m = -np.inf
    M = np.inf
    n_up = 0
    n_low = 0
    for s in range(active):
        i = index[s]
        g = _dot(indptr, indices, data, dense, i, w)
        G[i] = g
        can_go_up = alpha[i] < 1.0
        can_go_down = alpha[i] > 0.0
        if can_go_up and -g > m:
            m = -g
        if can_go_down and -g < M:
            M = -g
        ups[n_up] = i
        up_keys[n_up] = g  # ascending G: -G descending
        lows[n_low] = i
        low_keys[n_low] = -g  # ascending -G
        n_up += np.int64(can_go_up)
        n_low += np.int64(can_go_down)
    return m, M, n_up, n_low


@njit(cache=True)
def _outer(indptr, indices, data, dense, sq, w, alpha, G, index, active, tol, scratch, shrink, work):
    """One outer iteration (module docstring) over index[:active]: returns (active, violation before the steps).
    ``dense``: the rows as a dense array, or no rows (``_dot``). ``work``: the candidates' ids and keys (up, down),
    and room to split them (``_Passes.work``)."""
    ups, lows, up_keys, low_keys, tmp_ids, tmp_keys = work
    m, M, n_up, n_low = _gradients(indptr, indices, data, dense, w, alpha, G, index, active, work)
    violation = m - M
    if shrink:  # a stable partition: the active rows stay in their order (ascending, so read in memory order)
        kept = 0
        dropped = 0
        for s in range(active):
            i = index[s]
            if (alpha[i] <= 0.0 and -G[i] < M) or (alpha[i] >= 1.0 and -G[i] > m):
                tmp_ids[dropped] = i
                dropped += 1
            else:
                index[kept] = i
                kept += 1
        for t in range(dropped):
            index[kept + t] = tmp_ids[t]
        active = kept
    if violation < tol:
        return active, violation
    # only a candidate that violates by more than tol with some other can be in a pair that steps: up with
    # -G_i > M + tol, down with -G_j < m - tol (the k-th pair, ranked, violates by more than tol only if both do);
    # near the optimum few do, and the selection then costs little
    n_up = _keep_below(ups, up_keys, n_up, -(M + tol))  # (up's key is G: -G_i > M + tol)
    n_low = _keep_below(lows, low_keys, n_low, m - tol)
    # the most violating of the candidates (those shrunk just now are the least violating: never chosen before
    # the others)
    pairs = min(n_up, n_low, max(active // PAIRS_PER_ACTIVE, 1))
    if pairs == 0:
        return active, violation
    _most_violating(ups[:n_up], up_keys[:n_up], pairs, tmp_ids, tmp_keys)
    _most_violating(lows[:n_low], low_keys[:n_low], pairs, tmp_ids, tmp_keys)
    for k in range(pairs):
        i = ups[k]
        j = lows[k]
        if -up_keys[k] - low_keys[k] <= tol:  # -G_i + G_j: the pairs left violate less than tol (at the pass)
            break
        if i == j:
            continue
        gi = _dot(indptr, indices, data, dense, i, w)
        gj = _dot(indptr, indices, data, dense, j, w)
        if gi == gj:
            continue
        dot = _rows_dot(indptr, indices, data, dense, i, j, scratch)  # x_i'x_j
        eta = sq[i] + sq[j] - 2.0 * dot
        eta = eta if eta > 1e-12 else 1e-12
        d = (gj - gi) / eta  # alpha_i + d, alpha_j - d: up for i while -G_i > -G_j, else the pair the other way
        d = min(d, 1.0 - alpha[i], alpha[j]) if d > 0.0 else max(d, -alpha[i], alpha[j] - 1.0)
        if d == 0.0:
            continue
        alpha[i] = _snapped(alpha[i] + d)
        alpha[j] = _snapped(alpha[j] - d)
        _move(indptr, indices, data, dense, i, j, d, w)
    return active, violation


@njit(cache=True)
def _objectives(indptr, indices, data, dense, w, alpha, nu_n):
    """(P(w, rho), D, rho) over every row (module docstring; ``dense`` as ``_outer``'s)."""
    n = indptr.shape[0] - 1
    free_sum = 0.0
    n_free = 0
    low = -np.inf  # max G at alpha = 1
    high = np.inf  # min G at alpha = 0
    G = np.empty(n)
    for i in range(n):
        g = _dot(indptr, indices, data, dense, i, w)
        G[i] = g
        if alpha[i] >= 1.0:
            low = max(low, g)
        elif alpha[i] <= 0.0:
            high = min(high, g)
        else:
            free_sum += g
            n_free += 1
    if n_free > 0:
        rho = free_sum / n_free
    elif np.isfinite(low) and np.isfinite(high):
        rho = 0.5 * (low + high)
    else:
        rho = low if np.isfinite(low) else high
    half = 0.0
    for j in range(w.shape[0]):
        half += 0.5 * w[j] * w[j]
    hinge = 0.0
    for i in range(n):
        hinge += max(0.0, rho - G[i])
    return half - nu_n * rho + hinge, -half, rho


class _Passes:
    """The outer iterations for ``run_dual_passes``: shrinking, and every variable back when the active ones satisfy
    the rule."""

    def __init__(self, arrays, w, alpha, shrinking: bool) -> None:
        self.arrays = arrays
        self.w, self.alpha = w, alpha
        self.n = alpha.size
        self.index = np.arange(self.n, dtype=np.int64)
        self.active = self.n
        self.G = np.zeros(self.n)
        self.scratch = np.zeros(w.size)
        n = self.n  # the candidates' ids and keys (up, down) and room to split them: ``_outer``'s ``work``
        self.work = (
            np.empty(n, np.int64),
            np.empty(n, np.int64),
            np.empty(n),
            np.empty(n),
            np.empty(n, np.int64),
            np.empty(n),
        )
        self.shrinking = shrinking
        self.tol = 0.0
        self.full = True
        self.full_violation = np.inf  # the violation of the last pass over every variable

    def one_pass(self, stop_at: float) -> tuple[float, bool]:
        self.full = self.active == self.n
        indptr, indices, data, dense, sq = self.arrays
        self.active, violation = _outer(
            indptr, indices, data, dense, sq, self.w, self.alpha, self.G, self.index, self.active, self.tol, self.scratch,
            self.shrinking, self.work,
        )  # fmt: skip
        return violation, True

    def unshrink(self) -> None:
        """Every variable back in the passes, in row order."""
        self.active = self.n
        self.index[:] = np.arange(self.n)

    def after_pass(self, violation: float, threshold: float) -> bool:
        self.tol = threshold
        if self.full:
            self.full_violation = violation
        if violation >= threshold:
            if not self.full and violation < RECHECK_SHRUNK * self.full_violation:
                self.unshrink()  # (common.RECHECK_SHRUNK: a variable shrunk wrongly comes back now)
            return False
        if not self.full:
            self.unshrink()
            return False
        return True


def solve_one_class_linear(indptr, indices, data, n_features: int, params, control=None) -> SolverResult:
    """Train the linear one-class SVM (module docstring); ``params``: nu, tol, tol_rel, max_iter, shrinking,
    trace_every, trace_budget (dcd's). The result's ``w`` and ``bias`` = -rho score rows as f(x) = <w, x> + bias."""
    control = control or SolverControl()
    started = time.perf_counter()
    indptr = np.asarray(indptr, dtype=np.int64)
    n = indptr.size - 1
    nu = check_one_class(n, params.nu)
    data = np.asarray(data, dtype=np.float64)
    alpha = np.empty(n)
    sq, w = np.empty(n), np.zeros(int(n_features))
    indices = np.asarray(indices)
    nnz = indptr[-1]
    dense = np.empty((n if keeps_dense_rows(nnz, n, n_features) else 0, int(n_features)))  # written by _start
    arrays = (indptr, indices, data, dense, sq)
    passes = _Passes(arrays, w, alpha, bool(params.shrinking))
    _start(indptr, indices, data, dense, nu * n, alpha, sq, w, passes.G, passes.work)
    passes.tol = float(params.tol)
    nu_n = nu * n
    rho = [0.0]

    def objectives():
        primal, dual, rho[0] = _objectives(indptr, indices, data, dense, w, alpha, nu_n)
        return float(primal), float(dual)

    setup = time.perf_counter() - started
    run = run_dual_passes(passes.one_pass, passes.after_pass, objectives, lambda: passes.active, params, control)
    note = "primal minus the dual value of the returned alpha (weak duality), over |primal|"
    # the offset is -rho: a bias "feature" of value 1 whose weight is -rho
    return run.result(np.append(w, -rho[0]), 1.0, setup, note, alpha=alpha.copy(), rho=rho[0])

"""Sequential minimal optimization (SMO) for the kernel C-SVC, with a kernel row cache and shrinking.

Problem
-------
Rows x_i (CSR), labels y_i in {-1, +1}, a kernel K (``worker.solvers.kernels``) with feature map phi,
per-row costs C_i = C * class_weight(y_i). The primal is LIBSVM's C-SVC, in the service's convention
(C multiplies a sum of losses) with an unregularized threshold b:

    min_{w, b}  P(w, b) = 0.5 * |w|^2 + sum_i C_i * max(0, 1 - y_i (<w, phi(x_i)> + b)).

Its dual (Platt's (3)-(5), written as a minimization with Q_ij = y_i y_j K(x_i, x_j)) is

    min_alpha  f(alpha) = 0.5 * alpha' Q alpha - sum_i alpha_i,
    s.t.       0 <= alpha_i <= C_i,   sum_i y_i alpha_i = 0,

and the model is decision(x) = sum_i y_i alpha_i K(x_i, x) + b. (Platt writes u = ... - b; here b is
added, as everywhere in the service, so Platt's b is our -b.) We keep the gradient G = Q alpha - 1 of
f for every variable. With F_t = -y_t G_t, and the index sets

    I_up  = {t : y_t = +1, alpha_t < C_t}  U  {t : y_t = -1, alpha_t > 0}
    I_low = {t : y_t = -1, alpha_t < C_t}  U  {t : y_t = +1, alpha_t > 0},

the KKT conditions (Platt's (6): alpha_t = 0 => y_t u_t >= 1, 0 < alpha_t < C => y_t u_t = 1,
alpha_t = C => y_t u_t <= 1, with y_t u_t - 1 = G_t + y_t b) hold for some b exactly when
m(alpha) = max_{I_up} F  <=  M(alpha) = min_{I_low} F, and then every b in [m, M] is optimal.
m - M is "the maximal KKT violation" (LIBSVM's -e criterion).

Two-variable step (Platt, Section 2.1, eq. (7)-(9))
----------------------------------------------------
For a pair (1, 2), s = y_1 y_2, E_t = u_t - y_t, so E_1 - E_2 = y_1 G_1 - y_2 G_2 (b cancels):

    alpha_2' = alpha_2 + y_2 (E_1 - E_2) / eta,   eta = K_11 + K_22 - 2 K_12             (8)
    alpha_2' clipped to [L, H],
        L = max(0, alpha_2 + s alpha_1 - (s + 1) C_1 / 2),
        H = min(C_2, alpha_2 + s alpha_1 - (s - 1) C_1 / 2)                             (7)
    alpha_1' = alpha_1 + s (alpha_2 - alpha_2')                                          (9)

(7) is the paper's with the two box sizes kept apart (C_1 for the bounds that come from alpha_1's
box, C_2 for alpha_2's own box), which is what per-class costs need; with C_1 = C_2 it is the paper's
formula. When eta <= 0 (a non-PSD sigmoid kernel or duplicated rows) eta is replaced by 1e-12, which
sends alpha_2' to the end of [L, H] that lowers f, as Platt's evaluation of both ends would. After the
step G moves by Q[:, 1] d_1 + Q[:, 2] d_2 (two kernel rows), and f by
G_1 d_1 + G_2 d_2 + 0.5 (Q_11 d_1^2 + Q_22 d_2^2) + Q_12 d_1 d_2, so the dual value is tracked exactly
without extra kernel work.

Working-set selection ``working_set``
-------------------------------------
* ``"second_order"`` (default): i = argmax_{t in I_up} F_t; j = argmax over t in I_low with F_t < F_i
  of (F_i - F_t)^2 / eta_it (the second-order gain of the pair, Fan, Chen & Lin 2005, the rule LIBSVM
  uses); stop when m - M < tol.
* ``"platt"`` (Section 2.2): the outer loop alternates one pass over all (active) examples with
  repeated passes over the non-bound ones until none of them changes, then a full pass again; it ends
  when a full pass changes nothing. An example is examined when it violates the KKT conditions
  against the current threshold b by more than eps = tol / 2 (if no example does, m - M <= 2 eps = tol,
  so both modes stop on the same criterion). The second choice maximises |E_1 - E_2| over the non-bound
  examples; if that step makes no progress, the non-bound examples are tried from a random start, then
  all examples from a random start (seeded splitmix64). b is set after each step so that the KKT
  conditions hold for the two examples (b = F_t of a non-bound one, the mean of both ends otherwise).
  Platt's error cache holds the errors of the non-bound examples and evaluates the others on demand;
  here every active error comes from the maintained G (the same two-row update the second-order mode
  needs), so the choices are the paper's and only the bookkeeping differs. A step counts as progress
  when it moves alpha_2 by more than 1e-12 * (alpha_2 + alpha_2' + 1e-12) (Platt's test with a smaller
  constant: his 1e-3 would refuse steps that the 1e-3 violation criterion still needs). If a full pass
  ever ends with m - M > tol, one step on the maximal violating pair is taken and the passes resume
  (a safety net; with the test above it is not expected to fire).

Kernel cache ``cache_mb``
-------------------------
A least-recently-used cache of rows of Q (float32, as LIBSVM's Qfloat) in a pool of ``cache_mb``
MiB split into equal slots; a row of the active problem has length ``active_size`` (see shrinking),
the variables being kept permuted so that the active ones come first. When the active set shrinks
well below the slot length while the pool is full, the pool is re-cut into shorter, more numerous
slots (rows keep their prefix), and re-cut back to full rows (keeping the most recently used ones)
when everything is made active again; the rows of the free variables used to rebuild the gradient
then go through the cache at full length. Moving a variable out of the active prefix swaps two columns in every cached row (or
truncates a row that holds only one of them). At least two rows are always kept, whatever cache_mb.
Rows needed beyond the slot length (the G_bar update below while shrunk) are computed without caching.

Shrinking ``shrinking``
-----------------------
Every min(n, 1000) steps (second_order) or after every full pass (platt), a variable at a bound
leaves the active set when it cannot be part of any violating pair: t in I_up only with F_t < M, or
t in I_low only with F_t > m (Joachims' heuristic, cited in Section 2.2: "examples which fulfill the
KKT conditions more than the worst example failed"). G is then updated only for active variables; to
rebuild it for the others, G_bar_t = sum_{j: alpha_j = C_j} C_j Q_tj is maintained for all t (a full row
whenever a variable reaches or leaves its upper bound), and G_t = G_bar_t - 1 + sum_{j free} alpha_j Q_tj.
When m - M first falls below 10 * tol every variable is made active again (gradient rebuilt) and
shrinking resumes; when the active problem has converged, the gradient is rebuilt, every variable
made active and the stopping test repeated on the whole problem (the final un-shrunk check). The
rebuild runs in chunks between control checks.

Kernel rows
-----------
A row Q[p, :] takes the dot products <x_p, x_t> for all positions t at once, from copies of the rows
kept in position order (rewritten after each shrinking pass): when the transposed dense copy
(n_features x n) takes at most 256 MB and at least 5% of its entries are stored (a9a, ijcnn1), row p's
entries times its columns (contiguous, vectorized, computed 1,024 positions at a time so that they stay
in the first-level cache); otherwise the columns in CSC form, positions ascending, so that only the rows
sharing a feature with x_p are touched and a row of the active problem stops at active_size. The rbf
kernel then takes ``kernels.fast_exp`` (within one ulp of exp, vectorizes). LIBSVM instead merges the
two index lists of every pair. Both give each dot product summed in the order of row p's entries.

Linear kernel (Section 2.3): the result also carries the folded weight vector w = sum_i y_i alpha_i x_i
(prediction then costs one sparse dot product); the kernel rows themselves are the same dot products.

Stopping rule in the user's terms: training stops when the largest KKT violation m - M over ALL
examples is below ``tol`` (LIBSVM's -e, default 1e-3), or after ``max_iter`` two-variable steps
(default max(10^7, 100 n), LIBSVM's cap), or at a deadline or cancel (checked between slices of at
most ~0.1 s of numba work, so a cancel is honoured within a fraction of a second).

Outputs
-------
``SolverResult``: ``w`` None (the folded weight vector for the linear kernel), ``bias`` = b (the mean
of F_t over the free support vectors, or the middle of [m, M] if there are none), ``objective`` = the
primal P(w, b), computed from G (y_t u_t = G_t + 1 + y_t b, |w|^2 = alpha' (G + 1)) whenever G is
complete (after a deadline or cancel that stops a shrunk run, G is completed first if that costs at
most 2e7 kernel values, i.e. well under a second; otherwise ``objective`` is NaN and
``extra["primal_complete"]`` is False),
``n_iter`` = number of two-variable steps. ``extra``: "support_indices" (int64 row ids with alpha > 0,
ascending), "dual_coef" (y_i alpha_i there), "n_sv", "n_bounded_sv" (alpha_i = C_i), "dual_objective"
(the dual value D = sum alpha - 0.5 alpha' Q alpha, which LIBSVM prints negated as "obj"),
"primal_complete" (whether ``objective`` is the primal over all rows), "max_violation", "cache_hit_rate", "kernel", "alpha" (all n dual variables, row
order), "active_size", "min_active_size", "working_set", "safety_steps" (platt's safety-net steps),
and counters "kernel_values_computed" (all kernel values evaluated), "kernel_values_full_rows" (of
them, computed beyond the slot length for G_bar), "kernel_values_reconstruct" (during gradient
rebuilds), "full_row_updates".
Trace points (every ``trace_every`` steps and at the end): iteration, elapsed_s, dual, max_violation
(over the active set), n_sv, n_bounded_sv, cache_hit_rate, active_size, and primal/gap: at every
point when no variable is shrunk; while shrunk, at most every PRIMAL_EVERY_S seconds (the shrunk
variables' gradients are then computed outside the cache, at most about a fifth of the run's time,
counted as trace time).

What runs in parallel (``n_threads``, default: the threads numba allows this process): a kernel row is
split into contiguous position ranges (4 per thread, taken by whichever thread is free); the gradient
update (two rows) into one range per thread; the two working-set scans take each thread's first maximum
and keep the first of those (so the choice is the one a single scan makes). Every value is computed by
the same arithmetic whatever the split, so 1 and 2 threads take the very same steps and return the same
alpha (tested). Passes shorter than ``PAR_MIN_ROW`` (kernel rows, 16,384 values: about 0.1 ms) or
``PAR_MIN_SCAN`` (gradient update and scans, 262,144 positions: about 1 ms) run on one thread in the
calling thread: a parallel region costs tens of microseconds on an idle machine and up to milliseconds on
a busy one (measured: ~100 us for an empty region at load 9 on 2 cores, and smo on 2 threads with
every pass split ran 10x slower than on one there). numba's prange runs on its ``workqueue`` threading
layer in the workers (fork-safe; processes x threads <= cores). Deterministic for a given seed and
thread count (only ``platt`` draws numbers).
"""

from __future__ import annotations

import math
import time

import numba
import numpy as np
import scipy.sparse as sp
from numba import njit, prange

from worker.solvers.common import (
    SolverControl,
    SolverInputError,
    SolverResult,
    StopReason,
    binary_signs,
    check_csr,
    check_int,
    check_positive,
    rng_below,
    rng_state,
    solver_threads,
)
from worker.solvers.kernels import (
    KERNEL_LINEAR,
    KERNEL_RBF,
    fast_exp,
    kernel_diagonal,
    kernel_from_dot,
    kernel_params,
    row_sq_norms,
)

# variable status
LOWER = 0
UPPER = 1
FREE = 2

# istate slots
IS_ITER = 0
IS_ACTIVE = 1
IS_HITS = 2
IS_MISSES = 3
IS_UNSHRUNK = 4
IS_SHRINK_COUNTER = 5
IS_SLOT_LEN = 6
IS_N_SLOTS = 7
IS_LRU_HEAD = 8
IS_LRU_TAIL = 9
IS_FREE_TOP = 10
IS_EXAMINE_ALL = 11
IS_PASS_POS = 12
IS_NUM_CHANGED = 13
IS_COMPUTED = 14
IS_SAFETY_STEPS = 15
IS_MIN_ACTIVE = 16
IS_UNCACHED = 17
IS_FULL_ROWS = 18
IS_RECONSTRUCTED = 19
IS_THREADS = 20
IS_PAR_MIN_ROW = 21
IS_PAR_MIN_SCAN = 22
IS_SIZE = 23

# fstate slots
FS_F = 0  # dual f(alpha) (minimization form)
FS_B = 1  # Platt's running threshold
FS_VIOL = 2  # m - M at the last selection
FS_SIZE = 3

# run codes
RUN_BUDGET = 0
RUN_CONVERGED = 1
RUN_RECONSTRUCT = 2

TAU = 1e-12
SLICE_SECONDS = 0.1
FINAL_REBUILD_VALUES = 20_000_000  # kernel values a stop may still spend to report the primal
# a transposed dense copy of the rows serves the dot products when it takes at most this many bytes
# and at least this fraction of its entries are stored (else the columns, CSC, do)
_DENSE_T_MAX_BYTES = 256 << 20
_DENSE_T_MIN_FILL = 0.05
# below these lengths a pass runs on one thread: a parallel region costs tens of microseconds on an idle
# machine and milliseconds on a busy one, so only passes of about 0.1 ms (kernel rows) or 1 ms (scans) and
# more are split. Read at each solve (istate), so that tests can lower them.
PAR_MIN_ROW = 16384
PAR_MIN_SCAN = 262144
_CHUNKS_PER_THREAD = 4  # a split row is handed out in this many chunks per thread, first come first served
_ROW_BLOCK = 1024  # kernel rows are computed this many positions at a time
_SCAN_BLOCK = 256  # the working-set scans take block maxima, then look for the first maximum in its block
PRIMAL_EVERY_S = 2.0  # while shrunk, trace points carry the primal at most this often (see record())

WORKING_SETS = ("second_order", "platt")


# ---------------------------------------------------------------------------------------------
# LRU cache of Q rows
# ---------------------------------------------------------------------------------------------


@njit(cache=True)
def _smo_lru_unlink(s, lru_prev, lru_next, istate):
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
def _smo_lru_push_front(s, lru_prev, lru_next, istate):
    head = istate[IS_LRU_HEAD]
    lru_prev[s] = -1
    lru_next[s] = head
    if head >= 0:
        lru_prev[head] = s
    else:
        istate[IS_LRU_TAIL] = s
    istate[IS_LRU_HEAD] = s


@njit(cache=True)
def _smo_row_chunk(p, lo, hi, X, kp, out, base, coef, accumulate):
    """out[base + t] = Q[p, t] for t in [lo, hi), or out[base + t] += coef * Q[p, t] when accumulate.

    <x_p, x_t> for all t at once: row p's entries times the transposed dense copy (contiguous, vectorized)
    or times the columns of its features (CSC in position order: only the rows that share a feature are
    touched). The accumulation order per t is row p's entry order whatever [lo, hi), so a row split over
    threads gives the same values.
    """
    indptr, indices, data, sq, y, dense_t, col_ptr, col_pos, col_val, dots = X[:10]
    # loops run over views from index 0 (numba then knows the index is not negative and LLVM vectorizes
    # them), block by block so that the block of dot products stays in the first-level cache
    if dense_t.shape[1] > 1:
        for b0 in range(lo, hi, _ROW_BLOCK):
            b1 = min(b0 + _ROW_BLOCK, hi)
            d = dots[b0:b1]
            for t in range(b1 - b0):
                d[t] = 0.0
            for e in range(indptr[p], indptr[p + 1]):
                v = data[e]
                col = dense_t[indices[e], b0:b1]
                for t in range(b1 - b0):
                    d[t] += v * col[t]
            _smo_row_kernel(p, b0, b1, X, kp, out, base, coef, accumulate)
        return
    for t in range(lo, hi):
        dots[t] = 0.0
    for e in range(indptr[p], indptr[p + 1]):
        k = indices[e]
        v = data[e]
        a = col_ptr[k]
        b = col_ptr[k + 1]
        if lo > 0:
            h = b
            while a < h:
                mid = (a + h) >> 1
                if col_pos[mid] < lo:
                    a = mid + 1
                else:
                    h = mid
        for q in range(a, b):
            t = col_pos[q]
            if t >= hi:
                break
            dots[t] += v * col_val[q]
    for b0 in range(lo, hi, _ROW_BLOCK):
        _smo_row_kernel(p, b0, min(b0 + _ROW_BLOCK, hi), X, kp, out, base, coef, accumulate)


@njit(cache=True)
def _smo_row_kernel(p, lo, hi, X, kp, out, base, coef, accumulate):
    """Turn the dot products dots[lo:hi] into Q[p, t] and store (or add coef times) them at out[base + t]."""
    sq, y, dots = X[3], X[4], X[9]
    code, gamma, coef0, degree = kp
    m = hi - lo
    d = dots[lo:hi]
    yp = y[p]
    sq_p = sq[p]
    yy = y[lo:hi]
    ss = sq[lo:hi]
    if code == KERNEL_RBF:
        # the common case spelled out, so that the loop vectorizes (fast_exp has no call inside)
        for t in range(m):
            d2 = sq_p + ss[t] - 2.0 * d[t]
            d[t] = yp * yy[t] * fast_exp(-gamma * max(d2, 0.0))
    else:
        for t in range(m):
            d[t] = yp * yy[t] * kernel_from_dot(code, gamma, coef0, degree, d[t], sq_p, ss[t])
    o = out[base + lo:base + hi]
    if accumulate:
        for t in range(m):
            o[t] += coef * d[t]
    else:
        for t in range(m):
            o[t] = d[t]


@njit(cache=True, parallel=True)
def _smo_row_parallel(p, lo, hi, X, kp, out, base, coef, accumulate, n_chunks):
    # solve_smo sets numba's chunk size to 1: chunks go to whichever thread is free (a thread the system has
    # descheduled does not hold the row up)
    for c in prange(n_chunks):
        _smo_row_chunk(p, lo + (hi - lo) * c // n_chunks, lo + (hi - lo) * (c + 1) // n_chunks, X, kp, out, base,
                       coef, accumulate)


@njit(cache=True)
def _smo_row(p, lo, hi, X, kp, out, base, coef, accumulate, istate):
    """Row p of Q over positions [lo, hi) into out (see _smo_row_chunk), split over the threads when long."""
    threads = istate[IS_THREADS]
    if threads > 1 and hi - lo >= istate[IS_PAR_MIN_ROW]:
        _smo_row_parallel(p, lo, hi, X, kp, out, base, coef, accumulate, _CHUNKS_PER_THREAD * threads)
    else:
        _smo_row_chunk(p, lo, hi, X, kp, out, base, coef, accumulate)


@njit(cache=True)
def _smo_get_row(p, length, X, kp, ca, istate, xbuf):
    """Make row p of Q (positions [0, length), length <= slot length) valid in the cache; return its offset."""
    cache, slot_of, slot_owner, slot_fill, lru_prev, lru_next, free_stack = ca
    L = istate[IS_SLOT_LEN]
    s = slot_of[p]
    if s >= 0:
        if istate[IS_LRU_HEAD] != s:
            _smo_lru_unlink(s, lru_prev, lru_next, istate)
            _smo_lru_push_front(s, lru_prev, lru_next, istate)
    else:
        if istate[IS_FREE_TOP] > 0:
            istate[IS_FREE_TOP] -= 1
            s = free_stack[istate[IS_FREE_TOP]]
        else:
            s = istate[IS_LRU_TAIL]
            _smo_lru_unlink(s, lru_prev, lru_next, istate)
            slot_of[slot_owner[s]] = -1
        slot_owner[s] = p
        slot_of[p] = s
        slot_fill[s] = 0
        _smo_lru_push_front(s, lru_prev, lru_next, istate)
    base = s * L
    fill = slot_fill[s]
    if fill < length:
        istate[IS_MISSES] += 1
        _smo_row(p, fill, length, X, kp, cache, base, 0.0, False, istate)
        slot_fill[s] = length
        istate[IS_COMPUTED] += length - fill
    else:
        istate[IS_HITS] += 1
    return base


@njit(cache=True)
def _smo_cache_reslot(L_new, n_slots_new, ca, istate):
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
            _smo_lru_push_front(k, lru_prev, lru_next, istate)
        top = 0
        for s in range(n_slots_new - 1, n_keep - 1, -1):
            free_stack[top] = s
            top += 1
        istate[IS_FREE_TOP] = top
    istate[IS_SLOT_LEN] = L_new
    istate[IS_N_SLOTS] = n_slots_new


# ---------------------------------------------------------------------------------------------
# the step, shared by both working-set rules
# ---------------------------------------------------------------------------------------------


@njit(cache=True, inline="always")
def _smo_in_up(yt, st):
    return (yt > 0.0 and st != UPPER) or (yt < 0.0 and st != LOWER)


@njit(cache=True, inline="always")
def _smo_in_low(yt, st):
    return (yt < 0.0 and st != UPPER) or (yt > 0.0 and st != LOWER)


@njit(cache=True, inline="always")
def _smo_status(a, c):
    if a >= c:
        return UPPER
    if a <= 0.0:
        return LOWER
    return FREE


@njit(cache=True)
def _smo_pair_target(i, j, Kij, alpha, G, Cp, QD, y):
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
def _smo_gbar_row(p, coef, n, X, kp, ca, istate, G_bar, xbuf):
    """G_bar[t] += coef * Q[p, t] for all t in [0, n) (the part beyond the slot length is not cached)."""
    cache = ca[0]
    L = istate[IS_SLOT_LEN]
    lim = min(n, L)
    istate[IS_FULL_ROWS] += 1
    base = _smo_get_row(p, lim, X, kp, ca, istate, xbuf)
    _smo_axpy(G_bar, coef, cache, base, 0, lim, X, istate)
    if lim < n:
        _smo_row(p, lim, n, X, kp, G_bar, 0, coef, True, istate)
        istate[IS_COMPUTED] += n - lim
        istate[IS_UNCACHED] += n - lim


@njit(cache=True)
def _smo_axpy_chunk(v, a, cache, base, lo, hi):
    vv = v[lo:hi]
    cc = cache[base + lo:base + hi]
    for t in range(hi - lo):
        vv[t] += a * cc[t]


@njit(cache=True, parallel=True)
def _smo_axpy_parallel(v, a, cache, base, lo, hi, n_chunks):
    for c in prange(n_chunks):
        _smo_axpy_chunk(v, a, cache, base, lo + (hi - lo) * c // n_chunks, lo + (hi - lo) * (c + 1) // n_chunks)


@njit(cache=True)
def _smo_axpy(v, a, cache, base, lo, hi, X, istate):
    """v[t] += a * cache[base + t] for t in [lo, hi)."""
    threads = istate[IS_THREADS]
    if threads > 1 and hi - lo >= istate[IS_PAR_MIN_SCAN]:
        _smo_axpy_parallel(v, a, cache, base, lo, hi, threads)
    else:
        _smo_axpy_chunk(v, a, cache, base, lo, hi)


@njit(cache=True)
def _smo_update_g_chunk(G, cache, base_i, base_j, di, dj, lo, hi):
    g = G[lo:hi]
    qi = cache[base_i + lo:base_i + hi]
    qj = cache[base_j + lo:base_j + hi]
    for t in range(hi - lo):
        g[t] += qi[t] * di + qj[t] * dj


@njit(cache=True, parallel=True)
def _smo_update_g_parallel(G, cache, base_i, base_j, di, dj, active, n_chunks):
    for c in prange(n_chunks):
        _smo_update_g_chunk(G, cache, base_i, base_j, di, dj, active * c // n_chunks, active * (c + 1) // n_chunks)


@njit(cache=True)
def _smo_apply(i, j, ai_new, aj_new, base_i, base_j, n, X, kp, ca, alpha, G, G_bar, Cp, QD, status,
               istate, fstate, xbuf):
    """Move (alpha_i, alpha_j) to the new values: update f, G (active part), status and G_bar."""
    cache = ca[0]
    active = istate[IS_ACTIVE]
    di = ai_new - alpha[i]
    dj = aj_new - alpha[j]
    Qij = cache[base_i + j]
    fstate[FS_F] += G[i] * di + G[j] * dj + 0.5 * (QD[i] * di * di + QD[j] * dj * dj) + Qij * di * dj
    if istate[IS_THREADS] > 1 and active >= istate[IS_PAR_MIN_SCAN]:
        _smo_update_g_parallel(G, cache, base_i, base_j, di, dj, active, istate[IS_THREADS])
    else:
        _smo_update_g_chunk(G, cache, base_i, base_j, di, dj, 0, active)
    alpha[i] = ai_new
    alpha[j] = aj_new
    old_ui = status[i] == UPPER
    old_uj = status[j] == UPPER
    status[i] = _smo_status(ai_new, Cp[i])
    status[j] = _smo_status(aj_new, Cp[j])
    new_ui = status[i] == UPPER
    new_uj = status[j] == UPPER
    if old_ui != new_ui:
        _smo_gbar_row(i, Cp[i] if new_ui else -Cp[i], n, X, kp, ca, istate, G_bar, xbuf)
    if old_uj != new_uj:
        _smo_gbar_row(j, Cp[j] if new_uj else -Cp[j], n, X, kp, ca, istate, G_bar, xbuf)
    istate[IS_ITER] += 1


@njit(cache=True, inline="always")
def _smo_up_low(yt, st):
    """(t in I_up, t in I_low) without branches (so that the scans below run straight through)."""
    pos = yt > 0.0
    return (pos & (st != UPPER)) | ((~pos) & (st != LOWER)), ((~pos) & (st != UPPER)) | (pos & (st != LOWER))


@njit(cache=True)
def _smo_extremes_range(y, G, status, lo, hi):
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
            up, low = _smo_up_low(yt, st[t])
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
            if _smo_in_up(y[t], status[t]) and -y[t] * G[t] == m:
                i_max = t
                break
    return m, M, i_max


@njit(cache=True, parallel=True)
def _smo_extremes_parallel(y, G, status, active, n_chunks, part_f, part_g, part_i):
    for c in prange(n_chunks):
        m, M, i = _smo_extremes_range(y, G, status, active * c // n_chunks, active * (c + 1) // n_chunks)
        part_f[c] = m
        part_g[c] = M
        part_i[c] = i


@njit(cache=True)
def _smo_extremes(y, G, status, active):
    """(m, M, i_max) over the active variables: m = max_{I_up} F, M = min_{I_low} F."""
    return _smo_extremes_range(y, G, status, 0, active)


@njit(cache=True)
def _smo_extremes_threads(X, G, status, active, istate):
    """_smo_extremes, split over the threads when long (the first maximum wins, as in one scan)."""
    threads = istate[IS_THREADS]
    y = X[4]
    if threads <= 1 or active < istate[IS_PAR_MIN_SCAN]:
        return _smo_extremes_range(y, G, status, 0, active)
    part_f, part_g, part_i = X[10], X[11], X[12]
    _smo_extremes_parallel(y, G, status, active, threads, part_f, part_g, part_i)
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
def _smo_gain(yi, QDi, m, yt, Gt, st, QDt, Qit):
    """Second-order gain of the pair (i, t), or -inf when t is not in I_low with F_t < m."""
    _up, low = _smo_up_low(yt, st)
    diff = m + yt * Gt
    eta = QDi + QDt - 2.0 * (yi * yt * Qit)
    eta = eta if eta > 0.0 else TAU
    gain = diff * diff / eta
    return gain if low & (diff > 0.0) else -np.inf


@njit(cache=True)
def _smo_select_j_range(i, m, base_i, y, G, QD, status, cache, lo, hi):
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
        row = cache[base_i + b0:base_i + b1]
        bb = -np.inf
        for t in range(b1 - b0):
            gain = _smo_gain(yi, QDi, m, yy[t], gg[t], st[t], qd[t], row[t])
            bb = gain if gain > bb else bb
        if bb > best:
            best = bb
            best_block = b0
    j = -1
    if best_block >= 0:
        for t in range(best_block, min(best_block + _SCAN_BLOCK, hi)):
            if _smo_gain(yi, QDi, m, y[t], G[t], status[t], QD[t], cache[base_i + t]) == best:
                j = t
                break
    return j, best


@njit(cache=True, parallel=True)
def _smo_select_j_parallel(i, m, base_i, y, G, QD, status, cache, active, n_chunks, part_f, part_i):
    for c in prange(n_chunks):
        j, best = _smo_select_j_range(i, m, base_i, y, G, QD, status, cache, active * c // n_chunks,
                                      active * (c + 1) // n_chunks)
        part_f[c] = best
        part_i[c] = j


@njit(cache=True)
def _smo_select_j(i, m, base_i, y, G, QD, status, cache, active):
    """Second-order choice of j given i (F_i = m): argmax (m - F_t)^2 / eta_it over I_low with F_t < m."""
    return _smo_select_j_range(i, m, base_i, y, G, QD, status, cache, 0, active)[0]


@njit(cache=True)
def _smo_select_j_threads(i, m, base_i, X, G, QD, status, cache, active, istate):
    """_smo_select_j, split over the threads when long (the first maximum wins, as in one scan)."""
    threads = istate[IS_THREADS]
    y = X[4]
    if threads <= 1 or active < istate[IS_PAR_MIN_SCAN]:
        return _smo_select_j_range(i, m, base_i, y, G, QD, status, cache, 0, active)[0]
    part_f, part_i = X[10], X[12]
    _smo_select_j_parallel(i, m, base_i, y, G, QD, status, cache, active, threads, part_f, part_i)
    j = -1
    best = -np.inf
    for c in range(threads):
        if part_f[c] > best:
            best = part_f[c]
            j = part_i[c]
    return j


@njit(cache=True)
def _smo_swap(p, q, perm, y, alpha, G, G_bar, Cp, QD, status, slot_of, slot_owner):
    perm[p], perm[q] = perm[q], perm[p]
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


@njit(cache=True)
def _smo_reorder(orig, X):
    """Rewrite the position-ordered copies of the rows (CSR, and the transposed dense copy or the CSC).

    Kernel rows then walk memory in position order, and a row of the active problem touches only the
    first active_size positions of every column.
    """
    indptr, indices, data, sq, perm = orig
    pindptr, pindices, pdata, psq, _y, dense_t, col_ptr, col_pos, col_val = X[:9]
    is_dense = dense_t.shape[1] > 1
    k = 0
    for p in range(perm.size):
        r = perm[p]
        for e in range(indptr[r], indptr[r + 1]):
            pindices[k] = indices[e]
            pdata[k] = data[e]
            k += 1
        pindptr[p + 1] = k
        psq[p] = sq[r]
    if is_dense:
        dense_t[:, :] = 0.0
        for p in range(perm.size):
            for e in range(pindptr[p], pindptr[p + 1]):
                dense_t[pindices[e], p] += pdata[e]
    else:
        # counting sort by column; positions come out ascending within each column
        n_cols = col_ptr.size - 1
        for c in range(n_cols + 1):
            col_ptr[c] = 0
        for e in range(k):
            col_ptr[pindices[e] + 1] += 1
        for c in range(n_cols):
            col_ptr[c + 1] += col_ptr[c]
        for p in range(perm.size):
            for e in range(pindptr[p], pindptr[p + 1]):
                c = pindices[e]
                q = col_ptr[c]
                col_pos[q] = p
                col_val[q] = pdata[e]
                col_ptr[c] = q + 1
        for c in range(n_cols, 0, -1):
            col_ptr[c] = col_ptr[c - 1]
        col_ptr[0] = 0


@njit(cache=True, inline="always")
def _smo_shrinkable(t, m, M, y, G, status):
    st = status[t]
    if st == FREE:
        return False
    yt = y[t]
    F = -yt * G[t]
    if _smo_in_up(yt, st):
        return F < M
    return F > m


@njit(cache=True)
def _smo_shrink(n, budget, X, orig, ca, alpha, G, G_bar, Cp, QD, status, istate, swap_p, swap_q, tol):
    """One shrinking pass. Returns RUN_RECONSTRUCT when the 10*tol un-shrink is due, else RUN_BUDGET."""
    y = X[4]
    perm = orig[4]
    cache, slot_of, slot_owner, slot_fill, _lru_prev, lru_next, _free_stack = ca
    active = istate[IS_ACTIVE]
    m, M, _i_max = _smo_extremes_threads(X, G, status, active, istate)
    if istate[IS_UNSHRUNK] == 0 and m - M <= 10.0 * tol:
        istate[IS_UNSHRUNK] = 1
        if active < n:
            return RUN_RECONSTRUCT
    n_swaps = 0
    i = 0
    a = active
    while i < a:
        if _smo_shrinkable(i, m, M, y, G, status):
            a -= 1
            while a > i and _smo_shrinkable(a, m, M, y, G, status):
                a -= 1
            if a > i:
                _smo_swap(i, a, perm, y, alpha, G, G_bar, Cp, QD, status, slot_of, slot_owner)
                swap_p[n_swaps] = i
                swap_q[n_swaps] = a
                n_swaps += 1
                i += 1
        else:
            i += 1
    if n_swaps > 0:
        _smo_reorder(orig, X)
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
                    tmp = cache[base + p]
                    cache[base + p] = cache[base + q]
                    cache[base + q] = tmp
                else:
                    fill = p
            slot_fill[s] = fill
            s = lru_next[s]
    istate[IS_ACTIVE] = a
    if a < istate[IS_MIN_ACTIVE]:
        istate[IS_MIN_ACTIVE] = a
    # re-cut the pool into shorter slots when the active rows have become much shorter and the pool
    # is full (while it has free slots, the longer rows it holds are worth keeping)
    L = istate[IS_SLOT_LEN]
    L_new = max(a, (budget + n - 1) // n, 1)
    if L_new < 0.75 * L and istate[IS_FREE_TOP] == 0:
        n_slots_new = min(n, max(2, budget // L_new))
        _smo_cache_reslot(L_new, n_slots_new, ca, istate)
    return RUN_BUDGET


# ---------------------------------------------------------------------------------------------
# the two run loops: each returns after at most ~max_work units or at stop_iter steps
# ---------------------------------------------------------------------------------------------


@njit(cache=True)
def _smo_run_second_order(n, budget, X, orig, kp, ca, alpha, G, G_bar, Cp, QD, status, istate, fstate,
                          xbuf, swap_p, swap_q, tol, shrinking, max_work, stop_iter):
    y = X[4]
    cache = ca[0]
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
                code = _smo_shrink(n, budget, X, orig, ca, alpha, G, G_bar, Cp, QD, status, istate,
                                   swap_p, swap_q, tol)
                if code != RUN_BUDGET:
                    return code
        active = istate[IS_ACTIVE]
        m, M, i = _smo_extremes_threads(X, G, status, active, istate)
        fstate[FS_VIOL] = m - M
        if i < 0 or m - M < tol:
            return RUN_RECONSTRUCT if active < n else RUN_CONVERGED
        base_i = _smo_get_row(i, active, X, kp, ca, istate, xbuf)
        j = _smo_select_j_threads(i, m, base_i, X, G, QD, status, cache, active, istate)
        if j < 0:
            return RUN_RECONSTRUCT if active < n else RUN_CONVERGED
        base_j = _smo_get_row(j, active, X, kp, ca, istate, xbuf)
        Kij = y[i] * y[j] * cache[base_i + j]
        ai_new, aj_new, _lo, _hi = _smo_pair_target(i, j, Kij, alpha, G, Cp, QD, y)
        _smo_apply(i, j, ai_new, aj_new, base_i, base_j, n, X, kp, ca, alpha, G, G_bar, Cp, QD,
                   status, istate, fstate, xbuf)
        work += 2 * active + 4 * (istate[IS_COMPUTED] - computed0)


@njit(cache=True)
def _smo_platt_take_step(i1, i2, base2, n, X, kp, ca, alpha, G, G_bar, Cp, QD, status, istate, fstate, xbuf):
    """Platt's takeStep: optimise the pair (i1, i2) if that makes progress; returns 1 on a step."""
    if i1 == i2:
        return 0
    y = X[4]
    cache = ca[0]
    K12 = y[i1] * y[i2] * cache[base2 + i1]
    a1_new, a2_new, lo, hi = _smo_pair_target(i1, i2, K12, alpha, G, Cp, QD, y)
    if hi - lo <= 0.0:
        return 0
    a2 = alpha[i2]
    if abs(a2_new - a2) <= 1e-12 * (a2 + a2_new + 1e-12):
        return 0
    active = istate[IS_ACTIVE]
    base1 = _smo_get_row(i1, active, X, kp, ca, istate, xbuf)
    _smo_apply(i1, i2, a1_new, a2_new, base1, base2, n, X, kp, ca, alpha, G, G_bar, Cp, QD, status,
               istate, fstate, xbuf)
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
def _smo_platt_examine(i2, n, X, kp, ca, alpha, G, G_bar, Cp, QD, status, istate, fstate, xbuf, rng, eps):
    """Platt's examineExample: returns 1 if a step was taken with i2 as second variable."""
    y = X[4]
    active = istate[IS_ACTIVE]
    y2 = y[i2]
    F2 = -y2 * G[i2]
    r2 = y2 * (fstate[FS_B] - F2)
    st = status[i2]
    if not ((r2 < -eps and st != UPPER) or (r2 > eps and st != LOWER)):
        return 0
    base2 = _smo_get_row(i2, active, X, kp, ca, istate, xbuf)
    best = -1
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
        if _smo_platt_take_step(best, i2, base2, n, X, kp, ca, alpha, G, G_bar, Cp, QD, status, istate,
                                fstate, xbuf):
            return 1
    if n_free > 0:
        start = rng_below(rng, active)
        for k in range(active):
            t = (start + k) % active
            if status[t] == FREE:
                if _smo_platt_take_step(t, i2, base2, n, X, kp, ca, alpha, G, G_bar, Cp, QD, status,
                                        istate, fstate, xbuf):
                    return 1
    start = rng_below(rng, active)
    for k in range(active):
        t = (start + k) % active
        if _smo_platt_take_step(t, i2, base2, n, X, kp, ca, alpha, G, G_bar, Cp, QD, status, istate,
                                fstate, xbuf):
            return 1
    return 0


@njit(cache=True)
def _smo_run_platt(n, budget, X, orig, kp, ca, alpha, G, G_bar, Cp, QD, status, istate, fstate,
                   xbuf, swap_p, swap_q, tol, shrinking, max_work, stop_iter, rng):
    y = X[4]
    cache = ca[0]
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
                    m, M, i = _smo_extremes(y, G, status, active)
                    fstate[FS_VIOL] = m - M
                    if i < 0 or m - M < tol:
                        return RUN_RECONSTRUCT if active < n else RUN_CONVERGED
                    # safety net: one step on the maximal violating pair, then full passes again
                    base_i = _smo_get_row(i, active, X, kp, ca, istate, xbuf)
                    j = _smo_select_j(i, m, base_i, y, G, QD, status, cache, active)
                    if j < 0:
                        return RUN_RECONSTRUCT if active < n else RUN_CONVERGED
                    base_j = _smo_get_row(j, active, X, kp, ca, istate, xbuf)
                    Kij = y[i] * y[j] * cache[base_i + j]
                    ai_new, aj_new, _lo, _hi = _smo_pair_target(i, j, Kij, alpha, G, Cp, QD, y)
                    _smo_apply(i, j, ai_new, aj_new, base_i, base_j, n, X, kp, ca, alpha, G, G_bar, Cp,
                               QD, status, istate, fstate, xbuf)
                    istate[IS_SAFETY_STEPS] += 1
                    continue
                if shrinking:
                    work += active
                    code = _smo_shrink(n, budget, X, orig, ca, alpha, G, G_bar, Cp, QD, status, istate,
                                       swap_p, swap_q, tol)
                    if code != RUN_BUDGET:
                        return code
                istate[IS_EXAMINE_ALL] = 0
            elif changed == 0:
                istate[IS_EXAMINE_ALL] = 1
            continue
        p = istate[IS_PASS_POS]
        istate[IS_PASS_POS] = p + 1
        work += 1
        if istate[IS_EXAMINE_ALL] == 0 and status[p] != FREE:
            continue
        computed0 = istate[IS_COMPUTED]
        iter0 = istate[IS_ITER]
        istate[IS_NUM_CHANGED] += _smo_platt_examine(p, n, X, kp, ca, alpha, G, G_bar, Cp, QD, status,
                                                      istate, fstate, xbuf, rng, eps)
        work += 4 * (istate[IS_COMPUTED] - computed0) + 2 * active * (istate[IS_ITER] - iter0 + 1)


# ---------------------------------------------------------------------------------------------
# gradient reconstruction and statistics
# ---------------------------------------------------------------------------------------------


@njit(cache=True)
def _smo_reconstruct(X, kp, ca, istate, alpha, G, free_pos, start, stop, active, n, xbuf):
    """G[t] += sum over free_pos[start:stop] of alpha_j Q_tj, for the inactive t in [active, n).

    The rows of the free variables go through the cache at full length (the slots are full length by
    then), so the values computed here are the ones the un-shrunk iterations ask for next.
    """
    cache = ca[0]
    for idx in range(start, stop):
        j = free_pos[idx]
        base = _smo_get_row(j, n, X, kp, ca, istate, xbuf)
        a = alpha[j]
        for t in range(active, n):
            G[t] += a * cache[base + t]


@njit(cache=True)
def _smo_inactive_gradient(X, kp, alpha, free_pos, start, stop, active, n, istate, out):
    """out[t - active] += sum over free_pos[start:stop] of alpha_j Q_tj, for t in [active, n), outside the cache.

    For the trace's primal while shrunk: the shrunk variables' gradients without touching G, the
    cache or any counter the solver steers by.
    """
    for idx in range(start, stop):
        j = free_pos[idx]
        _smo_row(j, active, n, X, kp, out, -active, alpha[j], True, istate)


@njit(cache=True)
def _smo_stats(y, alpha, G, Cp, status, active, n):
    """(m, M, b, n_sv, n_bounded, sum_alpha_G_plus_1, hinge_sum) with G over [0, active)."""
    m, M, _i_max = _smo_extremes(y, G, status, active)
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
    n_sv = 0
    n_bounded = 0
    for t in range(n):
        if status[t] != LOWER:
            n_sv += 1
            if status[t] == UPPER:
                n_bounded += 1
    quad = 0.0
    hinge = 0.0
    for t in range(active):
        quad += alpha[t] * (G[t] + 1.0)
        loss = -G[t] - y[t] * b
        if loss > 0.0:
            hinge += Cp[t] * loss
    return m, M, b, n_sv, n_bounded, quad, hinge


# ---------------------------------------------------------------------------------------------
# public wrapper
# ---------------------------------------------------------------------------------------------


def default_max_iter(n: int) -> int:
    """The step cap when ``max_iter`` is None: LIBSVM's max(10^7, 100 n), a guard against a run that never
    reaches tol (rounding can make it cycle) when no deadline is set."""
    return max(10_000_000, 100 * n)


def _check_args(indptr, indices, data, y, n_features, C, kernel, working_set, tol, cache_mb, shrinking,
                class_weight, max_iter, trace_every, seed):
    check_csr(indptr, indices, data, check_int("n_features", n_features, 1))
    y = binary_signs(y)
    n = indptr.size - 1
    if y.shape != (n,):
        raise SolverInputError(f"y must have one label per row ({n}), got shape {y.shape}")
    if n < 2 or np.all(y == y[0]):
        raise SolverInputError("y must contain both classes (-1 and +1); the dispatcher handles one-class data")
    C = check_positive("C", C)
    kp = kernel_params(kernel)
    if working_set not in WORKING_SETS:
        raise SolverInputError(f"working_set must be one of {list(WORKING_SETS)}, got {working_set!r}")
    tol = check_positive("tol", tol)
    cache_mb = float(cache_mb)
    if not (math.isfinite(cache_mb) and cache_mb >= 0):
        raise SolverInputError(f"cache_mb must be a finite number >= 0, got {cache_mb!r}")
    if not isinstance(shrinking, (bool, np.bool_)):
        raise SolverInputError(f"shrinking must be true or false, got {shrinking!r}")
    try:
        w_neg, w_pos = (float(v) for v in class_weight)
    except (TypeError, ValueError):
        raise SolverInputError(f"class_weight must be a pair (weight for y=-1, weight for y=+1), got {class_weight!r}") from None
    for name, value in (("class_weight[0]", w_neg), ("class_weight[1]", w_pos)):
        check_positive(name, value)
    max_iter = default_max_iter(n) if max_iter is None else check_int("max_iter", max_iter, 1, or_none=True)
    check_int("trace_every", trace_every, 1)
    check_int("seed", seed, 0)
    return y, C, kp, tol, cache_mb, bool(shrinking), (w_neg, w_pos), max_iter


def _position_copies(indptr, indices, data, sq, yp, n_features: int, threads: int, dense: bool) -> tuple:
    """The rows in position order (filled by _smo_reorder), with the transposed dense copy (``dense``: few
    columns, many stored: contiguous vectorized dot products) or room for the columns (CSC: touch only the rows
    that share a feature), a row buffer and the per-thread results of the scans."""
    n = indptr.size - 1
    nnz = int(data.size)
    if dense:
        dense_t = np.zeros((n_features, n))
        col_ptr, col_pos, col_val = np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int32), np.zeros(1)
    else:
        dense_t = np.zeros((1, 1))
        col_ptr, col_pos, col_val = np.zeros(n_features + 1, dtype=np.int64), np.empty(nnz, dtype=np.int32), np.empty(nnz)
    return (indptr.copy(), indices.copy(), data.copy(), sq.copy(), yp, dense_t, col_ptr, col_pos, col_val, np.empty(n),
            np.empty(threads), np.empty(threads), np.empty(threads, dtype=np.int64))


def solve_smo(indptr, indices, data, y, *, n_features, C, kernel: dict, working_set="second_order",
              tol=1e-3, cache_mb=200, shrinking=True, class_weight=(1.0, 1.0), max_iter=None,
              trace_every=1000, seed=0, n_threads=None, control=None) -> SolverResult:
    """Train a kernel C-SVC by SMO (see the module docstring for the problem, rules and outputs)."""
    y, C, kp, tol, cache_mb, shrinking, (w_neg, w_pos), max_iter = _check_args(
        indptr, indices, data, y, n_features, C, kernel, working_set, tol, cache_mb, shrinking,
        class_weight, max_iter, trace_every, seed)
    threads = solver_threads(n_threads)
    # one compiled specialization of every kernel: float64 values, int32 indices (the service may store
    # float32 values; the rows are copied in position order anyway)
    indices = np.ascontiguousarray(indices, dtype=np.int32)
    data = np.ascontiguousarray(data, dtype=np.float64)
    control = control if control is not None else SolverControl()
    trace_every = int(trace_every)
    started = time.perf_counter()
    trace_seconds = 0.0

    n = y.size
    code, gamma, coef0, degree = kp
    kp = (np.int64(code), np.float64(gamma), np.float64(coef0), np.int64(degree))
    sq = row_sq_norms(indptr, data)
    perm = np.arange(n, dtype=np.int64)
    yp = y.copy()
    Cp = np.where(yp > 0, C * w_pos, C * w_neg)
    QD = kernel_diagonal(indptr, indices, data, sq, code, gamma, coef0, degree)
    alpha = np.zeros(n)
    G = -np.ones(n)
    G_bar = np.zeros(n)
    status = np.zeros(n, dtype=np.int8)
    n_features = int(n_features)
    dense = n_features * n * 8 <= _DENSE_T_MAX_BYTES and data.size >= _DENSE_T_MIN_FILL * n * n_features
    X = _position_copies(indptr, indices, data, sq, yp, n_features, threads, dense)
    orig = (indptr, indices, data, sq, perm)
    _smo_reorder(orig, X)

    budget = int(cache_mb * (1 << 20) / 4)
    n_slots = int(min(n, max(2, budget // n)))
    pool = max(budget, 2 * n)
    cache = np.empty(pool, dtype=np.float32)
    slot_of = np.full(n, -1, dtype=np.int64)
    slot_owner = np.full(n, -1, dtype=np.int64)
    slot_fill = np.zeros(n, dtype=np.int64)
    lru_prev = np.full(n, -1, dtype=np.int64)
    lru_next = np.full(n, -1, dtype=np.int64)
    free_stack = np.empty(n, dtype=np.int64)
    free_stack[:n_slots] = np.arange(n_slots - 1, -1, -1)
    ca = (cache, slot_of, slot_owner, slot_fill, lru_prev, lru_next, free_stack)
    istate = np.zeros(IS_SIZE, dtype=np.int64)
    istate[IS_ACTIVE] = n
    istate[IS_MIN_ACTIVE] = n
    istate[IS_SLOT_LEN] = n
    istate[IS_N_SLOTS] = n_slots
    istate[IS_LRU_HEAD] = -1
    istate[IS_LRU_TAIL] = -1
    istate[IS_FREE_TOP] = n_slots
    istate[IS_SHRINK_COUNTER] = min(n, 1000)
    istate[IS_EXAMINE_ALL] = 1
    istate[IS_THREADS] = threads
    istate[IS_PAR_MIN_ROW] = PAR_MIN_ROW
    istate[IS_PAR_MIN_SCAN] = PAR_MIN_SCAN
    fstate = np.zeros(FS_SIZE)
    xbuf = np.zeros(1)  # unused (kept for the kernels' signatures)
    swap_p = np.empty(n, dtype=np.int64)
    swap_q = np.empty(n, dtype=np.int64)
    rng = rng_state(int(seed))
    platt = working_set == "platt"

    def record(final: bool = False) -> None:
        nonlocal trace_seconds
        t0 = time.perf_counter()
        active = int(istate[IS_ACTIVE])
        m, M, _b, n_sv, n_bounded, quad, hinge = _smo_stats(yp, alpha, G, Cp, status, active, n)
        lookups = istate[IS_HITS] + istate[IS_MISSES]
        point = {
            "iteration": int(istate[IS_ITER]),
            "elapsed_s": t0 - started - trace_seconds,
            "dual": -fstate[FS_F],
            "max_violation": m - M,
            "n_sv": int(n_sv),
            "n_bounded_sv": int(n_bounded),
            "cache_hit_rate": float(istate[IS_HITS] / lookups) if lookups else 0.0,
            "active_size": active,
        }
        if active < n:
            quad, hinge = (None, None) if final else shrunk_primal_parts(active, _b, quad, hinge)
        if quad is not None:
            primal = 0.5 * quad + hinge
            point["primal"] = primal
            point["gap"] = primal + fstate[FS_F]
        if final:
            point["final"] = True
        control.record(point)
        trace_seconds += time.perf_counter() - t0

    primal_clock = {"next": 0.0, "cost": 0.0}

    def shrunk_primal_parts(active: int, b: float, quad: float, hinge: float):
        """The primal's |w|^2 and loss sums over ALL rows while shrunk, or (None, None) when not due.

        It needs the shrunk variables' gradients: G_bar - 1 plus the free variables' kernel rows over
        the shrunk positions, computed outside the cache. Due every PRIMAL_EVERY_S seconds, and no
        sooner than 4 times its own last cost after the previous one, so it takes at most about a
        fifth of the run (its time counts as trace time, not solver time); a stop request abandons it.
        """
        now = time.perf_counter()
        if now < primal_clock["next"]:
            return None, None
        free_pos = np.flatnonzero(status[:active] == FREE).astype(np.int64)
        rest = np.zeros(n - active)
        chunk = max(1, int(2_000_000 // max(1, n - active)))
        for start in range(0, free_pos.size, chunk):
            _smo_inactive_gradient(X, kp, alpha, free_pos, start, min(free_pos.size, start + chunk), active, n, istate,
                                   rest)
            if control.check() is not None:
                return None, None
        G_rest = G_bar[active:] - 1.0 + rest
        quad += float(alpha[active:] @ (G_rest + 1.0))
        hinge += float(Cp[active:] @ np.maximum(0.0, -G_rest - yp[active:] * b))
        cost = time.perf_counter() - now
        primal_clock["next"] = time.perf_counter() + max(PRIMAL_EVERY_S, 4.0 * cost)
        return quad, hinge

    def reconstruct(check: bool = True) -> StopReason | None:
        """Rebuild G for the inactive variables in chunks, then make every variable active."""
        active = int(istate[IS_ACTIVE])
        if istate[IS_SLOT_LEN] < n:
            _smo_cache_reslot(n, int(min(n, max(2, budget // n))), ca, istate)
        if active < n:
            computed0 = int(istate[IS_COMPUTED])
            G[active:] = G_bar[active:] - 1.0
            free_pos = np.flatnonzero(status[:active] == FREE).astype(np.int64)
            chunk = max(1, int(2_000_000 // n))  # a row fetched here costs up to n kernel values
            last_check = time.perf_counter()
            for start in range(0, free_pos.size, chunk):
                _smo_reconstruct(X, kp, ca, istate, alpha, G, free_pos, start, min(free_pos.size, start + chunk),
                                 active, n, xbuf)
                if check and time.perf_counter() - last_check > SLICE_SECONDS:
                    last_check = time.perf_counter()
                    reason = control.check()
                    if reason is not None:
                        istate[IS_RECONSTRUCTED] += int(istate[IS_COMPUTED]) - computed0
                        return reason
            istate[IS_RECONSTRUCTED] += int(istate[IS_COMPUTED]) - computed0
            istate[IS_ACTIVE] = n
        return None

    work_budget = 50_000
    next_trace = trace_every
    stop_reason = StopReason.MAX_ITER
    converged = False
    # split rows are handed out chunk by chunk to whichever thread is free (numba's setting, this thread only)
    chunk_size = numba.set_parallel_chunksize(1) if threads > 1 else None
    while True:
        stop_iter = min(next_trace, max_iter)
        t0 = time.perf_counter()
        if platt:
            run_code = _smo_run_platt(n, budget, X, orig, kp, ca, alpha, G, G_bar, Cp, QD, status, istate, fstate,
                                      xbuf, swap_p, swap_q, tol, shrinking, work_budget, stop_iter, rng)
        else:
            run_code = _smo_run_second_order(n, budget, X, orig, kp, ca, alpha, G, G_bar, Cp, QD, status, istate,
                                             fstate, xbuf, swap_p, swap_q, tol, shrinking, work_budget, stop_iter)
        took = time.perf_counter() - t0
        if run_code == RUN_BUDGET and took > 0:
            work_budget = int(min(max(work_budget * min(4.0, SLICE_SECONDS / max(took, 1e-4)), 10_000), 5e9))
        if run_code == RUN_CONVERGED:
            converged = True
            stop_reason = StopReason.CONVERGED
            break
        if run_code == RUN_RECONSTRUCT:
            reason = reconstruct()
            if reason is not None:
                stop_reason = reason
                break
            # test the whole problem before shrinking again (shrinking first could loop forever)
            istate[IS_SHRINK_COUNTER] = 2
            istate[IS_EXAMINE_ALL] = 1
            istate[IS_PASS_POS] = 0
            istate[IS_NUM_CHANGED] = 0
        if istate[IS_ITER] >= next_trace:
            record()
            next_trace += trace_every
        if istate[IS_ITER] >= max_iter:
            stop_reason = StopReason.MAX_ITER
            reason = reconstruct()
            if reason is not None:
                stop_reason = reason
            break
        reason = control.check()
        if reason is not None:
            stop_reason = reason
            break

    active = int(istate[IS_ACTIVE])
    if active < n:
        # stopped by a deadline or cancel while shrunk: complete G (hence the primal) when that is cheap
        n_free = int(np.count_nonzero(status[:active] == FREE))
        if n_free * (n - active) <= FINAL_REBUILD_VALUES:
            reconstruct(check=False)
            active = int(istate[IS_ACTIVE])
    m, M, b, _n_sv, _n_bounded, quad, hinge = _smo_stats(yp, alpha, G, Cp, status, active, n)
    complete = active == n
    objective = 0.5 * quad + hinge if complete else float("nan")
    dual_value = float(alpha.sum() - 0.5 * quad) if complete else -float(fstate[FS_F])
    record(final=True)
    if chunk_size is not None:
        numba.set_parallel_chunksize(chunk_size)

    alpha_rows = np.empty(n)
    alpha_rows[perm] = alpha
    support = np.flatnonzero(alpha_rows > 0).astype(np.int64)
    dual_coef = y[support] * alpha_rows[support]
    w = None
    if code == KERNEL_LINEAR:
        matrix = sp.csr_matrix((data, indices, indptr), shape=(n, int(n_features)))
        w = np.asarray(matrix[support].T @ dual_coef).reshape(-1)
    lookups = istate[IS_HITS] + istate[IS_MISSES]
    solver_seconds = time.perf_counter() - started - trace_seconds
    extra = {
        "support_indices": support,
        "dual_coef": dual_coef,
        "n_sv": int(support.size),
        "n_bounded_sv": int(np.count_nonzero(alpha_rows[support] >= np.where(y[support] > 0, C * w_pos, C * w_neg))),
        "dual_objective": dual_value,
        "primal_complete": complete,
        "max_violation": float(m - M),
        "cache_hit_rate": float(istate[IS_HITS] / lookups) if lookups else 0.0,
        "kernel_values_computed": int(istate[IS_COMPUTED]),
        "kernel_values_full_rows": int(istate[IS_UNCACHED]),
        "kernel_values_reconstruct": int(istate[IS_RECONSTRUCTED]),
        "full_row_updates": int(istate[IS_FULL_ROWS]),
        "kernel": dict(kernel),
        "alpha": alpha_rows,
        "active_size": active,
        "min_active_size": int(istate[IS_MIN_ACTIVE]),
        "working_set": working_set,
        "safety_steps": int(istate[IS_SAFETY_STEPS]),
    }
    return SolverResult(
        w=w,
        bias=float(b),
        n_iter=int(istate[IS_ITER]),
        converged=converged,
        stop_reason=stop_reason,
        objective=float(objective),
        solver_seconds=solver_seconds,
        trace_seconds=trace_seconds,
        trace=tuple(control.points),
        extra=extra,
    )


def warm_up() -> None:
    """Compile every kernel of this module on a tiny problem (both working-set rules, with shrinking)."""
    rng = np.random.default_rng(0)
    dense = rng.normal(size=(40, 3))
    y = np.where(dense[:, 0] + 0.3 * rng.normal(size=40) > 0, 1.0, -1.0)
    matrix = sp.csr_matrix(dense)
    indptr = matrix.indptr.astype(np.int64)
    indices = matrix.indices.astype(np.int32)
    for working_set in WORKING_SETS:
        solve_smo(indptr, indices, matrix.data, y, n_features=3, C=1.0, kernel={"type": "rbf", "gamma": 0.5},
                  working_set=working_set, cache_mb=0.0, trace_every=5)
    sq = row_sq_norms(indptr, matrix.data)
    kp = (np.int64(KERNEL_LINEAR), np.float64(0.5), np.float64(0.0), np.int64(3))
    istate = np.zeros(IS_SIZE, dtype=np.int64)
    istate[IS_THREADS] = 1
    for dense in (True, False):
        X = _position_copies(indptr, indices, matrix.data, sq, y, 3, 1, dense)
        _smo_inactive_gradient(X, kp, np.ones(40), np.arange(3, dtype=np.int64), 0, 3, 30, 40, istate, np.zeros(10))

"""dcd's compiled passes (numba, for ``dcd.solve_dcd``): one epoch of dual coordinate descent over the active rows
(sliced, with prefetches of the rows ahead), the diagonal Qbar_ii, w from alpha, the primal and the dual.
The math and the names are in ``worker.solvers.dcd``'s docstring.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from llvmlite import ir  # numba's own code generator (a numba dependency), for the prefetch intrinsic
from numba import njit, types
from numba.extending import intrinsic

from worker.solvers.common import monotonic_s, shuffle_prefix

PREFETCH_AHEAD = 4  # the epoch prefetches the row it will visit this many steps later
_CACHE_LINE = 64  # bytes


class Problem(NamedTuple):
    """What the epochs read and never change: the rows, their labels, Qbar_ii, and by label (y = -1, +1) the
    upper bounds U_i and diagonal terms D_ii (hinge: U = C_i, D = 0; squared hinge: U = inf, D = 1 / (2 C_i))."""

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    y: np.ndarray
    QD: np.ndarray  # Qbar_ii = x_i'x_i + B^2 + D_ii
    B: float  # the virtual bias feature's value (0.0 without a bias)
    U_neg: float
    U_pos: float
    D_neg: float
    D_pos: float


class DualState(NamedTuple):
    """What the epochs update in place: alpha, w (its last slot w_B), the visiting order (the active rows
    first), the seeded generator's state and where a sliced epoch goes on (``resume``, see ``_dcd_epoch``)."""

    alpha: np.ndarray
    w: np.ndarray
    order: np.ndarray  # LIBLINEAR's index: row ids, the active ones first
    rng: np.ndarray
    resume: np.ndarray


# ---------------------------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------------------------


@intrinsic
def prefetch(typingctx, array, position):
    """Hint the CPU to load array[position] into cache (LLVM's llvm.prefetch: read, high locality).

    The random permutation of Section 3.1 visits rows in random order, so each row of the CSR arrays
    is a cache miss; the epoch asks for the row it will visit a few steps later while it works on the
    current one. A prefetch never faults and does not change any result, only the memory timing.
    """
    if not isinstance(array, types.Array) or not isinstance(position, types.Integer):
        return None
    signature = types.void(array, position)

    def codegen(context, builder, sig, args):
        view = context.make_array(sig.args[0])(context, builder, args[0])
        address = builder.bitcast(builder.gep(view.data, [args[1]]), ir.IntType(8).as_pointer())
        int32 = ir.IntType(32)
        function = builder.module.declare_intrinsic(
            "llvm.prefetch", fnty=ir.FunctionType(ir.VoidType(), [address.type, int32, int32, int32])
        )
        # rw = 0 (read), locality = 3 (keep in all cache levels), cache type = 1 (data)
        builder.call(function, [address, ir.Constant(int32, 0), ir.Constant(int32, 3), ir.Constant(int32, 1)])
        return context.get_dummy_value()

    return signature, codegen


@njit(cache=True)
def _prefetch_span(array, start, end):
    """Prefetch array[start:end]: one hint per cache line, and the last element (whose line the stride
    can miss when start is not at a line's beginning)."""
    if end > start:
        for p in range(start, end, max(1, _CACHE_LINE // array.itemsize)):
            prefetch(array, p)
        prefetch(array, end - 1)


@njit(cache=True, inline="always")
def prefetch_row_ahead(indptr, indices, data, index, ahead, count):
    """Prefetch the entries of row index[ahead] (all of a long row: see "Speed" in the module docstring), and
    indptr at the row ``PREFETCH_AHEAD`` further on; returns the row, whose own values the caller prefetches."""
    j = index[ahead]
    q = indptr[j]
    q_end = indptr[j + 1]
    prefetch(data, q)
    prefetch(indices, q)
    if q + 8 < q_end:
        prefetch(data, q + 8)
        if q + 16 < q_end:
            _prefetch_span(data, q + 16, q_end)
            _prefetch_span(indices, q + 16, q_end)
    if ahead + PREFETCH_AHEAD < count:
        prefetch(indptr, index[ahead + PREFETCH_AHEAD])
    return j


@njit(cache=True)
def _dcd_diagonal(indptr, indices, data, y, B, D_neg, D_pos, QD):
    """QD[i] = Qbar_ii = x_i'x_i + B^2 + D_ii (the bias feature is virtual)."""
    n_rows = indptr.shape[0] - 1
    for i in range(n_rows):
        s = B * B
        for p in range(indptr[i], indptr[i + 1]):
            v = np.float64(data[p])  # float32 data: square in float64, as every other product here
            s += v * v
        QD[i] = s + (D_pos if y[i] > 0 else D_neg)
    return QD


@njit(cache=True)
def _dcd_build_w(indptr, indices, data, y, alpha, B, w):
    """w = sum_i y_i alpha_i [x_i; B] (eq. (11)); the last slot of w is w_B."""
    n_rows = indptr.shape[0] - 1
    nf = w.shape[0] - 1
    w[:] = 0.0
    for i in range(n_rows):
        a = alpha[i] * y[i]
        if a != 0.0:
            for p in range(indptr[i], indptr[i + 1]):
                w[indices[p]] += a * data[p]
            w[nf] += a * B
    return w


@njit(cache=True)
def _dcd_epoch(problem, dual_state, active_size, PGmax_old, PGmin_old, stop_at):
    """One outer iteration of Algorithm 1 over index[:active_size], shuffled first (Section 3.1).

    Shrinks by rule (16) against PGmax_old / PGmin_old (pass +inf / -inf for no shrinking).
    Returns (new active_size, M, m, done) with M = max(0, max PG) and m = min(0, min PG) over the epoch.
    A long epoch comes back in slices: once the clock passes ``stop_at`` (a time.monotonic() instant,
    looked at every 1024 rows) it returns done = False with its place in ``resume`` = [s, M, m], and
    the next call with that ``resume`` goes on exactly there (``resume[0]`` < 0: a new epoch), so the
    slices change nothing in the result.
    """
    indptr, indices, data, y, QD, B, U_neg, U_pos, D_neg, D_pos = problem
    alpha, w, index, state, resume = dual_state
    if resume[0] < 0.0:
        shuffle_prefix(index, active_size, state)
        s = 0
        PGmax_new = 0.0  # M and m include 0: see the module docstring on rule (17)
        PGmin_new = 0.0
    else:
        s = int(resume[0])
        PGmax_new = resume[1]
        PGmin_new = resume[2]
    first = s
    nf = w.shape[0] - 1
    while s < active_size:
        if (s & 1023) == 0 and s - first >= 1024 and monotonic_s() >= stop_at:
            resume[0] = s
            resume[1] = PGmax_new
            resume[2] = PGmin_new
            return active_size, PGmax_new, PGmin_new, False
        ahead = s + PREFETCH_AHEAD
        if ahead < active_size:
            j = prefetch_row_ahead(indptr, indices, data, index, ahead, active_size)
            prefetch(alpha, j)
            prefetch(QD, j)
            prefetch(y, j)
        i = index[s]
        yi = y[i]
        if yi > 0.0:
            U = U_pos
            Dii = D_pos
        else:
            U = U_neg
            Dii = D_neg
        start = np.uint64(indptr[i])  # (unsigned indices: kernels.gather_dot)
        end = np.uint64(indptr[i + 1])
        wx = w[nf] * B
        for p in range(start, end):
            wx += w[np.uint64(indices[p])] * data[p]
        alpha_i = alpha[i]
        G = yi * wx - 1.0 + Dii * alpha_i

        PG = 0.0
        if alpha_i == 0.0:
            if G > PGmax_old:
                active_size -= 1
                index[s] = index[active_size]
                index[active_size] = i
                continue
            if G < 0.0:
                PG = G
        elif alpha_i == U:
            if G < PGmin_old:
                active_size -= 1
                index[s] = index[active_size]
                index[active_size] = i
                continue
            if G > 0.0:
                PG = G
        else:
            PG = G

        if PG > PGmax_new:
            PGmax_new = PG
        if PG < PGmin_new:
            PGmin_new = PG

        if abs(PG) > 1.0e-12:
            QDi = QD[i]
            if QDi > 0.0:
                a_new = alpha_i - G / QDi
                if a_new < 0.0:
                    a_new = 0.0
                elif a_new > U:
                    a_new = U
            elif G < 0.0:  # x_i = 0, hinge: 1/Qbar_ii = inf
                a_new = U
            else:
                a_new = 0.0
            d = (a_new - alpha_i) * yi
            alpha[i] = a_new
            if d != 0.0:
                for p in range(start, end):
                    w[np.uint64(indices[p])] += d * data[p]
                w[nf] += d * B
        s += 1

    resume[0] = -1.0
    return active_size, PGmax_new, PGmin_new, True


@njit(cache=True)
def _dcd_primal(indptr, indices, data, y, w, B, C_neg, C_pos, squared):
    """P(w) = 0.5 |w|^2 + sum_i C_i loss_i, with w's last slot the bias weight w_B (feature value B)."""
    n_rows = indptr.shape[0] - 1
    nf = w.shape[0] - 1
    reg = 0.0
    for j in range(w.shape[0]):
        reg += w[j] * w[j]
    loss = 0.0
    for i in range(n_rows):
        wx = w[nf] * B
        for p in range(indptr[i], indptr[i + 1]):
            wx += w[indices[p]] * data[p]
        xi = 1.0 - y[i] * wx
        if xi > 0.0:
            if squared:
                xi = xi * xi
            loss += (C_pos if y[i] > 0 else C_neg) * xi
    return 0.5 * reg + loss


@njit(cache=True)
def _dcd_dual(alpha, y, w, D_neg, D_pos):
    """Dual value -f(alpha) = e'alpha - 0.5 |w|^2 - 0.5 sum_i D_ii alpha_i^2 (w = sum y_i alpha_i x_i)."""
    reg = 0.0
    for j in range(w.shape[0]):
        reg += w[j] * w[j]
    lin = 0.0
    quad = 0.0
    for i in range(alpha.shape[0]):
        a = alpha[i]
        lin += a
        quad += (D_pos if y[i] > 0 else D_neg) * a * a
    return lin - 0.5 * reg - 0.5 * quad

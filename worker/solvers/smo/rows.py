"""Rows of SMO's matrix Q[p, t] = y_p y_t K(x_p, x_t), many positions t at once (LIBSVM's Kernel/SVC_Q part).

The variables are kept permuted so that the active ones come first (see ``worker.solvers.smo.solve``); a row
is asked for over positions [lo, hi). The dot products <x_p, x_t> come from copies of the rows kept in
position order (``PositionRows``, rewritten by ``reorder`` after each shrinking pass): when the
transposed dense copy (n_features x n) is small and well filled (a9a, ijcnn1), row p's entries times
its columns (contiguous, vectorized, computed ``_ROW_BLOCK`` positions at a time so that they stay in
the first-level cache); otherwise the columns in CSC form, positions ascending, so that only the rows
sharing a feature with x_p are touched and a row of the active problem stops at active_size. These are
two algorithms, not one loop written twice: each is the faster one on its kind of data (see
``smo._DENSE_T_MIN_FILL``). Both give each dot product summed in the order of row p's entries, so the
values are the same either way (tested). The rbf kernel then takes ``kernels.fast_exp`` (within one ulp
of exp, vectorizes). ``smo.team`` splits a long row over a team of threads (``kernel_row``).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from worker.solvers.kernels import KERNEL_RBF, fast_exp, kernel_from_dot
from worker.solvers.smo.state import T_SIZE

_ROW_BLOCK = 1024  # kernel rows are computed this many positions at a time


class KernelParams(NamedTuple):
    """The kernel as the numba code takes it (``kernels.kernel_params`` checks and codes it)."""

    code: np.int64
    gamma: np.float64
    coef0: np.float64
    degree: np.int64


class OriginalRows(NamedTuple):
    """The rows in row order (CSR), their squared norms, and perm: position p holds row perm[p]."""

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    sq: np.ndarray
    perm: np.ndarray


class PositionRows(NamedTuple):
    """The rows in position order and what the kernel rows and scans work in (see ``position_copies``)."""

    indptr: np.ndarray  # CSR of the rows in position order
    indices: np.ndarray
    data: np.ndarray
    sq: np.ndarray  # squared norms, position order
    y: np.ndarray  # labels, position order (swapped by the solver when it shrinks)
    dense_t: np.ndarray  # transposed dense copy (n_features x n), or 1 x 1 when the columns are used
    col_ptr: np.ndarray  # the columns (CSC, positions ascending), or length 1 when dense_t is used
    col_pos: np.ndarray
    col_val: np.ndarray
    dots: np.ndarray  # n dot products, the row being computed
    part_f: np.ndarray  # per-thread results of the split scans
    part_g: np.ndarray
    part_i: np.ndarray
    team: np.ndarray  # the row team's shared slots (``smo.team.T_*``)
    team_coef: np.ndarray  # the team's current order's coefficients (two)
    serial_rows: np.ndarray  # precomputed kernel: each row's serial number (its column 0), row order; else empty
    serial: np.ndarray  # the same in position order
    row_of: np.ndarray  # precomputed kernel: the row each position holds (its CSR above is the rows' own, unmoved)
    scratch: np.ndarray  # precomputed kernel: row p spread over its columns (zero between rows); else length 1


def position_copies(
    indptr, indices, data, sq, yp, n_features: int, threads: int, dense: bool, serial=None
) -> PositionRows:
    """Room for the rows in position order (filled by ``reorder``), with the transposed dense copy (``dense``:
    few columns, many stored: contiguous vectorized dot products) or room for the columns (CSC: touch only the
    rows that share a feature), a row buffer and the per-thread results of the scans. ``serial``: a precomputed
    kernel's serial number of each row (row order); its rows are then gathered, not computed (one thread)."""
    n = indptr.size - 1
    nnz = int(data.size)
    if dense or serial is not None:  # a precomputed kernel's rows are gathered: neither copy is needed
        dense_t = np.zeros((n_features, n) if serial is None else (1, 1))
        col_ptr, col_pos, col_val = np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int32), np.zeros(1)
    else:
        dense_t = np.zeros((1, 1))
        col_ptr, col_pos, col_val = (
            np.zeros(n_features + 1, dtype=np.int64),
            np.empty(nnz, dtype=np.int32),
            np.empty(nnz),
        )
    shared = serial is not None  # a precomputed kernel reads its rows where they are (through row_of)
    return PositionRows(
        indptr if shared else indptr.copy(),
        indices if shared else indices.copy(),
        data if shared else data.copy(),
        sq.copy(),
        yp,
        dense_t,
        col_ptr,
        col_pos,
        col_val,
        np.empty(n),
        np.empty(threads),
        np.empty(threads),
        np.empty(threads, dtype=np.int64),
        np.zeros(T_SIZE, dtype=np.int64),
        np.zeros(2),
        np.zeros(0, dtype=np.int64) if serial is None else np.asarray(serial, dtype=np.int64),
        np.zeros(0 if serial is None else n, dtype=np.int64),
        np.zeros(0 if serial is None else n, dtype=np.int64),
        np.zeros(1 if serial is None else n_features),
    )


@njit(cache=True)
def reorder(orig, X):
    """Rewrite the position-ordered copies of the rows (CSR, and the transposed dense copy or the CSC).

    Kernel rows then walk memory in position order, and a row of the active problem touches only the
    first active_size positions of every column.
    """
    indptr, indices, data, sq, perm = orig
    pindptr, pindices, pdata, psq, dense_t = X.indptr, X.indices, X.data, X.sq, X.dense_t
    col_ptr, col_pos, col_val = X.col_ptr, X.col_pos, X.col_val
    is_dense = dense_t.shape[1] > 1
    if X.serial_rows.size:  # precomputed: the rows stay where they are; positions map to them
        for p in range(perm.size):
            r = perm[p]
            X.row_of[p] = r
            X.serial[p] = X.serial_rows[r]
            psq[p] = sq[r]
        return
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
    elif X.serial_rows.size == 0:  # (a precomputed kernel gathers its rows: no columns)
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


@njit(cache=True)
def _row_chunk(p, lo, hi, X, kp, out, base, coef, accumulate):
    """out[base + t] = Q[p, t] for t in [lo, hi), or out[base + t] += coef * Q[p, t] when accumulate.

    <x_p, x_t> for all t at once: row p's entries times the transposed dense copy (contiguous, vectorized)
    or times the columns of its features (CSC in position order: only the rows that share a feature are
    touched). The accumulation order per t is row p's entry order whatever [lo, hi), so a row split over
    threads gives the same values.
    """
    indptr, indices, data, dense_t, dots = X.indptr, X.indices, X.data, X.dense_t, X.dots
    col_ptr, col_pos, col_val = X.col_ptr, X.col_pos, X.col_val
    if X.serial.size:  # precomputed: row p's value at each position's serial (one thread: the scratch is shared)
        scratch, serial, r = X.scratch, X.serial, X.row_of[p]
        for e in range(indptr[r], indptr[r + 1]):
            scratch[indices[e]] = data[e]
        for t in range(lo, hi):
            dots[t] = scratch[serial[t]]
        for e in range(indptr[r], indptr[r + 1]):
            scratch[indices[e]] = 0.0
        for b0 in range(lo, hi, _ROW_BLOCK):
            _row_kernel(p, b0, min(b0 + _ROW_BLOCK, hi), X, kp, out, base, coef, accumulate)
        return
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
            _row_kernel(p, b0, b1, X, kp, out, base, coef, accumulate)
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
        _row_kernel(p, b0, min(b0 + _ROW_BLOCK, hi), X, kp, out, base, coef, accumulate)


@njit(cache=True)
def _row_kernel(p, lo, hi, X, kp, out, base, coef, accumulate):
    """Turn the dot products dots[lo:hi] into Q[p, t] and store (or add coef times) them at out[base + t]."""
    sq, y, dots = X.sq, X.y, X.dots
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
    o = out[base + lo : base + hi]
    if accumulate:
        for t in range(m):
            o[t] += coef * d[t]
    else:
        for t in range(m):
            o[t] = d[t]

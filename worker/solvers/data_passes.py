"""The passes over the data that the cutting-plane solvers make, split over numba threads.

A cutting-plane iteration touches the data in two ways (paper 000, Section 3.1; paper 001, Lemma 1):

* output computation ``o_i = <x_i, w> + B w_B`` for every row (a *gather*: each row reads the
  entries of w at its features): ``gather_outputs``, split by rows;
* the same outputs for a sparse z (a cut of a late iteration) through a column copy of the data
  (``gather_columns``), reading only the columns of z's non-zero features, with the very same sums;
* cut sum ``z += sum_i coef_i x_i`` over a list of rows (a *scatter*: each row adds into z at its
  features): ``scatter_rows``, in the calling thread, rows in order. (Split by feature ranges, each
  thread walking all the rows and adding only its own features, it was no faster on two cores: the
  walk over the rows, not the additions, is its cost.)

Everything else the solvers do per row (line-search terms, the cut's rows, block sums of the loss)
is split over fixed row chunks (``row_chunks``): the chunks depend on the data alone, never on the
number of threads, and every sum over rows is taken per chunk and the chunk sums are added in chunk
order by the caller. Hence one thread and any number of threads give bit-identical iterates.

The CSR triple is ``(indptr, indices, data)``: indptr int64, indices int32 or int64 (or the 16-bit
copy ``cut_data.prepare_data`` makes for data with few features), data float64 or float32 (numba compiles one version per dtype; sums are accumulated in float64). Kernels take
arrays and scalars only, allocate nothing in their loops, and are ``@njit(cache=True)``; the parallel
ones use ``prange`` over chunks (numba's threading layer must be fork-safe in a
worker: 'workqueue', set by the worker before numba is imported). The caller picks the number of
threads with ``numba.set_num_threads`` (``threads(n)`` below) and passes ``serial=True`` for one
thread: the same loops then run in the calling thread, because starting a parallel region costs
tens of microseconds on an idle machine and milliseconds on a busy one, even for one thread.
"""

from __future__ import annotations

import contextlib
import os

import numba
import numpy as np
from numba import njit, prange

CHUNK_NNZ = 32_768
"""Rows are cut into chunks of about this many non-zeros (plus rows); at most MAX_CHUNKS chunks."""
MAX_CHUNKS = 256


# ---------------------------------------------------------------------------------------------
# partitions (functions of the data only)
# ---------------------------------------------------------------------------------------------


def row_chunks(indptr: np.ndarray) -> np.ndarray:
    """Fixed chunk boundaries over the rows, balanced by non-zeros + rows; a function of the data alone."""
    n = indptr.shape[0] - 1
    nnz = int(indptr[-1])
    n_chunks = int(max(1, min(MAX_CHUNKS, n, (nnz + n) // CHUNK_NNZ)))
    if n_chunks == 1:
        return np.array([0, n], dtype=np.int64)
    cost = indptr.astype(np.float64) + np.arange(n + 1)
    targets = cost[-1] * np.arange(1, n_chunks) / n_chunks
    inner = np.searchsorted(cost, targets).astype(np.int64)
    bounds = np.unique(np.concatenate(([0], inner, [n]))).astype(np.int64)
    return bounds


def available_cores() -> int:
    """Cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


@contextlib.contextmanager
def threads(n: int):
    """Run the enclosed kernels on ``n`` numba threads (at most numba's pool size), then restore."""
    previous = numba.get_num_threads()
    numba.set_num_threads(int(max(1, min(n, numba.config.NUMBA_NUM_THREADS))))  # type: ignore[attr-defined]  # set at import
    try:
        yield numba.get_num_threads()
    finally:
        numba.set_num_threads(previous)


@njit(cache=True)
def compact_chunks(chunks, count_parts, values):
    """Move the count_parts[c] entries each chunk c wrote at values[chunks[c]:] down so that they are
    contiguous from 0, in chunk order; return their number."""
    m = 0
    for c in range(chunks.shape[0] - 1):
        base = chunks[c]
        cnt = count_parts[c]
        if base != m:
            for q in range(cnt):
                values[m + q] = values[base + q]
        m += cnt
    return m


# ---------------------------------------------------------------------------------------------
# gather: outputs
# ---------------------------------------------------------------------------------------------


@njit(cache=True)
def _gather_rows(indptr, indices, data, w, w_bias, i0, i1, out):
    for i in range(i0, i1):
        acc = 0.0
        for k in range(np.uint64(indptr[i]), np.uint64(indptr[i + 1])):  # (unsigned indices: kernels.gather_dot)
            acc += data[k] * w[np.uint64(indices[k])]
        out[i] = acc + w_bias


@njit(cache=True, parallel=True)
def gather_outputs(indptr, indices, data, w, w_bias, chunks, out, serial):
    """out[i] = <x_i, w> + w_bias for every row (w over the real features; w_bias = B * w_B)."""
    if serial:
        for c in range(chunks.shape[0] - 1):
            _gather_rows(indptr, indices, data, w, w_bias, chunks[c], chunks[c + 1], out)
    else:
        for c in prange(chunks.shape[0] - 1):
            _gather_rows(indptr, indices, data, w, w_bias, chunks[c], chunks[c + 1], out)


@njit(cache=True)
def column_counts(indices, d, counts):
    """counts[f] = number of stored entries of feature f (f < d); counts has d + 1 entries, the last 0."""
    for f in range(counts.shape[0]):
        counts[f] = 0
    for k in range(indices.shape[0]):
        counts[indices[k]] += 1


@njit(cache=True)
def column_cost(counts, z, d):
    """Entries a column-wise gather of z reads: sum of counts[f] over the features f < d with z[f] != 0."""
    c = 0
    for f in range(d):
        if z[f] != 0.0:
            c += counts[f]
    return c


@njit(cache=True)
def column_copy(indptr, indices, data, counts, d, colptr, col_rows, col_data):
    """The data by columns (CSC: colptr, col_rows, col_data) from the CSR triple and ``counts``, rows in
    increasing order within each column. Returns False (and leaves the copy unfinished) if some row's
    indices are not in increasing order: the column-wise gather then would not add in the row's order."""
    n = indptr.shape[0] - 1
    colptr[0] = 0
    for f in range(d):
        colptr[f + 1] = colptr[f] + counts[f]
    for i in range(n):
        last = -1
        for k in range(indptr[i], indptr[i + 1]):
            if indices[k] < last:
                return False
            last = indices[k]
    pos = colptr[:d].copy()
    for i in range(n):
        for k in range(indptr[i], indptr[i + 1]):
            f = indices[k]
            p = pos[f]
            col_rows[p] = i
            col_data[p] = data[k]
            pos[f] = p + 1
    return True


@njit(cache=True)
def gather_columns(colptr, col_rows, col_data, z, d, w_bias, out):
    """out[i] = <x_i, z> + w_bias for every row, reading only the columns f with z[f] != 0.

    Features in increasing order and rows in increasing order within a column: each row receives its
    non-zero products in the order of its own (sorted) entries, so the sums are those of
    ``gather_outputs`` bit for bit (the products skipped are exact zeros, which change no sum)."""
    for i in range(out.shape[0]):
        out[i] = 0.0
    for f in range(d):
        zf = z[f]
        if zf != 0.0:
            for p in range(np.uint64(colptr[f]), np.uint64(colptr[f + 1])):
                out[np.uint64(col_rows[p])] += col_data[p] * zf
    for i in range(out.shape[0]):
        out[i] += w_bias


# ---------------------------------------------------------------------------------------------
# scatter: cut sums and weight vectors
# ---------------------------------------------------------------------------------------------


@njit(cache=True)
def scatter_rows(indptr, indices, data, coef, rows, n_rows, z):
    """z[f] += sum_q coef[rows[q]] * x_{rows[q], f} over q < n_rows, rows in order (z is not cleared)."""
    for q in range(n_rows):
        i = rows[q]
        c = coef[i]
        for k in range(np.uint64(indptr[i]), np.uint64(indptr[i + 1])):
            z[np.uint64(indices[k])] += c * data[k]


# ---------------------------------------------------------------------------------------------
# packed rows: indices as 16-bit gaps (the rows a solve streams from disk, ``streamed_data``)
# ---------------------------------------------------------------------------------------------
#
# A row's indices i_1 < i_2 < ... are written as the gaps i_1 + 1, i_2 - i_1, ...: one uint16 each when
# it is 1..65535, else the escape 0 and the index itself in two uint16 (high half, low half), so any
# order and any index below 2^32 is written exactly. ``gap_ptr[i]`` is where row i's gaps start. The
# sums below are those of the plain kernels above, term for term and in the same order.


@njit(cache=True)
def pack_rows(indptr, indices, gap_ptr, gaps):
    """Write the rows' indices as gaps (section comment) into ``gaps`` (room for 3 per non-zero) and their
    starts into ``gap_ptr`` (one more than the rows); return the number of gaps written."""
    p = 0
    n = indptr.shape[0] - 1
    for i in range(n):
        gap_ptr[i] = p
        previous = -1
        for k in range(indptr[i], indptr[i + 1]):
            j = np.int64(indices[k])
            g = j - previous
            if g >= 1 and g <= 65535:
                gaps[p] = g
                p += 1
            else:
                gaps[p] = 0
                gaps[p + 1] = j >> 16
                gaps[p + 2] = j & 65535
                p += 3
            previous = j
    gap_ptr[n] = p
    return p


@njit(cache=True, inline="always")
def _next_index(gaps, p, j):
    """The next index of a packed row and where its gaps go on: (j + gap, p + 1), or the escaped index (p + 3)."""
    g = np.int64(gaps[p])
    if g == 0:
        return (np.int64(gaps[p + 1]) << 16) | np.int64(gaps[p + 2]), p + 3
    return j + g, p + 1


@njit(cache=True)
def _gather_packed_rows(indptr, gap_ptr, gaps, data, w, w_bias, i0, i1, out):
    for i in range(i0, i1):
        acc = 0.0
        p = gap_ptr[i]
        j = np.int64(-1)
        for k in range(indptr[i], indptr[i + 1]):
            j, p = _next_index(gaps, p, j)
            acc += data[k] * w[j]
        out[i] = acc + w_bias


@njit(cache=True, parallel=True)
def gather_packed(indptr, gap_ptr, gaps, data, w, w_bias, chunks, out, serial):
    """``gather_outputs`` over packed rows (section comment): out[i] = <x_i, w> + w_bias."""
    if serial:
        for c in range(chunks.shape[0] - 1):
            _gather_packed_rows(indptr, gap_ptr, gaps, data, w, w_bias, chunks[c], chunks[c + 1], out)
    else:
        for c in prange(chunks.shape[0] - 1):
            _gather_packed_rows(indptr, gap_ptr, gaps, data, w, w_bias, chunks[c], chunks[c + 1], out)


@njit(cache=True)
def scatter_packed(indptr, gap_ptr, gaps, data, coef, rows, n_rows, z):
    """``scatter_rows`` over packed rows: z[f] += sum_q coef[rows[q]] * x_{rows[q], f}, rows in order."""
    for q in range(n_rows):
        i = rows[q]
        c = coef[i]
        p = gap_ptr[i]
        j = np.int64(-1)
        for k in range(indptr[i], indptr[i + 1]):
            j, p = _next_index(gaps, p, j)
            z[j] += c * data[k]


# ---------------------------------------------------------------------------------------------
# a cut guessed after a gather: OCAS out of core (``streamed_data``, ``cut_data.CurrentCut.guess``)
# ---------------------------------------------------------------------------------------------


@njit(cache=True, inline="always")
def _guessed_change(o, y, o_b, previous, i, k, lam, rebuild):
    """OCAS's cut coefficient of row i at the step k, from its output o = <x_i, w_t> (as ``ocas._update_chunk``
    picks it: y_i where y_i <o_c> <= 1, o_c the output of w_c at that step), minus the previous one (0 if
    ``rebuild``); previous[i] set to it."""
    ob = (1.0 - k) * o_b[i] + k * o
    oc = (1.0 - lam) * ob + lam * o
    g = y[i] if y[i] * oc <= 1.0 else 0.0
    before = 0.0 if rebuild else previous[i]
    previous[i] = g
    return g - before


@njit(cache=True)
def _scatter_guess_packed(indptr, gap_ptr, gaps, data, i0, i1, out, k, lam, y, o_b, previous, rebuild, z):
    for i in range(i0, i1):
        c = _guessed_change(out[i], y, o_b, previous, i, k, lam, rebuild)
        if c != 0.0:
            p = gap_ptr[i]
            j = np.int64(-1)
            for e in range(indptr[i], indptr[i + 1]):
                j, p = _next_index(gaps, p, j)
                z[j] += c * data[e]


@njit(cache=True)
def _scatter_guess_plain(indptr, indices, data, i0, i1, out, k, lam, y, o_b, previous, rebuild, z):
    for i in range(i0, i1):
        c = _guessed_change(out[i], y, o_b, previous, i, k, lam, rebuild)
        if c != 0.0:
            for e in range(np.uint64(indptr[i]), np.uint64(indptr[i + 1])):
                z[np.uint64(indices[e])] += c * data[e]


@njit(cache=True, parallel=True)
def scatter_guess(indptr, indices, data, gap_ptr, gaps, chunks, out, k, lam, y, o_b, previous, rebuild, parts):
    """After a gather of a block's outputs ``out`` (rows as stored: ``gaps`` empty; packed: ``indices`` empty),
    each row's coefficient in OCAS's next cut at the step k: where it changed from ``previous`` (0 if
    ``rebuild``), the row times the change is added to parts[q], the partial cut of the q-th share of the
    chunks (one share a thread; the caller adds the parts to the cut)."""
    n_chunks = chunks.shape[0] - 1
    n_parts = parts.shape[0]
    for q in prange(n_parts):
        i0 = chunks[n_chunks * q // n_parts]
        i1 = chunks[n_chunks * (q + 1) // n_parts]
        if gaps.shape[0]:
            _scatter_guess_packed(indptr, gap_ptr, gaps, data, i0, i1, out, k, lam, y, o_b, previous, rebuild, parts[q])
        else:
            _scatter_guess_plain(indptr, indices, data, i0, i1, out, k, lam, y, o_b, previous, rebuild, parts[q])


@njit(cache=True, parallel=True)
def fill(x, value, n_parts):
    """x[:] = value, in n_parts contiguous parts (serially when n_parts is 1)."""
    m = x.shape[0]
    if n_parts <= 1:
        for f in range(m):
            x[f] = value
    else:
        for p in prange(n_parts):
            for f in range(m * p // n_parts, m * (p + 1) // n_parts):
                x[f] = value


def csr_variants(indptr, indices, data):
    """The same small CSR triple in every array type a worker hands to the solvers, for warm-ups.

    numba compiles one version of a kernel per argument type: int32 indices (int64 too, writable
    only), float64 or float32 values, and writable arrays (built in the process) or read-only ones
    (a data set mapped from the worker's cache).
    """
    variants = []
    for index_dtype, value_dtype, writable in (
        (np.int32, np.float64, True),
        (np.int32, np.float64, False),
        (np.int32, np.float32, True),
        (np.int32, np.float32, False),
        (np.int64, np.float64, True),
    ):
        arrays = (
            np.array(indptr, dtype=np.int64),
            np.array(indices, dtype=index_dtype),
            np.array(data, dtype=value_dtype),
        )
        for a in arrays:
            a.flags.writeable = writable
        variants.append(arrays)
    return variants


def solver_csr_variants(indptr, indices, data):
    """``csr_variants`` and the same with the 16-bit indices the cutting-plane solvers read narrow data
    through (``cut_data.prepare_data``), for the warm-ups of their kernels."""
    variants = csr_variants(indptr, indices, data)
    for indptr_v, indices_v, data_v in list(variants[:4]):  # int32 indices x the four value arrays
        variants.append((indptr_v, indices_v.astype(np.uint16), data_v))
    return variants


def warm_up() -> None:
    """Compile every kernel of this module for the array types of ``solver_csr_variants``, but ``scatter_guess``:
    only an ocas job out of core uses it, and compiles it (a few seconds against its minutes) rather than every
    worker's start."""
    chunks = np.array([0, 3], dtype=np.int64)
    rows = np.arange(3, dtype=np.int64)
    for indptr, indices, data in solver_csr_variants([0, 2, 3, 4], [0, 1, 1, 0], [1.0, -1.0, 2.0, 0.5]):
        out = np.zeros(3)
        z = np.zeros(2)
        coef = np.array([1.0, -1.0, 1.0])
        for serial in (True, False):
            gather_outputs(indptr, indices, data, np.array([0.3, -0.2]), 0.1, chunks, out, serial)
        scatter_rows(indptr, indices, data, coef, rows, 3, z)
        counts = np.zeros(3, dtype=np.int64)
        column_counts(indices, 2, counts)
        column_cost(counts, z, 2)
        colptr = np.zeros(3, dtype=np.int64)
        for rows_dtype in (np.uint16, np.int32):  # the row numbers ``cut_data.Data`` gives its copy
            col_rows = np.zeros(4, dtype=rows_dtype)
            col_data = np.zeros(4, dtype=data.dtype)
            column_copy(indptr, indices, data, counts, 2, colptr, col_rows, col_data)
            gather_columns(colptr, col_rows, col_data, z, 2, 0.1, out)
    indptr = np.array([0, 2, 3, 4], dtype=np.int64)
    gap_ptr = np.zeros(4, dtype=np.int64)
    gaps = np.zeros(12, dtype=np.uint16)
    for indices in (np.array([0, 70_000, 1, 0], dtype=np.int32), np.array([0, 70_000, 1, 0], dtype=np.int64)):
        pack_rows(indptr, indices, gap_ptr, gaps)
    w = np.zeros(70_001)
    for data in (np.array([1.0, -1.0, 2.0, 0.5]), np.array([1.0, -1.0, 2.0, 0.5], dtype=np.float32)):
        for serial in (True, False):
            gather_packed(indptr, gap_ptr, gaps, data, w, 0.1, chunks, np.zeros(3), serial)
        scatter_packed(indptr, gap_ptr, gaps, data, np.ones(3), rows, 3, w)
    fill(np.zeros(4), 0.0, 2)
    fill(np.zeros(4), 0.0, 1)
    counts = np.array([1, 1], dtype=np.int64)
    two = np.array([0, 2, 3], dtype=np.int64)
    compact_chunks(two, counts, np.arange(3, dtype=np.int64))
    compact_chunks(two, counts, np.arange(3.0))

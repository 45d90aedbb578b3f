"""The compiled kernel blocks (numba) of the sampled-cut solver (``worker.solvers.sampled_cuts``): kernel values between
rows, the kernel blocks (f at drawn rows, Gram columns, the linear variant's A row) split by target rows
over threads, and the seeded draw of rows. Kept apart from the algorithm (Yu & Joachims, KDD 2008,
Algorithms 2 and 3) so that the solver module reads as the paper; every block sums in the same order
whatever the split, so 1 and 2 threads give the same model."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from llvmlite import ir
from numba import njit, prange
from numba.core import types
from numba.extending import intrinsic

from worker.solvers.common import rng_below
from worker.solvers.kernels import KERNEL_RBF, clear_row, fast_exp, gather_dot, kernel_from_dot, scatter_row

_DENSE_LIMIT = 1 << 22  # kernel values of a block below which the basis rows are densified (n_features x m)

# ---------------------------------------------------------------------------------------------
# float32 exponential for the decision values at the drawn rows (see _sampled_cuts_f_at)
# ---------------------------------------------------------------------------------------------


@intrinsic
def _f32_bits(typingctx, x):
    """The IEEE-754 bits of a float32 as an int32 (a bit cast, no conversion)."""

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))

    return types.int32(types.float32), codegen


@intrinsic
def _bits_f32(typingctx, x):
    """The float32 whose IEEE-754 bits are the given int32 (a bit cast, no conversion)."""

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())

    return types.float32(types.int32), codegen


_F32_LOG2E = np.float32(1.4426950408889634)
_F32_SHIFT = np.float32(12582912.0)  # 1.5 * 2^23: adding it rounds to an integer held in the low bits
_F32_LN2_HI = np.float32(0.693359375)  # ln 2 = _F32_LN2_HI + _F32_LN2_LO, k * _F32_LN2_HI exact for |k| < 2^8
_F32_LN2_LO = np.float32(-2.12194440e-4)
_F32_ONE = np.float32(1.0)
_F32_C = tuple(np.float32(1.0 / f) for f in (2.0, 6.0, 24.0, 120.0, 720.0, 5040.0))
_F32_MIN_ARG = np.float32(-87.0)  # exp(-87) = 1.6e-38, still a normal float32
_F32_BLOCK = 64  # basis rows per float32 partial sum of the decision values
_F64_CHUNK = 128  # targets per chunk of the float64 path


@njit(cache=True, inline="always")
def _exp_f32(x):
    """exp(x) in float32 for x <= 0 (relative error below 1.2e-7; x below -87 gives exp(-87)).

    The reduction of ``kernels.fast_exp`` in single precision: k = round(x / ln 2), |r| <= ln(2) / 2,
    Taylor polynomial of degree 7 (truncation below 6e-9 relative), 2^k put into the exponent bits.
    Branch-free, so that LLVM vectorizes the loop that calls it.
    """
    c2, c3, c4, c5, c6, c7 = _F32_C
    xc = max(x, _F32_MIN_ARG)
    kd = xc * _F32_LOG2E + _F32_SHIFT
    k = kd - _F32_SHIFT
    r = xc - k * _F32_LN2_HI - k * _F32_LN2_LO
    p = _F32_ONE + r * (_F32_ONE + r * (c2 + r * (c3 + r * (c4 + r * (c5 + r * (c6 + r * c7))))))
    return p * _bits_f32((_f32_bits(kd) << np.int32(23)) + np.int32(127 << 23))


# ---------------------------------------------------------------------------------------------
# kernels
# ---------------------------------------------------------------------------------------------


class Rows(NamedTuple):
    """The training rows as the kernels read them: CSR, |x_i|^2, and float32 copies of the values and norms for
    the single-precision decision values of ``_sampled_cuts_f_at`` (empty where they are not used)."""

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    sq: np.ndarray
    data32: np.ndarray
    sq32: np.ndarray
    n_features: int


class Kernel(NamedTuple):
    """K'(x, z) = K(x, z) + shift: the kernel as ``kernels.kernel_params`` codes it, and the shift B^2 that the
    bias feature adds (0 without a bias)."""

    code: np.int64
    gamma: np.float64
    coef0: np.float64
    degree: np.int64
    shift: np.float64


class Expansion(NamedTuple):
    """sum_u coef[u] * K'(x_rows[u], .): rows of the training set (int64) and their coefficients."""

    rows: np.ndarray
    coef: np.ndarray


class Inner(NamedTuple):
    """What an inner loop over some rows needs (``_sampled_cuts_inner``)."""

    rows: np.ndarray  # the rows (int64)
    sq: np.ndarray  # their |x|^2
    use_dense: bool  # whether their dense transposed copy is used
    dense_t: np.ndarray  # the copy (n_features x len(rows)), or 1 x 1
    dense_t32: np.ndarray  # its float32 copy, or 1 x 1 (asked for by ``single``)
    sq32: np.ndarray  # their |x|^2 in float32, or empty (``single``)


class Split(NamedTuple):
    """How a block of kernel values is split: into ``threads`` parts once it holds ``par_min`` values."""

    threads: int
    par_min: int


@njit(cache=True)
def _sampled_cuts_dense_t(indptr, indices, data, rows, n_features):
    """Dense transposed copy (n_features, len(rows)) of the given rows."""
    out = np.zeros((n_features, rows.size))
    for j in range(rows.size):
        r = rows[j]
        for k in range(indptr[r], indptr[r + 1]):
            out[indices[k], j] += data[k]
    return out


@njit(cache=True)
def _sampled_cuts_inner(X, rows, single):
    """What the inner loop over ``rows`` needs (``Inner``); ``single``: the float32 copies too."""
    m = rows.size
    use_dense = X.n_features * m <= _DENSE_LIMIT
    dense_t = _sampled_cuts_dense_t(X.indptr, X.indices, X.data, rows, X.n_features) if use_dense else np.zeros((1, 1))
    sq_rows = np.empty(m)
    for j in range(m):
        sq_rows[j] = X.sq[rows[j]]
    if single:
        dense_t32 = dense_t.astype(np.float32)
        sq32 = sq_rows.astype(np.float32)
    else:
        dense_t32 = np.zeros((1, 1), dtype=np.float32)
        sq32 = np.zeros(0, dtype=np.float32)
    return Inner(rows, sq_rows, use_dense, dense_t, dense_t32, sq32)


@njit(cache=True)
def _sampled_cuts_kvals(o, X, inner, kernel, lo, hi, xbuf, kvals):
    """kvals[j] = K'(x_o, x_inner.rows[j]) for j in [lo, hi).

    Loops run over views from index 0, so that numba knows the index is not negative and LLVM vectorizes
    them (the rbf case is spelled out for the same reason).
    """
    indptr, indices, data, sq = X.indptr, X.indices, X.data, X.sq
    code, gamma, coef0, degree, shift = kernel
    m = hi - lo
    kv = kvals[lo:hi]
    if inner.use_dense:
        dense_t = inner.dense_t
        for j in range(m):
            kv[j] = 0.0
        for k in range(indptr[o], indptr[o + 1]):
            v = data[k]
            col = dense_t[indices[k], lo:hi]
            for j in range(m):
                kv[j] += v * col[j]
    else:
        rows = inner.rows
        scatter_row(indptr, indices, data, o, xbuf)
        for j in range(m):
            kv[j] = gather_dot(indptr, indices, data, rows[lo + j], xbuf)
        clear_row(indptr, indices, o, xbuf)
    sq_o = sq[o]
    sqi = inner.sq[lo:hi]
    if code == KERNEL_RBF:
        for j in range(m):
            kv[j] = fast_exp(-gamma * max(sq_o + sqi[j] - 2.0 * kv[j], 0.0)) + shift
    else:
        for j in range(m):
            kv[j] = kernel_from_dot(code, gamma, coef0, degree, kv[j], sq_o, sqi[j]) + shift


@njit(cache=True)
def _sampled_cuts_expansion_range(X, kernel, expansion, inner, targets, start, stop, out):
    coef = expansion.coef
    m = coef.size
    xbuf = np.zeros(X.n_features if not inner.use_dense else 1)
    kvals = np.empty(m)
    for t in range(start, stop):
        _sampled_cuts_kvals(targets[t], X, inner, kernel, np.int64(0), m, xbuf, kvals)
        acc = 0.0
        for v in range(m):
            acc += coef[v] * kvals[v]
        out[t] = acc


@njit(cache=True, parallel=True)
def _sampled_cuts_expansion_parallel(X, kernel, expansion, inner, targets, start, stop, n_chunks, out):
    for c in prange(n_chunks):
        _sampled_cuts_expansion_range(
            X,
            kernel,
            expansion,
            inner,
            targets,
            start + (stop - start) * c // n_chunks,
            start + (stop - start) * (c + 1) // n_chunks,
            out,
        )


@njit(cache=True)
def _sampled_cuts_expansion(X, kernel, expansion, targets, start, stop, out, split):
    """out[t] = sum_v coef[v] * K'(x_rows[v], x_targets[t]) for t in [start, stop), of the ``expansion`` (rows,
    coef) (targets split between the threads)."""
    m = expansion.rows.size
    inner = _sampled_cuts_inner(X, expansion.rows, np.bool_(False))
    if split.threads > 1 and (stop - start) * m >= split.par_min:
        _sampled_cuts_expansion_parallel(X, kernel, expansion, inner, targets, start, stop, split.threads, out)
    else:
        _sampled_cuts_expansion_range(X, kernel, expansion, inner, targets, start, stop, out)


class ClassExpansion(NamedTuple):
    """A multi-class expansion (Crammer-Singer): for each class c, sum over the entries e of class c of
    coef[e] * K'(x_rows[v(e)], .). ``rows`` unique (int64, ascending); row v's entries are ptr[v]:ptr[v + 1] of
    ``classes`` (int64) and ``coef``."""

    rows: np.ndarray
    ptr: np.ndarray
    classes: np.ndarray
    coef: np.ndarray


@njit(cache=True)
def _class_expansion_range(X, kernel, expansion, inner, targets, start, stop, out):
    m = inner.rows.size
    ptr, classes, coef = expansion.ptr, expansion.classes, expansion.coef
    xbuf = np.zeros(X.n_features if not inner.use_dense else 1)
    kvals = np.empty(m)
    for t in range(start, stop):
        _sampled_cuts_kvals(targets[t], X, inner, kernel, np.int64(0), m, xbuf, kvals)
        for c in range(out.shape[1]):
            out[t, c] = 0.0
        for v in range(m):
            kv = kvals[v]
            for e in range(ptr[v], ptr[v + 1]):
                out[t, classes[e]] += coef[e] * kv


@njit(cache=True, parallel=True)
def _class_expansion_parallel(X, kernel, expansion, inner, targets, start, stop, n_chunks, out):
    for c in prange(n_chunks):
        lo = start + (stop - start) * c // n_chunks
        hi = start + (stop - start) * (c + 1) // n_chunks
        _class_expansion_range(X, kernel, expansion, inner, targets, lo, hi, out)


@njit(cache=True)
def _sampled_cuts_class_expansion(X, kernel, expansion, targets, start, stop, out, split):
    """out[t, c] = the class-c part of the multi-class ``expansion`` at x_targets[t], for t in [start, stop): each
    kernel value of a row and a target computed once, whatever classes the row's entries have (targets split
    between the threads as in ``_sampled_cuts_expansion``)."""
    m = expansion.rows.size
    inner = _sampled_cuts_inner(X, expansion.rows, np.bool_(False))
    if split.threads > 1 and (stop - start) * m >= split.par_min:
        _class_expansion_parallel(X, kernel, expansion, inner, targets, start, stop, split.threads, out)
    else:
        _class_expansion_range(X, kernel, expansion, inner, targets, start, stop, out)


@njit(cache=True)
def _sampled_cuts_f_at_rbf32(X, gamma32, expansion, inner, lo, hi, out):
    """out[lo:hi] += sum_u coef[u] * exp(-gamma |x_rows[u] - x_t|^2) over the targets t in [lo, hi), in
    float32 (rows from X.data32/X.sq32, targets as their float32 dense transposed copy inner.dense_t32 with
    norms inner.sq32): partial sums over blocks of _F32_BLOCK rows in float32, added to out in float64."""
    indptr, indices, data32, sq32 = X.indptr, X.indices, X.data32, X.sq32
    rows, coef = expansion
    dense_t32 = inner.dense_t32
    m = hi - lo
    kv = np.empty(m, dtype=np.float32)
    part = np.zeros(m, dtype=np.float32)
    sqt = inner.sq32[lo:hi]
    acc = out[lo:hi]
    zero = np.float32(0.0)
    two = np.float32(2.0)
    for u in range(rows.size):
        o = rows[u]
        for j in range(m):
            kv[j] = zero
        for k in range(indptr[o], indptr[o + 1]):
            v = data32[k]
            col = dense_t32[indices[k], lo:hi]
            for j in range(m):
                kv[j] += v * col[j]
        sq_o = sq32[o]
        c = np.float32(coef[u])
        for j in range(m):
            part[j] += c * _exp_f32(-gamma32 * max(sq_o + sqt[j] - two * kv[j], zero))
        if u % _F32_BLOCK == _F32_BLOCK - 1 or u == rows.size - 1:
            for j in range(m):
                acc[j] += part[j]
                part[j] = zero


@njit(cache=True)
def _sampled_cuts_f_at_rbf32_gemm(X, gamma32, expansion, inner, lo, hi, out):
    """What _sampled_cuts_f_at_rbf32 computes, with the dot products of each block of _F32_BLOCK rows as
    one float32 matrix product (BLAS sgemm) of the block's dense copy and the targets' dense copy."""
    indptr, indices, data32, sq32 = X.indptr, X.indices, X.data32, X.sq32
    rows, coef = expansion
    dense_t32 = inner.dense_t32
    m = hi - lo
    nf = dense_t32.shape[0]
    targets_t = np.ascontiguousarray(dense_t32[:, lo:hi])
    block = np.zeros((_F32_BLOCK, nf), dtype=np.float32)
    part = np.zeros(m, dtype=np.float32)
    sqt = inner.sq32[lo:hi]
    acc = out[lo:hi]
    zero = np.float32(0.0)
    two = np.float32(2.0)
    for b0 in range(0, rows.size, _F32_BLOCK):
        nb = min(rows.size, b0 + _F32_BLOCK) - b0
        for i in range(nb):
            o = rows[b0 + i]
            for f in range(nf):
                block[i, f] = zero
            for k in range(indptr[o], indptr[o + 1]):
                block[i, indices[k]] = data32[k]
        dots = np.dot(block[:nb], targets_t)
        for i in range(nb):
            sq_o = sq32[rows[b0 + i]]
            c = np.float32(coef[b0 + i])
            d_i = dots[i]
            for j in range(m):
                part[j] += c * _exp_f32(-gamma32 * max(sq_o + sqt[j] - two * d_i[j], zero))
        for j in range(m):
            acc[j] += part[j]
            part[j] = zero


@njit(cache=True)
def _sampled_cuts_f_at_rbf64(X, gamma, expansion, inner, lo, hi, out):
    """out[lo:hi] += sum_u coef[u] * exp(-gamma |x_rows[u] - x_t|^2) in float64 (the loops of the float32
    version, with ``kernels.fast_exp``)."""
    indptr, indices, data, sq = X.indptr, X.indices, X.data, X.sq
    rows, coef = expansion
    dense_t = inner.dense_t
    m = hi - lo
    kv = np.empty(m)
    sqt = inner.sq[lo:hi]
    acc = out[lo:hi]
    for u in range(rows.size):
        o = rows[u]
        for j in range(m):
            kv[j] = 0.0
        for k in range(indptr[o], indptr[o + 1]):
            v = data[k]
            col = dense_t[indices[k], lo:hi]
            for j in range(m):
                kv[j] += v * col[j]
        sq_o = sq[o]
        c = coef[u]
        for j in range(m):
            acc[j] += c * fast_exp(-gamma * max(sq_o + sqt[j] - 2.0 * kv[j], 0.0))


@njit(cache=True)
def _sampled_cuts_f_at_range(X, kernel, expansion, inner, single, lo, hi, out):
    """out[lo:hi] += the expansion's K values (``kernel`` without its shift, which ``_sampled_cuts_f_at`` adds)."""
    code = kernel.code
    if single and code == KERNEL_RBF and inner.use_dense:
        indptr = X.indptr
        dense_ish = 4 * (indptr[-1] - indptr[0]) >= X.n_features * (indptr.size - 1)  # then sgemm pays
        if dense_ish:
            _sampled_cuts_f_at_rbf32_gemm(X, np.float32(kernel.gamma), expansion, inner, lo, hi, out)
        else:
            _sampled_cuts_f_at_rbf32(X, np.float32(kernel.gamma), expansion, inner, lo, hi, out)
        return
    if code == KERNEL_RBF and inner.use_dense:
        for start in range(lo, hi, _F64_CHUNK):
            _sampled_cuts_f_at_rbf64(X, kernel.gamma, expansion, inner, start, min(hi, start + _F64_CHUNK), out)
        return
    rows, coef = expansion
    xbuf = np.zeros(X.n_features if not inner.use_dense else 1)
    kvals = np.empty(inner.rows.size)
    for start in range(lo, hi, _F64_CHUNK):  # chunks of targets whose dense columns stay in L1
        stop = min(hi, start + _F64_CHUNK)
        kv = kvals[start:stop]
        acc = out[start:stop]
        for u in range(rows.size):
            _sampled_cuts_kvals(rows[u], X, inner, kernel, start, stop, xbuf, kvals)
            c = coef[u]
            for j in range(stop - start):
                acc[j] += c * kv[j]


@njit(cache=True, parallel=True)
def _sampled_cuts_f_at_parallel(X, kernel, expansion, inner, single, n_chunks, out):
    m = inner.rows.size
    for c in prange(n_chunks):
        _sampled_cuts_f_at_range(X, kernel, expansion, inner, single, m * c // n_chunks, m * (c + 1) // n_chunks, out)


@njit(cache=True)
def _sampled_cuts_f_at(X, kernel, expansion, targets, out, split, single):
    """out[j] = sum_u coef[u] * K'(x_rows[u], x_targets[j]): the decision values of the ``expansion`` (rows,
    coef) at the targets.

    With ``single``, rbf on a dense copy of the targets (the ijcnn1/a9a case): the kernel values are
    computed in float32 (dot products, norms, exponential: each value within ~3e-7 of its float64 value)
    and summed in float32 over blocks of 64 rows, the blocks in float64; the dot products of a block as
    one float32 matrix product (BLAS sgemm) when the rows are dense-ish (nonzeros >= n_features / 4 per
    row on average: ijcnn1, not a9a). Everything else in float64.
    Targets split over threads as in ``_sampled_cuts_expansion``.
    """
    m = targets.size
    inner = _sampled_cuts_inner(X, targets, single)
    coef = expansion.coef
    total = 0.0
    for u in range(coef.size):
        total += coef[u]
    for j in range(m):
        out[j] = kernel.shift * total
    unshifted = Kernel(kernel.code, kernel.gamma, kernel.coef0, kernel.degree, 0.0)
    if split.threads > 1 and coef.size * m >= split.par_min:
        _sampled_cuts_f_at_parallel(X, unshifted, expansion, inner, single, split.threads, out)
    else:
        _sampled_cuts_f_at_range(X, unshifted, expansion, inner, single, np.int64(0), m, out)


# ---------------------------------------------------------------------------------------------
# the basis entries of the cuts, kept sorted by (row, cut) from one iteration to the next
# ---------------------------------------------------------------------------------------------


@njit(cache=True)
def _entries_merge(e_rows, e_cut, e_coef, rows, cut, coef):
    """Merge the entries (rows ascending, all of cut ``cut``, the largest cut index) into the (row, cut)-sorted
    entries: O(entries), no sort."""
    n_old = e_rows.size
    out_rows = np.empty(n_old + rows.size, dtype=np.int64)
    out_cut = np.empty(n_old + rows.size, dtype=np.int64)
    out_coef = np.empty(n_old + rows.size)
    i = 0
    j = 0
    for q in range(n_old + rows.size):
        if j >= rows.size or (i < n_old and e_rows[i] <= rows[j]):  # a row's older cuts come first
            out_rows[q] = e_rows[i]
            out_cut[q] = e_cut[i]
            out_coef[q] = e_coef[i]
            i += 1
        else:
            out_rows[q] = rows[j]
            out_cut[q] = cut
            out_coef[q] = coef[j]
            j += 1
    return out_rows, out_cut, out_coef


@njit(cache=True)
def _entries_keep(e_rows, e_cut, e_coef, new_index):
    """The entries of the kept cuts (new_index[k] >= 0), renumbered; order kept."""
    m = 0
    for q in range(e_rows.size):
        if new_index[e_cut[q]] >= 0:
            m += 1
    out_rows = np.empty(m, dtype=np.int64)
    out_cut = np.empty(m, dtype=np.int64)
    out_coef = np.empty(m)
    m = 0
    for q in range(e_rows.size):
        k = new_index[e_cut[q]]
        if k >= 0:
            out_rows[m] = e_rows[q]
            out_cut[m] = k
            out_coef[m] = e_coef[q]
            m += 1
    return out_rows, out_cut, out_coef


@njit(cache=True)
def _entries_group(e_rows, e_cut, e_coef, alpha):
    """Unique rows of the sorted entries, their ranges uptr, and gamma_u = sum of alpha[cut] * coef over
    a row's entries (in cut order)."""
    count = 0
    for q in range(e_rows.size):
        if q == 0 or e_rows[q] != e_rows[q - 1]:
            count += 1
    urows = np.empty(count, dtype=np.int64)
    uptr = np.empty(count + 1, dtype=np.int64)
    gamma = np.zeros(count)
    u = -1
    for q in range(e_rows.size):
        if q == 0 or e_rows[q] != e_rows[q - 1]:
            u += 1
            urows[u] = e_rows[q]
            uptr[u] = q
        gamma[u] += alpha[e_cut[q]] * e_coef[q]
    uptr[count] = e_rows.size
    return urows, uptr, gamma


@njit(cache=True)
def _entries_column(uptr, e_cut, e_coef, b_at_rows, t):
    """column[k] = sum over cut k's entries e of coef_e * b(x_row(e)), b given per unique row (uptr ranges)."""
    column = np.zeros(t)
    for u in range(uptr.size - 1):
        b = b_at_rows[u]
        for e in range(uptr[u], uptr[u + 1]):
            column[e_cut[e]] += e_coef[e] * b
    return column


@njit(cache=True)
def _sampled_cut(draw, y, f_draw, r):
    """Algorithm 2, line 16 for binary labels: the mean hinge loss over the drawn rows (the sampled cut's
    value at w), and the cut's basis: the drawn rows with a loss (y f < 1), ascending, a row drawn twice
    once with its coefficients y / r summed. Returns (value, rows, coef, number of loss draws)."""
    total = 0.0
    n_loss = 0
    loss_rows = np.empty(draw.size, dtype=np.int64)
    for j in range(draw.size):
        margin = y[draw[j]] * f_draw[j]
        if margin < 1.0:
            total += 1.0 - margin
            loss_rows[n_loss] = draw[j]
            n_loss += 1
    ordered = np.sort(loss_rows[:n_loss])
    rows = np.empty(n_loss, dtype=np.int64)
    coef = np.zeros(n_loss)
    m = 0
    for q in range(n_loss):
        if q == 0 or ordered[q] != ordered[q - 1]:
            rows[m] = ordered[q]
            m += 1
        coef[m - 1] += y[ordered[q]] / r
    return total / draw.size, rows[:m].copy(), coef[:m].copy(), n_loss


@njit(cache=True)
def _sampled_cuts_draw(rng, pool, pool_size, count, out):
    """out[:count] = pool[j] for j drawn uniformly from [0, pool_size), with replacement (seeded splitmix64)."""
    for j in range(count):
        out[j] = pool[rng_below(rng, pool_size)]

"""The numba kernels of the sampled-cut solver (``worker.solvers.sampled_cuts``): kernel values between
rows, the kernel blocks (f at drawn rows, Gram columns, the linear variant's A row) split by target rows
over threads, and the seeded draw of rows. Kept apart from the algorithm (Yu & Joachims, KDD 2008,
Algorithms 2 and 3) so that the solver module reads as the paper; every block sums in the same order
whatever the split, so 1 and 2 threads give the same model."""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from worker.solvers.common import rng_below
from worker.solvers.kernels import KERNEL_RBF, clear_row, fast_exp, gather_dot, kernel_from_dot, scatter_row

_DENSE_LIMIT = 1 << 22  # kernel values of a block below which the basis rows are densified (n_features x m)

# ---------------------------------------------------------------------------------------------
# kernels
# ---------------------------------------------------------------------------------------------


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
def _sampled_cuts_inner(indptr, indices, data, sq, rows, n_features):
    """What the inner loop over ``rows`` needs: whether to use their dense transposed copy, the copy, their |x|^2."""
    m = rows.size
    use_dense = n_features * m <= _DENSE_LIMIT
    dense_t = _sampled_cuts_dense_t(indptr, indices, data, rows, n_features) if use_dense else np.zeros((1, 1))
    sq_rows = np.empty(m)
    for j in range(m):
        sq_rows[j] = sq[rows[j]]
    return use_dense, dense_t, sq_rows


@njit(cache=True)
def _sampled_cuts_kvals(
    o, inner, lo, hi, dense_t, use_dense, indptr, indices, data, sq, sq_inner, kp, shift, xbuf, kvals
):
    """kvals[j] = K(x_o, x_inner[j]) + shift for j in [lo, hi) (sq_inner[j] = |x_inner[j]|^2).

    Loops run over views from index 0, so that numba knows the index is not negative and LLVM vectorizes
    them (the rbf case is spelled out for the same reason).
    """
    code, gamma, coef0, degree = kp
    m = hi - lo
    kv = kvals[lo:hi]
    if use_dense:
        for j in range(m):
            kv[j] = 0.0
        for k in range(indptr[o], indptr[o + 1]):
            v = data[k]
            col = dense_t[indices[k], lo:hi]
            for j in range(m):
                kv[j] += v * col[j]
    else:
        scatter_row(indptr, indices, data, o, xbuf)
        for j in range(m):
            kv[j] = gather_dot(indptr, indices, data, inner[lo + j], xbuf)
        clear_row(indptr, indices, o, xbuf)
    sq_o = sq[o]
    sqi = sq_inner[lo:hi]
    if code == KERNEL_RBF:
        for j in range(m):
            kv[j] = fast_exp(-gamma * max(sq_o + sqi[j] - 2.0 * kv[j], 0.0)) + shift
    else:
        for j in range(m):
            kv[j] = kernel_from_dot(code, gamma, coef0, degree, kv[j], sq_o, sqi[j]) + shift


@njit(cache=True)
def _sampled_cuts_basis_at_range(
    indptr,
    indices,
    data,
    sq,
    kp,
    shift,
    urows,
    uptr,
    ucut,
    ucoef,
    targets,
    sq_t,
    dense_t,
    use_dense,
    n_features,
    lo,
    hi,
    out,
):
    xbuf = np.zeros(n_features if not use_dense else 1)
    kvals = np.empty(targets.size)
    kv = kvals[lo:hi]
    for u in range(urows.size):
        _sampled_cuts_kvals(
            urows[u], targets, lo, hi, dense_t, use_dense, indptr, indices, data, sq, sq_t, kp, shift, xbuf, kvals
        )
        for e in range(uptr[u], uptr[u + 1]):
            c = ucoef[e]
            row = out[ucut[e], lo:hi]
            for j in range(hi - lo):
                row[j] += c * kv[j]


@njit(cache=True, parallel=True)
def _sampled_cuts_basis_at_parallel(
    indptr,
    indices,
    data,
    sq,
    kp,
    shift,
    urows,
    uptr,
    ucut,
    ucoef,
    targets,
    sq_t,
    dense_t,
    use_dense,
    n_features,
    n_chunks,
    out,
):
    m = targets.size
    for c in prange(n_chunks):
        _sampled_cuts_basis_at_range(
            indptr,
            indices,
            data,
            sq,
            kp,
            shift,
            urows,
            uptr,
            ucut,
            ucoef,
            targets,
            sq_t,
            dense_t,
            use_dense,
            n_features,
            m * c // n_chunks,
            m * (c + 1) // n_chunks,
            out,
        )


@njit(cache=True)
def _sampled_cuts_basis_at(
    indptr, indices, data, sq, kp, shift, urows, uptr, ucut, ucoef, targets, n_features, out, threads, par_min
):
    """out[k, j] += sum over basis entries e of cut k: coef_e * K'(x_row(e), x_targets[j]).

    The basis is grouped by unique row (urows, with entries uptr[u]:uptr[u+1] of (ucut, ucoef)), so
    each kernel value is computed once however many cuts share the row. With several threads the
    targets are split between them (each writes its own columns of out; the sums per column run in the
    same order, so the values do not depend on the number of threads).
    """
    m = targets.size
    use_dense, dense_t, sq_t = _sampled_cuts_inner(indptr, indices, data, sq, targets, n_features)
    if threads > 1 and urows.size * m >= par_min:
        _sampled_cuts_basis_at_parallel(
            indptr,
            indices,
            data,
            sq,
            kp,
            shift,
            urows,
            uptr,
            ucut,
            ucoef,
            targets,
            sq_t,
            dense_t,
            use_dense,
            n_features,
            threads,
            out,
        )
    else:
        _sampled_cuts_basis_at_range(
            indptr,
            indices,
            data,
            sq,
            kp,
            shift,
            urows,
            uptr,
            ucut,
            ucoef,
            targets,
            sq_t,
            dense_t,
            use_dense,
            n_features,
            0,
            m,
            out,
        )


@njit(cache=True)
def _sampled_cuts_expansion_range(
    indptr,
    indices,
    data,
    sq,
    kp,
    shift,
    basis_rows,
    basis_coef,
    sq_b,
    targets,
    dense_t,
    use_dense,
    n_features,
    start,
    stop,
    out,
):
    m = basis_rows.size
    xbuf = np.zeros(n_features if not use_dense else 1)
    kvals = np.empty(m)
    for t in range(start, stop):
        _sampled_cuts_kvals(
            targets[t], basis_rows, 0, m, dense_t, use_dense, indptr, indices, data, sq, sq_b, kp, shift, xbuf, kvals
        )
        acc = 0.0
        for v in range(m):
            acc += basis_coef[v] * kvals[v]
        out[t] = acc


@njit(cache=True, parallel=True)
def _sampled_cuts_expansion_parallel(
    indptr,
    indices,
    data,
    sq,
    kp,
    shift,
    basis_rows,
    basis_coef,
    sq_b,
    targets,
    dense_t,
    use_dense,
    n_features,
    start,
    stop,
    n_chunks,
    out,
):
    for c in prange(n_chunks):
        _sampled_cuts_expansion_range(
            indptr,
            indices,
            data,
            sq,
            kp,
            shift,
            basis_rows,
            basis_coef,
            sq_b,
            targets,
            dense_t,
            use_dense,
            n_features,
            start + (stop - start) * c // n_chunks,
            start + (stop - start) * (c + 1) // n_chunks,
            out,
        )


@njit(cache=True)
def _sampled_cuts_expansion(
    indptr,
    indices,
    data,
    sq,
    kp,
    shift,
    basis_rows,
    basis_coef,
    targets,
    start,
    stop,
    n_features,
    out,
    threads,
    par_min,
):
    """out[t] = sum_v basis_coef[v] * K'(x_basis_rows[v], x_targets[t]) for t in [start, stop) (targets split
    between the threads)."""
    m = basis_rows.size
    use_dense, dense_t, sq_b = _sampled_cuts_inner(indptr, indices, data, sq, basis_rows, n_features)
    if threads > 1 and (stop - start) * m >= par_min:
        _sampled_cuts_expansion_parallel(
            indptr,
            indices,
            data,
            sq,
            kp,
            shift,
            basis_rows,
            basis_coef,
            sq_b,
            targets,
            dense_t,
            use_dense,
            n_features,
            start,
            stop,
            threads,
            out,
        )
    else:
        _sampled_cuts_expansion_range(
            indptr,
            indices,
            data,
            sq,
            kp,
            shift,
            basis_rows,
            basis_coef,
            sq_b,
            targets,
            dense_t,
            use_dense,
            n_features,
            start,
            stop,
            out,
        )


@njit(cache=True)
def _sampled_cuts_draw(rng, pool, pool_size, count, out):
    """out[:count] = pool[j] for j drawn uniformly from [0, pool_size), with replacement (seeded splitmix64)."""
    for j in range(count):
        out[j] = pool[rng_below(rng, pool_size)]

"""The compiled passes (numba) of cpa (``cpa.solve_cpa``) and ocas: the classification cut's coefficients and sums
over the rows, the hinge risk in parts, the row norms, and the listed passes' copy of the rows near the margin
and their cut. The math and the names are in ``worker.solvers.cpa``'s docstring.
"""

from __future__ import annotations

import math

from numba import njit, prange


@njit(cache=True)
def _class_cut_chunk(y, o, c, chunks, gamma, rows, count_parts, risk_parts, gsum_parts):
    base = chunks[c]
    cnt = 0
    risk = 0.0
    gs = 0.0
    for i in range(chunks[c], chunks[c + 1]):
        margin = 1.0 - y[i] * o[i]
        if margin > 0.0:
            gamma[i] = y[i]
            rows[base + cnt] = i
            cnt += 1
            risk += margin
            gs += y[i]
        else:
            gamma[i] = 0.0
    count_parts[c] = cnt
    risk_parts[c] = risk
    gsum_parts[c] = gs


@njit(cache=True, parallel=True)
def _class_cut(y, o, chunks, gamma, rows, count_parts, risk_parts, gsum_parts, serial):
    """Most violated constraint of OP2 at outputs o: c_i = [y_i o_i < 1], gamma_i = y_i c_i.

    Per chunk: the number of c_i = 1 (and those rows at rows[chunks[c]:]), the risk
    sum_i max(0, 1 - y_i o_i) and sum_i gamma_i.
    """
    if serial:
        for c in range(chunks.shape[0] - 1):
            _class_cut_chunk(y, o, c, chunks, gamma, rows, count_parts, risk_parts, gsum_parts)
    else:
        for c in prange(chunks.shape[0] - 1):
            _class_cut_chunk(y, o, c, chunks, gamma, rows, count_parts, risk_parts, gsum_parts)


@njit(cache=True)
def _hinge_chunk(y, o, i0, i1):
    h = 0.0
    for i in range(i0, i1):
        margin = 1.0 - y[i] * o[i]
        if margin > 0.0:
            h += margin
    return h


@njit(cache=True, parallel=True)
def hinge_parts(y, o, chunks, parts, serial):
    """parts[c] = sum over chunk c of max(0, 1 - y_i o_i)."""
    if serial:
        for c in range(chunks.shape[0] - 1):
            parts[c] = _hinge_chunk(y, o, chunks[c], chunks[c + 1])
    else:
        for c in prange(chunks.shape[0] - 1):
            parts[c] = _hinge_chunk(y, o, chunks[c], chunks[c + 1])


@njit(cache=True)
def _row_norms(indptr, data, B, nu):
    """nu[i] = |x_i| with the bias feature B counted."""
    for i in range(indptr.shape[0] - 1):
        acc = B * B
        for k in range(indptr[i], indptr[i + 1]):
            acc += float(data[k]) * float(data[k])
        nu[i] = math.sqrt(acc)


@njit(cache=True)
def _copy_rows(indptr, indices, data, listed, m, sub_indptr, sub_indices, sub_data):
    """The rows listed[:m] as a CSR matrix of their own (sub_indptr[q] .. sub_indptr[q + 1]: row listed[q]),
    so that the listed iterations read contiguous memory; returns its number of non-zeros."""
    pos = 0
    sub_indptr[0] = 0
    for q in range(m):
        i = listed[q]
        for k in range(indptr[i], indptr[i + 1]):
            sub_indices[pos] = indices[k]
            sub_data[pos] = data[k]
            pos += 1
        sub_indptr[q + 1] = pos
    return pos


@njit(cache=True)
def _listed_cut_chunk(sub_indptr, sub_indices, sub_data, w, w_bias, y, listed, lchunks, c, o, gamma, changed, parts):
    n_changed = 0
    d_count = 0
    d_sum = 0.0
    base = lchunks[c]
    for q in range(lchunks[c], lchunks[c + 1]):
        i = listed[q]
        acc = 0.0
        for k in range(sub_indptr[q], sub_indptr[q + 1]):
            acc += sub_data[k] * w[sub_indices[k]]
        o[i] = acc + w_bias
        g = y[i] if 1.0 - y[i] * o[i] > 0.0 else 0.0
        if g != gamma[i]:
            d_count += (1 if g != 0.0 else 0) - (1 if gamma[i] != 0.0 else 0)
            d_sum += g - gamma[i]
            gamma[i] = g
            changed[base + n_changed] = i
            n_changed += 1
    parts[0, c] = n_changed
    parts[1, c] = d_count
    parts[2, c] = d_sum


@njit(cache=True, parallel=True)
def _listed_cut(sub_indptr, sub_indices, sub_data, w, w_bias, y, listed, lchunks, o, gamma, changed, parts):
    """For the listed rows only (their copy ``sub_*``, in chunks ``lchunks`` of the list):
    o_i = <x_i, w> + w_bias and gamma_i = y_i [y_i o_i < 1].

    Per chunk c: the rows whose gamma_i changed at changed[lchunks[c]:] (``compact_chunks`` gathers
    them), their number in parts[0, c], the change of the number of rows in the cut in parts[1, c] and
    of sum_i gamma_i in parts[2, c]. (With one thread the caller runs ``_listed_cut_chunk`` on one
    chunk itself: no parallel region to start.)"""
    for c in prange(lchunks.shape[0] - 1):
        _listed_cut_chunk(sub_indptr, sub_indices, sub_data, w, w_bias, y, listed, lchunks, c, o, gamma, changed, parts)

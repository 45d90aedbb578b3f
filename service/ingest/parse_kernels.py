"""Byte-level numba kernels behind ``service.ingest.parser`` (svmlight/libsvm and CSV text).

Only the ingest processes import this module (it compiles numba kernels); the API process never does.

Each kernel parses the whole lines of one chunk of text, ``buf[pos:end]`` (a uint8 array; the
caller guarantees that ``pos`` is a line start and that ``end`` is just past a newline, or the end
of the text), appending rows to output arrays that the caller has made large enough for any chunk
of that length. Everything that must survive from one chunk to the next lives in the int64 array
``st`` (row count, nnz, absolute line count, qid state, index extremes, error report); the kernel
reads it on entry and writes it back after every complete line, so a kernel that stops early
(``ST_FULL``: the slow-token buffer is full) can be called again from ``st[S_POS]``.

Numbers are read by ``service.ingest.number_kernels`` (``_parse_number``), which computes a value exactly as
Python's ``float`` would or reports it as "slow". Slow tokens are recorded in ``slow`` as rows
(slot, start, end, line): slot >= 0 is a position in ``data``, slot < 0 is the label of row
-slot-1. The caller replaces them with ``float(bytes(buf[start:end]))`` before the buffer goes.
How a value is stored (``vmode``: float64, float32, or float32 while recoverable, else ``ST_WIDEN``) is
described there too.

The two chunk kernels release the GIL, so the ingest process's writer thread sends the previous
Redis chunk while the next text is parsed.

Indices are stored zero-based as they are read: one-based files (``MODE_ONE_BASED`` and
``MODE_AUTO``) have 1 subtracted. In ``MODE_AUTO`` the first index 0 makes the kernel stop with
``ST_ZERO_BASED`` and the caller parses again with ``MODE_ZERO_BASED`` (zero-based iff some
index is 0, as scikit-learn decides).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from numba import njit

from core.compile_cache import install
from service.ingest.number_kernels import (
    N_BAD,
    N_NONFINITE,
    N_OK,
    N_SLOW,
    V_OVERFLOW,
    V_SLOW,
    V_WIDEN,
    VAL_F64,
    _f32_value,
    _parse_number,
)

install("service.ingest", Path(__file__).resolve().parent)  # Hinge's cache locator, before the first kernel

# -- state vector layout ---------------------------------------------------------------------
S_POS = 0  # where the next line starts (offset in buf)
S_NROWS = 1
S_NNZ = 2
S_LINE = 3  # lines fully consumed so far (absolute, 1-based numbering of the next line is S_LINE + 1)
S_HAS_QID = 4  # -1 unknown, 0 no, 1 yes
S_MAX_IDX = 5  # largest raw feature index seen, -1 when none
S_MAX_IDX_LINE = 6
S_MIN_IDX = 7  # smallest raw feature index seen, 2**62 when none
S_NSLOW = 8
S_STATUS = 9
S_ERR = 10  # error code (E_*)
S_ERR_START = 11  # offending token span in buf
S_ERR_END = 12
S_ERR_LINE = 13
S_ERR_LINE_START = 14  # offset in buf where the error's line starts
S_ERR_AUX = 15  # extra number for the message (previous index, field count...)
N_STATE = 16

# -- kernel return status ----------------------------------------------------------------------
ST_DONE = 0  # every line of buf[pos:end] consumed
ST_FULL = 1  # the slow-token buffer is full: flush it and call again from st[S_POS]
ST_ERROR = 2  # see st[S_ERR] and friends
ST_WIDEN = 3  # VAL_AUTO met a value that float32 cannot hold recoverably: parse again into float64
ST_ZERO_BASED = 4  # MODE_AUTO met the index 0: parse again with MODE_ZERO_BASED

# -- error codes -----------------------------------------------------------------------------
E_NONE = 0
E_BAD_LABEL = 1
E_NONFINITE_LABEL = 2
E_MISSING_LABEL = 3
E_BAD_QID = 4
E_QID_MISSING = 5  # mixed qid: earlier rows have one, this row has none
E_QID_UNEXPECTED = 6  # mixed qid: earlier rows have none, this row has one
E_MISSING_COLON = 7
E_BAD_INDEX = 8
E_NEGATIVE_INDEX = 9
E_ZERO_INDEX = 10
E_INDEX_TOO_LARGE = 11
E_UNSORTED_INDEX = 12  # aux: previous index
E_DUPLICATE_INDEX = 13
E_BAD_VALUE = 14
E_NONFINITE_VALUE = 15
E_LIMIT_ROWS = 16
E_LIMIT_NNZ = 17
E_LIMIT_FEATURES = 18  # aux: the index
E_CSV_EMPTY = 19  # aux: field number (0-based)
E_CSV_RAGGED = 20  # aux: number of fields found
E_CSV_BAD_NUMBER = 21  # aux: field number
E_CSV_NONFINITE = 22  # aux: field number
E_F32_OVERFLOW = 23  # value_dtype float32: the value is beyond float32's range; aux: CSV field number

# -- zero_based modes --------------------------------------------------------------------------
MODE_ONE_BASED = 0
MODE_ZERO_BASED = 1
MODE_AUTO = 2

INT32_MAX = 2147483647
_BIG = 1 << 62


@njit(cache=True)
def _is_blank(c):
    # bytes.split() whitespace except the newline: space, \t, \v, \f, \r
    return c == 32 or c == 9 or c == 13 or c == 11 or c == 12


@njit(cache=True)
def _is_svm_end(buf, q, end):
    """True when position q ends an svmlight token (whitespace, '#', newline or end of text)."""
    if q >= end:
        return True
    c = buf[q]
    return c == 32 or c == 10 or c == 9 or c == 13 or c == 35 or c == 11 or c == 12


@njit(cache=True)
def _svm_token_end(buf, p, end):
    while p < end and not _is_svm_end(buf, p, end):
        p += 1
    return p


@njit("int64(int64[::1], int64, int64, int64, int64, int64, int64)", cache=True)
def _set_error(st, code, start, stop, line, line_start, aux):
    # one signature, given: called with the error codes as constants, numba compiled it once per code and call site
    # (29 versions, a fifth of the parser's first compile; a parser process's load of the cached kernels took as long
    # either way)
    st[S_ERR] = code
    st[S_ERR_START] = start
    st[S_ERR_END] = stop
    st[S_ERR_LINE] = line
    st[S_ERR_LINE_START] = line_start
    st[S_ERR_AUX] = aux
    st[S_STATUS] = ST_ERROR
    return ST_ERROR


@njit(cache=True, nogil=True)
def svm_chunk(
    buf, end, st, indptr, indices, data, y, qid, slow, mode, vmode, max_rows, max_features, max_nnz, labelled
):
    """Parse the svmlight lines of buf[st[S_POS]:end]; returns ST_DONE, ST_FULL, ST_ERROR, ST_WIDEN or ST_ZERO_BASED.

    Row and entry counters in ``st`` index the output arrays (the caller empties them between calls
    and keeps the totals); ``max_rows`` and ``max_nnz`` are what is left of the limits. ``labelled`` False: the
    lines have no label (an upload with ``labels=none``); every row's label is 1.
    """
    pos = st[S_POS]
    nrows = st[S_NROWS]
    nnz = st[S_NNZ]
    line = st[S_LINE]
    has_qid = st[S_HAS_QID]
    max_idx = st[S_MAX_IDX]
    max_idx_line = st[S_MAX_IDX_LINE]
    min_idx = st[S_MIN_IDX]
    nslow = st[S_NSLOW]
    slow_cap = slow.shape[0]
    # limits on the raw index, checked where it appears
    if mode == MODE_ZERO_BASED:
        raw_limit = max_features - 1
    else:
        raw_limit = max_features
    while pos < end:
        line += 1
        ls = pos
        row_slow0 = nslow
        p = pos
        while p < end and _is_blank(buf[p]):
            p += 1
        if p >= end or buf[p] == 10 or buf[p] == 35:
            # blank or comment-only line
            while p < end and buf[p] != 10:
                p += 1
            pos = p + 1
            st[S_POS] = pos
            st[S_LINE] = line
            continue
        # ---- label (none when not labelled: every row's label is 1)
        tok = p
        q = p
        label = 1.0
        if labelled:
            q, status, label, _, _ = _parse_number(buf, p, end)
            if status == N_BAD or not _is_svm_end(buf, q, end):
                te = _svm_token_end(buf, tok, end)
                for r in range(tok, te):
                    if buf[r] == 58:
                        st[S_NSLOW] = nslow
                        return _set_error(st, E_MISSING_LABEL, tok, te, line, ls, 0)
                st[S_NSLOW] = nslow
                return _set_error(st, E_BAD_LABEL, tok, te, line, ls, 0)
            if status == N_NONFINITE:
                st[S_NSLOW] = nslow
                return _set_error(st, E_NONFINITE_LABEL, tok, q, line, ls, 0)
            if status == N_SLOW:
                if nslow >= slow_cap:
                    st[S_STATUS] = ST_FULL
                    return ST_FULL
                slow[nslow, 0] = -(nrows + 1)
                slow[nslow, 1] = tok
                slow[nslow, 2] = q
                slow[nslow, 3] = line
                nslow += 1
        if nrows >= max_rows:
            st[S_NSLOW] = row_slow0
            return _set_error(st, E_LIMIT_ROWS, tok, q, line, ls, 0)
        p = q
        while p < end and _is_blank(buf[p]):
            p += 1
        # ---- optional qid
        row_qid = 0
        row_has_qid = 0
        if p + 3 < end and buf[p] == 113 and buf[p + 1] == 105 and buf[p + 2] == 100 and buf[p + 3] == 58:
            tok = p
            r = p + 4
            qneg = False
            if r < end and (buf[r] == 45 or buf[r] == 43):
                qneg = buf[r] == 45
                r += 1
            ds = r
            while r < end and buf[r] >= 48 and buf[r] <= 57 and r - ds < 19:
                row_qid = row_qid * 10 + (buf[r] - 48)
                r += 1
            if r == ds or r - ds > 18 or not _is_svm_end(buf, r, end):
                st[S_NSLOW] = nslow
                return _set_error(st, E_BAD_QID, tok, _svm_token_end(buf, tok, end), line, ls, 0)
            if qneg:
                row_qid = -row_qid
            row_has_qid = 1
            if has_qid == 0:
                st[S_NSLOW] = nslow
                return _set_error(st, E_QID_UNEXPECTED, tok, r, line, ls, 0)
            p = r
            while p < end and _is_blank(buf[p]):
                p += 1
        elif has_qid == 1:
            st[S_NSLOW] = nslow
            return _set_error(st, E_QID_MISSING, p, _svm_token_end(buf, p, end), line, ls, 0)
        # ---- features
        prev = -1
        while p < end:
            c = buf[p]
            if c == 10 or c == 35:
                break
            if _is_blank(c):
                p += 1
                continue
            tok = p
            neg = False
            if c == 45:
                neg = True
                p += 1
            elif c == 43:
                p += 1
            ds = p
            idx = 0
            while p < end and buf[p] >= 48 and buf[p] <= 57:
                if idx <= INT32_MAX:
                    idx = idx * 10 + (buf[p] - 48)
                p += 1
            if p == ds or p >= end or buf[p] != 58:
                te = _svm_token_end(buf, tok, end)
                colon = -1
                for r in range(tok, te):
                    if buf[r] == 58:
                        colon = r
                        break
                st[S_NSLOW] = nslow
                if colon < 0:
                    return _set_error(st, E_MISSING_COLON, tok, te, line, ls, 0)
                return _set_error(st, E_BAD_INDEX, tok, colon, line, ls, 0)
            if neg and idx != 0:
                st[S_NSLOW] = nslow
                return _set_error(st, E_NEGATIVE_INDEX, tok, p, line, ls, 0)
            if idx > INT32_MAX:
                st[S_NSLOW] = nslow
                return _set_error(st, E_INDEX_TOO_LARGE, tok, p, line, ls, 0)
            if idx == 0 and mode == MODE_ONE_BASED:
                st[S_NSLOW] = nslow
                return _set_error(st, E_ZERO_INDEX, tok, p, line, ls, 0)
            if idx == 0 and mode == MODE_AUTO:
                st[S_NSLOW] = row_slow0
                st[S_STATUS] = ST_ZERO_BASED
                return ST_ZERO_BASED
            if idx <= prev:
                st[S_NSLOW] = nslow
                if idx == prev:
                    return _set_error(st, E_DUPLICATE_INDEX, tok, p, line, ls, prev)
                return _set_error(st, E_UNSORTED_INDEX, tok, p, line, ls, prev)
            if idx > raw_limit:
                st[S_NSLOW] = nslow
                return _set_error(st, E_LIMIT_FEATURES, tok, p, line, ls, idx)
            p += 1  # the colon
            vs = p
            one_digit = p < end and buf[p] >= 48 and buf[p] <= 57 and _is_svm_end(buf, p + 1, end)
            if one_digit:
                # a single digit (binary and count features: a9a's every value is "1"): exact as float32 and
                # float64, recoverable, so neither the general number parser nor the float32 checks are needed
                q, status, val = p + 1, N_OK, np.float64(buf[p] - 48)
            else:
                q, status, val, nd, k10 = _parse_number(buf, p, end)
                if status == N_BAD or not _is_svm_end(buf, q, end):
                    st[S_NSLOW] = nslow
                    return _set_error(st, E_BAD_VALUE, vs, _svm_token_end(buf, vs, end), line, ls, 0)
                if status == N_NONFINITE:
                    st[S_NSLOW] = nslow
                    return _set_error(st, E_NONFINITE_VALUE, vs, q, line, ls, 0)
            if nnz >= max_nnz:
                st[S_NSLOW] = row_slow0
                return _set_error(st, E_LIMIT_NNZ, tok, q, line, ls, 0)
            if not one_digit and status == N_OK and vmode != VAL_F64:
                f32, vcheck = _f32_value(val, nd, k10, vmode)
                if vcheck == V_WIDEN:
                    st[S_NSLOW] = row_slow0
                    st[S_STATUS] = ST_WIDEN
                    return ST_WIDEN
                if vcheck == V_OVERFLOW:
                    st[S_NSLOW] = nslow
                    return _set_error(st, E_F32_OVERFLOW, vs, q, line, ls, 0)
                if vcheck == V_SLOW:
                    status = N_SLOW
                val = np.float64(f32)
            if status == N_SLOW:
                if nslow >= slow_cap:
                    st[S_STATUS] = ST_FULL
                    return ST_FULL
                slow[nslow, 0] = nnz
                slow[nslow, 1] = vs
                slow[nslow, 2] = q
                slow[nslow, 3] = line
                nslow += 1
            indices[nnz] = idx if mode == MODE_ZERO_BASED else idx - 1
            data[nnz] = val
            nnz += 1
            prev = idx
            if idx > max_idx:
                max_idx = idx
                max_idx_line = line
            min_idx = min(min_idx, idx)
            p = q
        # ---- end of line (comment or newline or end of text)
        while p < end and buf[p] != 10:
            p += 1
        pos = p + 1
        y[nrows] = label
        qid[nrows] = row_qid
        nrows += 1
        indptr[nrows] = nnz
        if has_qid < 0:
            has_qid = row_has_qid
        # commit the line
        st[S_POS] = pos
        st[S_NROWS] = nrows
        st[S_NNZ] = nnz
        st[S_LINE] = line
        st[S_HAS_QID] = has_qid
        st[S_MAX_IDX] = max_idx
        st[S_MAX_IDX_LINE] = max_idx_line
        st[S_MIN_IDX] = min_idx
        st[S_NSLOW] = nslow
    st[S_STATUS] = ST_DONE
    return ST_DONE


@njit(cache=True)
def _csv_field_end(buf, p, end):
    while p < end and buf[p] != 44 and buf[p] != 10:
        p += 1
    return p


@njit(cache=True, nogil=True)
def csv_chunk(buf, end, st, indptr, indices, data, y, slow, n_cols, label_col, vmode, max_rows, max_nnz):
    """Parse the CSV data lines of buf[st[S_POS]:end]; returns ST_DONE, ST_FULL, ST_ERROR or ST_WIDEN.

    Fields are numbers (optionally in double quotes, spaces and tabs around them ignored),
    separated by commas; column ``label_col`` is the label, the others are features
    0..n_cols-2 in order; zeros are not stored.
    """
    pos = st[S_POS]
    nrows = st[S_NROWS]
    nnz = st[S_NNZ]
    line = st[S_LINE]
    nslow = st[S_NSLOW]
    slow_cap = slow.shape[0]
    while pos < end:
        line += 1
        ls = pos
        row_slow0 = nslow
        p = pos
        while p < end and _is_blank(buf[p]):
            p += 1
        if p >= end or buf[p] == 10:
            pos = p + 1
            st[S_POS] = pos
            st[S_LINE] = line
            continue
        if nrows >= max_rows:
            st[S_NSLOW] = nslow
            return _set_error(st, E_LIMIT_ROWS, ls, ls, line, ls, 0)
        p = pos
        col = 0
        label = 1.0  # a CSV without a label column (labels=none: label_col is past the last column)
        while True:
            cs = p  # cell start (just after the comma)
            while p < end and (buf[p] == 32 or buf[p] == 9):
                p += 1
            fs = p
            if col >= n_cols:
                # one field too many: count them all for the message
                got = col + 1
                r = p
                while r < end and buf[r] != 10:
                    if buf[r] == 44:
                        got += 1
                    r += 1
                st[S_NSLOW] = nslow
                return _set_error(st, E_CSV_RAGGED, fs, _csv_field_end(buf, fs, end), line, ls, got)
            quoted = p < end and buf[p] == 34
            if quoted:
                p += 1
            ns = p
            q, status, val, nd, k10 = _parse_number(buf, p, end)
            r = q
            if quoted:
                if r < end and buf[r] == 34:
                    r += 1
                else:
                    status = N_BAD
            while r < end and (buf[r] == 32 or buf[r] == 9 or buf[r] == 13):
                r += 1
            if status == N_BAD or (r < end and buf[r] != 44 and buf[r] != 10):
                fe = _csv_field_end(buf, fs, end)
                st[S_NSLOW] = nslow
                blank = True
                for t in range(fs, fe):
                    if not _is_blank(buf[t]) and buf[t] != 34:
                        blank = False
                if blank:
                    return _set_error(st, E_CSV_EMPTY, cs, fe, line, ls, col)
                return _set_error(st, E_CSV_BAD_NUMBER, fs, fe, line, ls, col)
            if status == N_NONFINITE:
                st[S_NSLOW] = nslow
                return _set_error(st, E_CSV_NONFINITE, fs, _csv_field_end(buf, fs, end), line, ls, col)
            if col == label_col:
                if status == N_SLOW:
                    if nslow >= slow_cap:
                        st[S_STATUS] = ST_FULL
                        return ST_FULL
                    slow[nslow, 0] = -(nrows + 1)
                    slow[nslow, 1] = ns
                    slow[nslow, 2] = q
                    slow[nslow, 3] = line
                    nslow += 1
                label = val
            elif val != 0.0 or status == N_SLOW:
                if nnz >= max_nnz:
                    st[S_NSLOW] = row_slow0
                    return _set_error(st, E_LIMIT_NNZ, fs, r, line, ls, 0)
                if status == N_OK and vmode != VAL_F64:
                    f32, vcheck = _f32_value(val, nd, k10, vmode)
                    if vcheck == V_WIDEN:
                        st[S_NSLOW] = row_slow0
                        st[S_STATUS] = ST_WIDEN
                        return ST_WIDEN
                    if vcheck == V_OVERFLOW:
                        st[S_NSLOW] = nslow
                        return _set_error(st, E_F32_OVERFLOW, fs, r, line, ls, col)
                    if vcheck == V_SLOW:
                        status = N_SLOW
                    val = np.float64(f32)
                if status == N_SLOW:
                    if nslow >= slow_cap:
                        st[S_STATUS] = ST_FULL
                        return ST_FULL
                    slow[nslow, 0] = nnz
                    slow[nslow, 1] = ns
                    slow[nslow, 2] = q
                    slow[nslow, 3] = line
                    nslow += 1
                indices[nnz] = col if col < label_col else col - 1
                data[nnz] = val
                nnz += 1
            col += 1
            if r < end and buf[r] == 44:
                p = r + 1
                continue
            p = r
            break
        if col != n_cols:
            st[S_NSLOW] = nslow
            return _set_error(st, E_CSV_RAGGED, p, p, line, ls, col)
        pos = p + 1
        y[nrows] = label
        nrows += 1
        indptr[nrows] = nnz
        st[S_POS] = pos
        st[S_NROWS] = nrows
        st[S_NNZ] = nnz
        st[S_LINE] = line
        st[S_NSLOW] = nslow
    st[S_STATUS] = ST_DONE
    return ST_DONE

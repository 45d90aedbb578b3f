"""Byte-level numba kernels behind ``service.ingest.parser`` (svmlight/libsvm and CSV text).

Only the ingest processes import this module (it compiles numba kernels); the API process never does.

Each kernel parses the whole lines of one chunk of text, ``buf[pos:end]`` (a uint8 array; the
caller guarantees that ``pos`` is a line start and that ``end`` is just past a newline, or the end
of the text), appending rows to output arrays that the caller has made large enough for any chunk
of that length. Everything that must survive from one chunk to the next lives in the int64 array
``st`` (row count, nnz, absolute line count, qid state, index extremes, error report); the kernel
reads it on entry and writes it back after every complete line, so a kernel that stops early
(``ST_FULL``: the slow-token buffer is full) can be called again from ``st[S_POS]``.

Numbers. ``_parse_number`` accepts ``[+-]? (digits [. digits?] | . digits) ([eE] [+-]? digits)?``
and the words nan/inf/infinity (reported as non-finite). For an accepted token it either
computes the double exactly as Python's ``float`` would (Clinger's fast path: significand
D <= 2**53 with the trailing zeros stripped and a power of ten 10**k with |k| <= 22, one
correctly rounded IEEE multiplication or division; also m * 10**j * 1e22 when m * 10**j is
still an exact integer <= 2**53), or reports the token as "slow". Slow tokens (more than 18
significant digits, large exponents, subnormals...) are recorded in ``slow`` as rows
(slot, start, end, line): slot >= 0 is a position in ``data``, slot < 0 is the label of row
-slot-1. The caller replaces them with ``float(bytes(buf[start:end]))`` before the buffer goes.

The two chunk kernels release the GIL, so the ingest process's writer thread sends the previous
Redis chunk while the next text is parsed.

Stored values (``vmode``). ``VAL_F64``: ``data`` is float64 and holds float(token). ``VAL_F32``
(asked for): ``data`` is float32 and holds the float32 nearest to the decimal text (rounded once,
from the text: a double that lies exactly halfway between two float32 is sent to the slow path,
where Python rounds the exact decimal). ``VAL_AUTO``: float32 as long as every value is *recoverable*
from its float32: the text has at most 7 significant digits and rounding the float32 to 7
significant digits gives back the text's value (checked with a safety margin, see ``_f32_value``);
the first value that is not makes the kernel stop with ``ST_WIDEN`` and the caller parses again
into float64. Labels are always float64.

Indices are stored zero-based as they are read: one-based files (``MODE_ONE_BASED`` and
``MODE_AUTO``) have 1 subtracted. In ``MODE_AUTO`` the first index 0 makes the kernel stop with
``ST_ZERO_BASED`` and the caller parses again with ``MODE_ZERO_BASED`` (zero-based iff some
index is 0, as scikit-learn decides).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from numba import njit

from core.kernel_cache import install

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

# -- stored value types (vmode) ------------------------------------------------------------------
VAL_F64 = 0
VAL_F32 = 1
VAL_AUTO = 2
AUTO_MAX_DIGITS = 7  # VAL_AUTO: most significant digits a value may have to be stored as float32
AUTO_MARGIN = 1e-6  # VAL_AUTO: |float32 - value| must stay below (1 - AUTO_MARGIN) x half a unit of the 7th digit

# -- value check outcomes (_f32_value)
V_OK = 0
V_SLOW = 1  # exact float32 rounding needs Python (the double is a float32 midpoint)
V_WIDEN = 2  # VAL_AUTO: not recoverable from float32
V_OVERFLOW = 3  # VAL_F32: beyond float32's range

# -- number parse status -----------------------------------------------------------------------
N_OK = 0
N_SLOW = 1
N_BAD = 2
N_NONFINITE = 3

INT32_MAX = 2147483647
_TWO53 = 9007199254740992
_POW10_F = np.array([10.0**k for k in range(23)], dtype=np.float64)  # all exact doubles
_POW10_I = np.array([10**k for k in range(19)], dtype=np.int64)
_BIG = 1 << 62
_POW10_MIN_E = -60  # _POW10_ANY[e - _POW10_MIN_E] = 10**e (to within 1e-16) for e in [-60, 40]
_POW10_MAX_E = 40
_POW10_ANY = np.array([10.0**e for e in range(_POW10_MIN_E, _POW10_MAX_E + 1)], dtype=np.float64)


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


@njit(cache=True)
def _match_word(buf, p, end, w0, w1, w2):
    """Case-insensitive match of the 3 ASCII letters w0 w1 w2 at p."""
    if p + 3 > end:
        return False
    return (buf[p] | 32) == w0 and (buf[p + 1] | 32) == w1 and (buf[p + 2] | 32) == w2


@njit(cache=True)
def _parse_number(buf, p, end):
    """Parse a decimal floating-point number starting at p.

    Returns (q, status, value, nd, k): q is just past the characters taken (the caller checks
    that a delimiter follows), status is N_OK (value exact), N_SLOW (syntax fine, value to be
    computed by Python's float), N_BAD or N_NONFINITE (nan/inf words). For N_OK, the text's value
    is m * 10**k with m an integer of nd significant digits (trailing zeros stripped; nd = 0 for zero).
    """
    neg = False
    if p < end:
        c = buf[p]
        if c == 45:
            neg = True
            p += 1
        elif c == 43:
            p += 1
    m = 0  # significand without trailing zeros (at most 18 digits)
    nd = 0  # digits in m
    pz = 0  # zeros seen after the last nonzero digit, not yet multiplied into m
    nfrac = 0  # digits after the decimal point
    ndig = 0  # all mantissa digits
    many = False  # more than 18 significant digits: inexact here
    infrac = False
    while p < end:
        c = buf[p]
        if c >= 48 and c <= 57:
            d = c - 48
            ndig += 1
            if infrac:
                nfrac += 1
            if d == 0:
                if m != 0:
                    pz += 1
            elif m == 0:
                m = d
                nd = 1
            elif nd + pz + 1 <= 18:
                m = m * _POW10_I[pz + 1] + d
                nd += pz + 1
                pz = 0
            else:
                many = True
            p += 1
        elif c == 46 and not infrac:
            infrac = True
            p += 1
        else:
            break
    if ndig == 0:
        if infrac:
            return p, N_BAD, 0.0, 0, 0
        # nan, inf, infinity (any case)
        if _match_word(buf, p, end, 110, 97, 110):  # nan
            return p + 3, N_NONFINITE, 0.0, 0, 0
        if _match_word(buf, p, end, 105, 110, 102):  # inf
            if (
                _match_word(buf, p + 3, end, 105, 110, 105)
                and p + 8 <= end
                and (buf[p + 6] | 32) == 116
                and (buf[p + 7] | 32) == 121
            ):  # infinity
                return p + 8, N_NONFINITE, 0.0, 0, 0
            return p + 3, N_NONFINITE, 0.0, 0, 0
        return p, N_BAD, 0.0, 0, 0
    e10 = 0
    if p < end and (buf[p] == 101 or buf[p] == 69):
        p += 1
        eneg = False
        if p < end and (buf[p] == 45 or buf[p] == 43):
            eneg = buf[p] == 45
            p += 1
        es = p
        while p < end and buf[p] >= 48 and buf[p] <= 57:
            if e10 < 100000000:
                e10 = e10 * 10 + (buf[p] - 48)
            p += 1
        if p == es:
            return p, N_BAD, 0.0, 0, 0
        if eneg:
            e10 = -e10
    if m == 0:
        return p, N_OK, (-0.0 if neg else 0.0), 0, 0
    if many:
        return p, N_SLOW, 0.0, 19, 0
    k = e10 - nfrac + pz
    if m <= _TWO53:
        if k >= 0:
            if k <= 22:
                v = float(m) * _POW10_F[k]
                return p, N_OK, (-v if neg else v), nd, k
            j = k - 22
            if j <= 16 and m <= _TWO53 // _POW10_I[j]:
                v = float(m * _POW10_I[j]) * _POW10_F[22]
                return p, N_OK, (-v if neg else v), nd, k
        elif k >= -22:
            v = float(m) / _POW10_F[-k]
            return p, N_OK, (-v if neg else v), nd, k
    return p, N_SLOW, 0.0, nd, k


@njit(cache=True)
def _f32_value(val, nd, k, vmode):
    """The float32 to store for the exact double ``val`` of a text m * 10**k (m of nd digits), and V_*.

    The float32 nearest to ``val`` is the float32 nearest to the text unless ``val`` lies exactly
    halfway between two float32 (rounding twice could then go the wrong way): V_SLOW, Python rounds
    the text. VAL_AUTO also asks for recoverability: nd <= 7 and |f - text| < half a unit of the
    7th significant digit of f's decade (a value 10**E whose float32 falls below it is judged on
    the finer grid of the decade below). The test runs on doubles: |f - val| is exact (Sterbenz),
    |val - text| <= 2**-53 |text| is below 3e-9 of the half unit, and the half unit 5 * 10**(E-7)
    is computed to about 1e-15; the margin AUTO_MARGIN covers both, so a value passes only if it
    truly is recoverable (some values just inside the bound are refused: they go to float64).
    """
    f = np.float32(val)
    fd = np.float64(f)
    if np.isinf(fd):
        return f, (V_WIDEN if vmode == VAL_AUTO else V_OVERFLOW)
    if fd != val:
        # val is the midpoint between f and its neighbour g iff g = 2 val - f is a float32 (both steps exact then)
        g = 2.0 * val - fd
        if np.float64(np.float32(g)) == g:
            return f, (V_WIDEN if vmode == VAL_AUTO else V_SLOW)
    if vmode == VAL_AUTO and val != 0.0:
        if nd > AUTO_MAX_DIGITS:
            return f, V_WIDEN
        E = nd - 1 + k
        if E < _POW10_MIN_E + 7 or E > _POW10_MAX_E:
            return f, V_WIDEN  # beyond float32's normal range anyway
        half = 5.0 * _POW10_ANY[E - 7 - _POW10_MIN_E]
        if abs(fd) < _POW10_ANY[E - _POW10_MIN_E]:
            half *= 0.1
        if not abs(fd - val) < half * (1.0 - AUTO_MARGIN):
            return f, V_WIDEN
    return f, V_OK


@njit(cache=True)
def _set_error(st, code, start, stop, line, line_start, aux):
    st[S_ERR] = code
    st[S_ERR_START] = start
    st[S_ERR_END] = stop
    st[S_ERR_LINE] = line
    st[S_ERR_LINE_START] = line_start
    st[S_ERR_AUX] = aux
    st[S_STATUS] = ST_ERROR
    return ST_ERROR


@njit(cache=True, nogil=True)
def svm_chunk(buf, end, st, indptr, indices, data, y, qid, slow, mode, vmode, max_rows, max_features, max_nnz):
    """Parse the svmlight lines of buf[st[S_POS]:end]; returns ST_DONE, ST_FULL, ST_ERROR, ST_WIDEN or ST_ZERO_BASED.

    Row and entry counters in ``st`` index the output arrays (the caller empties them between calls
    and keeps the totals); ``max_rows`` and ``max_nnz`` are what is left of the limits.
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
        # ---- label
        tok = p
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
        label = 0.0
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


@njit(cache=True)
def parse_numbers(buf, starts, ends, out, status):
    """Test helper: parse each token buf[starts[i]:ends[i]] (must be taken whole) into out/status."""
    for i in range(starts.shape[0]):
        q, s, v, _, _ = _parse_number(buf, starts[i], ends[i])
        if s != N_BAD and q != ends[i]:
            s = N_BAD
        out[i] = v
        status[i] = s


@njit(cache=True)
def f32_values(buf, starts, ends, vmode, out, check):
    """Test helper: the float32 each token would be stored as under ``vmode`` and the V_* outcome
    (tokens the kernel sends to the slow path report V_SLOW; unparsable ones -1)."""
    for i in range(starts.shape[0]):
        q, s, v, nd, k = _parse_number(buf, starts[i], ends[i])
        if s == N_OK and q == ends[i]:
            f, c = _f32_value(v, nd, k, vmode)
            out[i] = f
            check[i] = c
        elif s == N_SLOW and q == ends[i]:
            out[i] = 0.0
            check[i] = V_SLOW
        else:
            out[i] = 0.0
            check[i] = -1

"""The numba kernels that read one decimal number, behind ``service.ingest.parse_kernels`` (and the constants
that say what they found and how a value is stored).

Only the ingest processes import this module (it compiles numba kernels); the API process never does.

Numbers. ``_parse_number`` accepts ``[+-]? (digits [. digits?] | . digits) ([eE] [+-]? digits)?``
and the words nan/inf/infinity (reported as non-finite). For an accepted token it either
computes the double exactly as Python's ``float`` would (Clinger's fast path: significand
D <= 2**53 with the trailing zeros stripped and a power of ten 10**k with |k| <= 22, one
correctly rounded IEEE multiplication or division; also m * 10**j * 1e22 when m * 10**j is
still an exact integer <= 2**53), or reports the token as "slow" (more than 18 significant digits,
large exponents, subnormals...): the chunk kernels record slow tokens for Python's ``float`` (see
``parse_kernels``).

Stored values (``vmode``). ``VAL_F64``: ``data`` is float64 and holds float(token). ``VAL_F32``
(asked for): ``data`` is float32 and holds the float32 nearest to the decimal text (rounded once,
from the text: a double that lies exactly halfway between two float32 is sent to the slow path,
where Python rounds the exact decimal). ``VAL_AUTO``: float32 as long as every value is *recoverable*
from its float32: the text has at most 7 significant digits and rounding the float32 to as many
significant digits as the text has gives back the text's value (checked with a safety margin, see ``_f32_value``);
the first value that is not makes the chunk kernel stop with ``ST_WIDEN`` and the caller parses again
into float64. Labels are always float64.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from numba import njit

from core.compile_cache import install

install("service.ingest", Path(__file__).resolve().parent)  # Hinge's cache locator, before the first kernel

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

_TWO53 = 9007199254740992
_F32_TINY = float(np.finfo(np.float32).tiny)  # the smallest normal float32: subnormals go to float64
_POW10_F = np.array([10.0**k for k in range(23)], dtype=np.float64)  # all exact doubles
_POW10_I = np.array([10**k for k in range(19)], dtype=np.int64)
_POW10_MIN_E = -60  # _POW10_ANY[e - _POW10_MIN_E] = 10**e (to within 1e-16) for e in [-60, 40]
_POW10_MAX_E = 40
_POW10_ANY = np.array([10.0**e for e in range(_POW10_MIN_E, _POW10_MAX_E + 1)], dtype=np.float64)


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
    text's nd-th (last) significant digit in f's decade (a value 10**E whose float32 falls below it is
    judged on the finer grid of the decade below). A text of 6 digits or fewer always passes away from
    float32's edges (FLT_DIG = 6: 0.000977133, which a TF-IDF vectorizer's ``%g`` writes, does; judged at
    7 digits it would not, float32's spacing there being 1.2e-10). The test runs on doubles: |f - val| is exact (Sterbenz),
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
        if E < _POW10_MIN_E + 7 or E > _POW10_MAX_E or abs(fd) < _F32_TINY:
            return f, V_WIDEN  # beyond float32's normal range
        half = 5.0 * _POW10_ANY[E - nd - _POW10_MIN_E]  # half a unit of the text's last significant digit
        if abs(fd) < _POW10_ANY[E - _POW10_MIN_E]:
            half *= 0.1
        if not abs(fd - val) < half * (1.0 - AUTO_MARGIN):
            return f, V_WIDEN
    return f, V_OK


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

"""float32 values decided in Python: the parser kernel's slow path (``service.ingest.number_kernels``) for the
decimals it cannot round exactly itself."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from service.ingest.number_kernels import AUTO_MAX_DIGITS

_F32_MAX = float(np.finfo(np.float32).max)
_F32_TINY = float(np.finfo(np.float32).tiny)  # the smallest normal float32


def nearest_float32(text: bytes | str) -> float:
    """The float32 nearest to the decimal ``text`` (ties to even), as a Python float; +-inf beyond range.

    Rounds the exact decimal once (``fractions.Fraction``), never the double first.
    """
    exact = Fraction(text.decode() if isinstance(text, bytes) else text)
    with np.errstate(over="ignore"):
        first = float(np.float32(float(exact)))  # within one float32 step of the answer
        if math.isinf(first):
            # beyond the largest float32 plus half its step (2**104): infinity; else the largest float32
            limit = Fraction(_F32_MAX) + Fraction(2) ** 103
            return math.copysign(math.inf if abs(exact) >= limit else _F32_MAX, float(exact))
        candidates = {first}
        for direction in (math.inf, -math.inf):
            neighbour = float(np.nextafter(np.float32(first), np.float32(direction)))
            if math.isfinite(neighbour):
                candidates.add(neighbour)
    return min(candidates, key=lambda c: (abs(Fraction(c) - exact), _odd_mantissa(c)))


def _odd_mantissa(value: float) -> int:
    return int(np.array(value, dtype=np.float32).view(np.uint32)) & 1


def recoverable_float32(text: bytes | str, single: float) -> bool:
    """True when the float32 ``single`` gives back the decimal ``text`` exactly: the text has at most
    7 significant digits and ``single`` rounded to as many significant digits as the text has is the text's
    value."""
    raw = text.decode() if isinstance(text, bytes) else text
    exact = Fraction(raw)
    if exact == 0:
        return single == 0.0
    if not math.isfinite(single) or abs(single) < _F32_TINY:  # beyond float32's range, or subnormal
        return False
    mantissa = raw.lower().split("e")[0].lstrip("+-").replace(".", "").lstrip("0").rstrip("0")
    if len(mantissa) > AUTO_MAX_DIGITS:
        return False
    return Fraction(format(single, f".{len(mantissa)}g")) == exact

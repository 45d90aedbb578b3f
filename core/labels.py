"""How label values are written: as text keys (data-set label counts) and as JSON numbers."""

from __future__ import annotations

import math


def label_value(value: float) -> int | float:
    """A label as a JSON number: an int when the value is integral (``-1``, ``3``), else the float."""
    value = float(value)
    if math.isfinite(value) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def label_key(value: float) -> str:
    """A label as text, the key users write in ``class_weight`` and read in ``labels`` counts."""
    return str(label_value(value))

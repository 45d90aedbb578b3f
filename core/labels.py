"""How label values are written (as text keys of data-set label counts, and as JSON numbers), and how an upload's
labels are counted."""

from __future__ import annotations

import math

import numpy as np


def label_value(value: float) -> int | float:
    """A label as a JSON number: an int when the value is integral (``-1``, ``3``), else the float."""
    value = float(value)
    if math.isfinite(value) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


def label_key(value: float) -> str:
    """A label as text, the key users write in ``class_weight`` and read in ``labels`` counts."""
    return str(label_value(value))


MAX_COUNTED_LABELS = 1000
"""A data set lists its rows per label up to this many distinct label values; past it (real-valued targets) its
``labels`` are empty and ``targets`` says what the values are."""


MAX_REAL_CLASSES = 20
"""Labels that are not all integers are classes written as numbers (``-0.5``, ``0.5``) while they take at most this
many distinct values; more are real-valued targets, which a classification refuses (a regression fits them)."""


class LabelTally:
    """The label column of an upload as it is parsed, chunk by chunk: rows per distinct value while there are at
    most ``MAX_COUNTED_LABELS`` of them, and the values' range, mean and spread (Chan et al.'s pairwise update of
    the mean and the sum of squared deviations, so that no chunk's sum of squares loses the spread)."""

    def __init__(self) -> None:
        self.counts: dict[float, int] | None = {}  # None: past MAX_COUNTED_LABELS distinct values
        self.rows = 0
        self.low = math.inf
        self.high = -math.inf
        self.mean = 0.0
        self.squares = 0.0  # sum of squared deviations from the mean
        self.integral = True

    def add(self, y) -> None:
        """Count a chunk's labels (a float64 array)."""
        n = int(y.size)
        if n == 0:
            return
        values, counts = np.unique(y, return_counts=True)
        if self.counts is not None:
            for value, count in zip(values.tolist(), counts.tolist()):
                self.counts[value] = self.counts.get(value, 0) + count
            if len(self.counts) > MAX_COUNTED_LABELS:
                self.counts = None
        self.low = min(self.low, float(values[0]))
        self.high = max(self.high, float(values[-1]))
        self.integral = self.integral and bool(np.all(values == np.round(values)))
        with np.errstate(over="ignore", invalid="ignore"):  # labels near the largest double: their spread overflows
            mean = float(np.mean(y))
            squares = float(np.sum((y - mean) ** 2))
        total = self.rows + n
        with np.errstate(over="ignore", invalid="ignore"):
            delta = mean - self.mean
            self.squares += squares + delta * delta * self.rows * n / total
            self.mean += delta * n / total
        self.rows = total

    def label_counts(self) -> dict[str, int]:
        """Rows per label, keyed by the label as text, ascending; empty past ``MAX_COUNTED_LABELS`` distinct values."""
        return {label_key(v): int(c) for v, c in sorted((self.counts or {}).items())}

    def targets(self) -> dict:
        """The labels as numbers (``TargetSummary``): range, mean, standard deviation (None when they overflow a
        double), whether all are integers, and how many distinct values (None: more than ``MAX_COUNTED_LABELS``)."""
        std = math.sqrt(self.squares / self.rows) if self.rows else 0.0
        return {
            "min": label_value(self.low),
            "max": label_value(self.high),
            "mean": self.mean if math.isfinite(self.mean) else None,  # None: past the largest double
            "std": std if math.isfinite(std) else None,
            "integral": self.integral,
            "n_distinct": None if self.counts is None else len(self.counts),
        }

"""How a job's labels become binary problems: one for two labels, one per class (one-vs-rest) otherwise.

Two labels make one problem where the larger label is +1; more labels make one problem per class
(class k is +1, the rest -1). ``class_weight`` factors multiply C: in a two-label problem each
label's factor applies to its rows; in one-vs-rest the class's factor applies to its rows (+1) and
the rest keep factor 1 (as LIBLINEAR does).
"""

from __future__ import annotations

import numpy as np

from service.labels import label_key


def binary_problems(y: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """The sorted labels and the {-1, +1} label vector of each binary problem."""
    labels = np.unique(y)
    if labels.size == 2:
        return labels, [np.where(y == labels[1], 1.0, -1.0)]
    return labels, [np.where(y == label, 1.0, -1.0) for label in labels]


def n_binary_problems(y: np.ndarray) -> int:
    """How many binary problems the labels make (1 for two labels, one per class otherwise)."""
    count = np.unique(y).size
    return 1 if count <= 2 else count


def class_weight_pairs(labels: np.ndarray, class_weight: dict | None) -> list[tuple[float, float]]:
    """(negative, positive) factor for each binary problem."""
    weights = class_weight or {}
    factor = [float(weights.get(label_key(v), 1.0)) for v in labels]
    if labels.size == 2:
        return [(factor[0], factor[1])]
    return [(1.0, f) for f in factor]

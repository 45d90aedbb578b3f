"""How a job's labels become binary problems: one for two labels, one per class (one-vs-rest) otherwise,
or one per pair of classes (one-vs-one, smo's ``multiclass: ovo``).

Two labels make one problem where the larger label is +1; more labels make one problem per class
(class k is +1, the rest -1), or per pair (i, j) over the rows of those two classes (i is +1).
``class_weight`` factors multiply C: in a two-label or one-vs-one problem each label's factor applies
to its rows; in one-vs-rest the class's factor applies to its rows (+1) and the rest keep factor 1
(as LIBLINEAR does).
"""

from __future__ import annotations

import numpy as np

from core.labels import label_key
from core.schemas.enums import Multiclass


def binary_problems(y: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
    """The sorted labels and the {-1, +1} label vector of each binary problem."""
    labels = np.unique(y)
    if labels.size == 2:
        return labels, [np.where(y == labels[1], 1.0, -1.0)]
    return labels, [np.where(y == label, 1.0, -1.0) for label in labels]


def one_vs_one_problems(y: np.ndarray) -> tuple[np.ndarray, list[np.ndarray], list[np.ndarray]]:
    """The sorted labels, and per pair of labels (i, j), i < j, in the order (0,1), (0,2), ..., (1,2), ...:
    the rows of those two labels and their {-1, +1} targets (+1 for label i, as LIBSVM's pairs)."""
    labels = np.unique(y)
    members, targets = [], []
    for i in range(labels.size):
        for j in range(i + 1, labels.size):
            rows = np.flatnonzero((y == labels[i]) | (y == labels[j]))
            members.append(rows)
            targets.append(np.where(y[rows] == labels[i], 1.0, -1.0))
    return labels, members, targets


def uses_one_vs_one(params, y: np.ndarray) -> bool:
    """Whether the job trains one problem per pair of labels (``multiclass: ovo`` and more than two labels)."""
    return getattr(params, "multiclass", Multiclass.ovr) == Multiclass.ovo and np.unique(y).size > 2


def n_binary_problems(y: np.ndarray, one_vs_one: bool = False) -> int:
    """How many binary problems the labels make (1 for two labels; else one per class, or per pair of classes)."""
    count = np.unique(y).size
    if count <= 2:
        return 1
    return count * (count - 1) // 2 if one_vs_one else count


def class_weight_pairs(labels: np.ndarray, class_weight: dict | None) -> list[tuple[float, float]]:
    """(negative, positive) factor for each binary problem."""
    weights = class_weight or {}
    factor = [float(weights.get(label_key(v), 1.0)) for v in labels]
    if labels.size == 2:
        return [(factor[0], factor[1])]
    return [(1.0, f) for f in factor]


def one_vs_one_weight_pairs(labels: np.ndarray, class_weight: dict | None) -> list[tuple[float, float]]:
    """(negative, positive) factor for each pair (i, j) of ``one_vs_one_problems``: label j's, label i's."""
    weights = class_weight or {}
    factor = [float(weights.get(label_key(v), 1.0)) for v in labels]
    return [(factor[j], factor[i]) for i in range(labels.size) for j in range(i + 1, labels.size)]


def job_problems(
    params, y: np.ndarray
) -> tuple[np.ndarray, list[np.ndarray] | None, list[np.ndarray], list[tuple[float, float]]]:
    """The sorted labels, the rows of each problem (None: every row), the problems' targets and their
    (negative, positive) class-weight factors, for the job's ``multiclass`` scheme."""
    class_weight = getattr(params, "class_weight", None)
    if uses_one_vs_one(params, y):
        labels, members, targets = one_vs_one_problems(y)
        return labels, members, targets, one_vs_one_weight_pairs(labels, class_weight)
    labels, targets = binary_problems(y)
    return labels, None, targets, class_weight_pairs(labels, class_weight)

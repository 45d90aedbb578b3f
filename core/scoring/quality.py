"""When a result that ended as a success deserves a second look: the warnings a job and its model carry.

A job that returns a model has succeeded, but the model may still be one a user should not trust as it is
(LIBLINEAR prints "WARNING: reaching max number of iterations"; scikit-learn raises ``ConvergenceWarning``).
Hinge says so in the job and the model, as ``warnings``: ``[{"code", "message"}]`` (``ResultWarning``):

- ``max_iter``: a binary problem stopped at its iteration limit before its stopping rule held;
- ``not_converged``: stopped by the deadline, a cancel or a worker's stop with a certified relative gap above
  ``SETTLED_GAP_REL`` (its objective may be that much above the optimum), or with no certificate at all;
- ``no_better_than_majority``: its training accuracy is no better than always answering the most frequent
  label of the training data (a classification model that learned nothing usable);
- ``fewer_nodes``: a training split over nodes (``distributed``) used fewer than asked (fewer shards than nodes);
- ``nodes_lost``: a node of such a training was lost and the training went on over the nodes left (``regroup``);
- ``search_incomplete`` and ``parameter_out_of_range`` come from the search (``worker.training.search``) and from the
  numerical range of C (``c_limit``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import scipy.sparse as sp

from core.schemas.enums import Task, WarningCode
from core.storage.documents import ModelDescription

SETTLED_GAP_REL = 0.01
"""A fit stopped before its own rule is still trusted when its certified relative gap is at most this (1%)."""
C_LIMIT_NUMERATOR = 1e14
"""``c_limit``'s constant: about 1/(2 epsilon) x 1e-2 (see there)."""


def warning(code: WarningCode, message: str) -> dict[str, str]:
    """One warning as stored with a job and a model."""
    return {"code": code.value, "message": message}


def settled(stop_reason: str, gap_rel: float | None) -> bool:
    """Whether a fit reached a quality its numbers can be trusted at: its stopping rule held, or its certified
    relative gap is at most ``SETTLED_GAP_REL``."""
    if stop_reason == "converged":
        return True
    return gap_rel is not None and math.isfinite(gap_rel) and gap_rel <= SETTLED_GAP_REL


def model_warnings(
    model: ModelDescription, label_counts: Mapping[str, int] | None, params: Mapping[str, Any] | None = None
) -> list[dict[str, str]]:
    """The warnings a trained model deserves, from its training report (stop_reason, gap_rel, stopping_rule,
    train_accuracy, task, data_access), the training data's rows per label and the job's ``params`` (the model's
    own when not given)."""
    found: list[dict[str, str]] = []
    stop_reason = model.stop_reason
    gap_rel = model.gap_rel
    gap_text = f"certified relative gap {gap_rel:.3g}" if isinstance(gap_rel, (int, float)) else "no certified gap"
    if stop_reason == "max_iter":
        rule = model.stopping
        limit = rule.values.get("max_iter") if rule is not None and rule.values else None
        settings = params if params is not None else model.params or {}
        has_c = model.task != Task.one_class and settings.get("svm_type") != "nu_svc"  # nu takes C's place there
        advice = "raise max_iter, or check that C is not far larger than the data needs" if has_c else "raise max_iter"
        # a certified gap within SETTLED_GAP_REL bounds how far it is: say so rather than "may be far"
        how_far = (
            f"the gap puts it within {gap_rel:.2%} of the optimum, but its own rule (the optimality conditions) did "
            f"not hold: {advice} for the rule"
            if settled("max_iter", gap_rel)
            else f"the model may be far from the optimum: {advice}"
        )
        found.append(
            warning(
                WarningCode.max_iter,
                f"training stopped at its iteration limit (max_iter {limit}) before its stopping rule held "
                f"({gap_text}); {how_far}",
            )
        )
    elif stop_reason in ("deadline", "canceled", "interrupted", "node_lost") and not settled(stop_reason, gap_rel):
        why = {
            "deadline": "its deadline (max_seconds)",
            "canceled": "a cancel",
            "interrupted": "a worker's stop",
            "node_lost": "the loss of a node it was split over",
        }
        found.append(
            warning(
                WarningCode.not_converged,
                f"training was stopped by {why[stop_reason]} before its stopping rule held, with {gap_text} "
                f"(trusted up to {SETTLED_GAP_REL:g}): the model may be far from the optimum; give it more time",
            )
        )
    access = model.data_access or {}
    asked = ((params if params is not None else model.params or {}).get("distributed") or {}).get("nodes")
    lost = int(access.get("nodes_lost") or 0)
    if lost:
        found.append(
            warning(
                WarningCode.nodes_lost,
                f"{lost} node(s) of the split training were lost (dead, or silent past HINGE_NODE_TIMEOUT): the rows "
                f"were shared again over the {access.get('nodes')} left and the training went on, so the model is the "
                "one its stopping rule and gap say; the cluster's scheduler log says which node and why",
            )
        )
    elif access.get("form") == "split" and isinstance(asked, int) and int(access.get("nodes") or asked) < asked:
        used = int(access["nodes"])
        found.append(
            warning(
                WarningCode.fewer_nodes,
                f"only {used} of the {asked} nodes asked held rows: the data set has {used} shard(s) and a node holds "
                "whole shards, so the work was not spread (the model is the same); to split a data set this small, "
                "upload it with a smaller HINGE_SHARD_BYTES (64 MiB by default)",
            )
        )
    accuracy = model.train_accuracy
    task = model.task or Task.classification
    if task == Task.classification and isinstance(accuracy, (int, float)) and label_counts:
        total = sum(label_counts.values())
        majority_label, majority_rows = max(label_counts.items(), key=lambda item: item[1])
        majority = majority_rows / total if total else 0.0
        if len(label_counts) > 1 and accuracy <= majority + 1e-12:
            found.append(
                warning(
                    WarningCode.no_better_than_majority,
                    f"its training accuracy {accuracy:.4g} is no better than always answering the most frequent "
                    f"label {majority_label} ({majority:.4g} of the rows): the model learned nothing usable from "
                    "these settings",
                )
            )
    return found


def c_limit(n_rows: int, max_row_norm_sq: float) -> float:
    """The largest C the data can use numerically: 1e14 / (n_rows x max_i |x_i|^2) (kernels: K(x_i, x_i)).

    A dual variable is at most C, so |w| can reach C n R (R^2: the largest squared row norm), and a margin
    y_i w.x_i is computed to about epsilon |w| |x_i| <= epsilon C n R^2 (epsilon = 2.2e-16). Beyond this limit
    that rounding error exceeds 0.01, a tenth of the smallest tolerance on the projected gradient people use
    (LIBLINEAR's default is 0.1): the solver's steps and stopping test become noise, and it runs to max_iter
    with a relative gap near 1 (C = 1e300 on a9a: minutes, gap_rel 1.0). On a9a (32,561 rows, |x|^2 = 14) the
    limit is about 2e8; LIBLINEAR users rarely go past 1e4.
    """
    return C_LIMIT_NUMERATOR / (max(1, n_rows) * max(max_row_norm_sq, 1e-300))


def kernel_diagonal_max(kernel: Mapping[str, Any] | None, max_row_norm_sq: float) -> float | None:
    """The largest K(x_i, x_i) over the rows given the largest |x_i|^2 (None: it depends on a gamma not resolved yet).

    linear: |x|^2; rbf: 1; sigmoid: at most 1; poly: (gamma |x|^2 + coef0)^degree."""
    if kernel is None or kernel.get("type", "linear") == "linear":
        return max_row_norm_sq
    kind = kernel["type"]
    if kind in ("rbf", "sigmoid"):
        return 1.0
    gamma = kernel.get("gamma")
    if not isinstance(gamma, (int, float)):
        return None
    value = abs(float(gamma) * max_row_norm_sq + float(kernel.get("coef0", 0.0))) ** int(kernel.get("degree", 3))
    return float(value)


def c_out_of_range(
    params: Mapping[str, Any], n_rows: int, max_row_norm_sq: float
) -> tuple[list[str | int], str] | None:
    """Where a C of a classification request (its ``C``, or a value of its ``search.C`` grid, times its largest
    class weight) is beyond ``c_limit`` of the data, and the message that explains the range; None when every
    C is within it. ``params``: the solver parameters as JSON (defaults filled in)."""
    if (params.get("objective") or Task.classification) != Task.classification:
        return None  # pairwise objectives sum their loss over pairs, not rows: not judged here
    diagonal = kernel_diagonal_max(params.get("kernel"), max_row_norm_sq)
    if diagonal is None or diagonal <= 0:
        return None
    limit = c_limit(n_rows, diagonal)
    weights = [float(w) for w in (params.get("class_weight") or {}).values()]
    weight = max([1.0, *weights])
    candidates: list[tuple[list[str | int], float]] = []
    search = params.get("search") or {}
    if search.get("C"):
        candidates += [(["params", "search", "C", i], float(C)) for i, C in enumerate(search["C"])]
    else:
        candidates.append((["params", "C"], float(params.get("C", 1.0))))
    for path, C in candidates:
        if C * weight > limit:
            scale = "K(x_i, x_i)" if params.get("kernel") else "|x_i|^2"
            weighted = f" (times class weight {weight:g})" if weight != 1.0 else ""
            return path, (
                f"{'.'.join(str(p) for p in path)}: C = {C:g}{weighted} is beyond what this data set can use "
                f"numerically: with {n_rows} rows and max {scale} = {diagonal:.4g}, C above {limit:.3g} makes the "
                "solver's steps rounding noise (it would run to max_iter and return a model with a relative gap near "
                f"1). Use C <= {limit:.3g}; scaling the features down raises the limit"
            )
    return None


RBF_UNDERFLOW = 700.0
"""gamma |x_i - x_j|^2 above this gives exp(-...) < 1e-304: a kernel value of 0 for that pair."""
RBF_FLAT = 1e-9
"""gamma |x_i - x_j|^2 below this gives a kernel value of 1 to 9 digits: the pair looks the same."""


def gamma_warnings(gammas: list[float], squared_distances) -> list[dict[str, str]]:
    """``parameter_out_of_range`` warnings for rbf gammas the data cannot use: at gamma times 99% of the sampled
    squared distances between distinct rows above ``RBF_UNDERFLOW`` the kernel matrix is the identity (every
    row its own island: the model memorizes and answers the bias elsewhere); below ``RBF_FLAT`` at 99% of them,
    every kernel value is 1 (the model is about a constant). ``squared_distances``: a sample of
    |x_i - x_j|^2 over pairs of distinct rows (zeros, duplicate rows, left out)."""
    d2 = np.asarray(squared_distances, dtype=np.float64)
    d2 = d2[d2 > 0]
    if d2.size == 0:
        return []
    low, median, high = (float(q) for q in np.quantile(d2, [0.01, 0.5, 0.99]))
    found = []
    for gamma in gammas:
        if gamma * low > RBF_UNDERFLOW:
            what = "0 between 99% of the pairs of rows sampled: the kernel matrix is the identity, the model memorizes"
        elif gamma * high < RBF_FLAT:
            what = "1 to 9 digits for 99% of the pairs of rows sampled: every row looks the same to the model"
        else:
            continue
        found.append(
            warning(
                WarningCode.parameter_out_of_range,
                f"kernel gamma {gamma:g} makes the rbf kernel {what}. The data's squared distances between rows "
                f"run from {low:.3g} to {high:.3g} (median {median:.3g}): a gamma near 1 / {median:.3g} = "
                f"{1.0 / median:.3g} (or `scale`) lets the kernel tell rows apart",
            )
        )
    return found


GAMMA_SAMPLE_PAIRS = 2000
"""Pairs of rows whose squared distances judge an rbf gamma (``gamma_warnings``)."""


def rbf_gammas(params: Mapping[str, Any]) -> list[float]:
    """The numeric rbf gammas of a job's parameters (JSON form): its kernel's, or its search's grid (``scale``
    follows the data by itself and is not judged)."""
    kernel = params.get("kernel") or {}
    if kernel.get("type") != "rbf":
        return []
    grid = (params.get("search") or {}).get("gamma")
    return [float(g) for g in (grid or [kernel.get("gamma")]) if isinstance(g, (int, float))]


def sampled_squared_distances(arrays: Mapping[str, Any], n_features: int, seed: int = 0) -> np.ndarray:
    """|x_i - x_j|^2 over ``GAMMA_SAMPLE_PAIRS`` random pairs of distinct rows of a data set's CSR arrays."""
    indptr = np.asarray(arrays["indptr"])
    n_rows = indptr.size - 1
    if n_rows < 2:
        return np.empty(0)
    pairs = np.random.default_rng(seed).integers(0, n_rows, size=(GAMMA_SAMPLE_PAIRS, 2))
    pairs = pairs[pairs[:, 0] != pairs[:, 1]]
    matrix = sp.csr_matrix((arrays["data"], arrays["indices"], indptr), shape=(n_rows, n_features))
    difference = matrix[pairs[:, 0]] - matrix[pairs[:, 1]]
    return np.asarray(difference.multiply(difference).sum(axis=1)).ravel()

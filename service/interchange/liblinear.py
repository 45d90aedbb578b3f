"""LIBLINEAR model files: write a linear model so that LIBLINEAR's ``load_model`` and ``predict`` use it,
and read one that LIBLINEAR wrote.

The file (as LIBLINEAR's ``save_model`` lays it out): header lines ``solver_type NAME``, ``nr_class k``,
``label l_1 ... l_k``, ``nr_feature n``, ``bias B`` (-1: none), then ``w`` and one line per feature
(plus one for the bias feature when B >= 0) holding that feature's weight in each of the nr_w
decision functions. nr_w is 1 for two classes (the decision value is positive for the first label
listed) and k otherwise (one column per label in the order listed; LIBLINEAR predicts the argmax).
Feature j of a line is LIBLINEAR's index j (from 1).

Hinge's side: two labels score positive for the larger one, so the larger label is written first;
more labels are written ascending, one column per one-vs-rest problem. A model trained with a bias
value B (LIBLINEAR's -B) is written with ``bias B`` and the bias weight w_B = b / B, exactly as
LIBLINEAR writes its own models; the solver type is LIBLINEAR's name of the same problem (dcd's hinge
loss: L2R_L1LOSS_SVC_DUAL; squared_hinge: L2R_L2LOSS_SVC_DUAL; logistic: L2R_LR_DUAL; cpa and ocas minimize the
hinge loss).
Weights are written with 17 significant digits at most (the shortest text that reads back as the
same double), so LIBLINEAR computes the same decision values up to summation order.

Regression models (LIBLINEAR's SVR, dcd's epsilon-insensitive losses) are written and read as LIBLINEAR lays them
out: ``nr_class 2`` and no ``label`` line, one weight column whose decision value is the prediction.

One-class models (dcd's ``loss: one_class``, LIBLINEAR's -s 21) are written and read as LIBLINEAR lays them out:
``solver_type ONECLASS_SVM``, ``nr_class 2``, no ``label`` line, ``bias -1``, ``rho R`` and one weight column; the
decision value is w'x - rho, an inlier (+1) where it is positive, else an outlier (-1).

Reading: every classification, regression and one-class solver type is accepted; a two-class file whose first label is the smaller one is stored with
the weights negated (Hinge's scores are positive for the larger label; labels are unchanged).
Logistic-regression models keep their probabilities: P = 1 / (1 + exp(-decision value)), LIBLINEAR's
``predict_probability``, stored as a sigmoid with A = -1, B = 0.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO

import numpy as np

from core.schemas.enums import ModelKind, Task
from core.scoring.probability import logistic_calibration
from core.storage.documents import ModelDescription
from service.interchange.common import (
    ROWS_PER_PIECE,
    ExportRefused,
    Header,
    ModelFileError,
    format_matrix,
    integral_labels,
    number,
    numbered_lines,
    parse_float,
    parse_int,
)

CLASSIFIER_TYPES = (
    "L2R_LR",
    "L2R_L2LOSS_SVC_DUAL",
    "L2R_L2LOSS_SVC",
    "L2R_L1LOSS_SVC_DUAL",
    "MCSVM_CS",
    "L1R_L2LOSS_SVC",
    "L1R_LR",
    "L2R_LR_DUAL",
)
LOGISTIC_TYPES = ("L2R_LR", "L1R_LR", "L2R_LR_DUAL")
REGRESSION_TYPES = ("L2R_L2LOSS_SVR", "L2R_L2LOSS_SVR_DUAL", "L2R_L1LOSS_SVR_DUAL")
ONE_CLASS_TYPES = ("ONECLASS_SVM",)
HEADER_FIELDS = ("solver_type", "nr_class", "label", "nr_feature", "bias", "rho")


def solver_type_of(model: ModelDescription) -> str:
    """LIBLINEAR's name of the problem the model solved."""
    if model.liblinear_solver_type in CLASSIFIER_TYPES + REGRESSION_TYPES:
        return model.liblinear_solver_type
    params = model.params or {}  # the job's parameters (imports: what the file stated)
    if params.get("multiclass") == "crammer_singer":  # ocas's Crammer-Singer problem: LIBLINEAR's -s 4
        return "MCSVM_CS"
    if params.get("loss") == "epsilon_insensitive":  # dcd's SVR losses: LIBLINEAR's -s 13 and -s 12
        return "L2R_L1LOSS_SVR_DUAL"
    if params.get("loss") == "squared_epsilon_insensitive":
        return "L2R_L2LOSS_SVR_DUAL"
    if params.get("penalty") == "l1":  # dcd's L1-regularized squared hinge and logistic loss: LIBLINEAR's -s 5, -s 6
        return "L1R_LR" if params.get("loss") == "logistic" else "L1R_L2LOSS_SVC"
    if params.get("loss") == "squared_hinge":  # a solver with LIBLINEAR's -s 1 loss (dcd's squared_hinge)
        return "L2R_L2LOSS_SVC_DUAL"
    if params.get("loss") == "logistic":  # dcd's logistic regression: LIBLINEAR's -s 7
        return "L2R_LR_DUAL"
    return "L2R_L1LOSS_SVC_DUAL"


def write_liblinear(model: ModelDescription, arrays: dict) -> Iterator[str]:
    """The model as a LIBLINEAR model file, in pieces (ExportRefused when it is not a linear classifier)."""
    if model.kind != ModelKind.linear:
        raise ExportRefused(
            f"LIBLINEAR files hold linear classifiers; this is a {model.kind} model"
            + (
                " (its pairwise scoring function exports as json or onnx)"
                if model.kind == ModelKind.ranking
                else " (export it as libsvm, json or onnx)"
            )
        )
    regression = model.task == Task.regression
    if model.task == Task.one_class:
        yield from _write_one_class(model, arrays)
        return
    if model.task not in (None, Task.classification, Task.regression):
        raise ExportRefused(
            f"LIBLINEAR files hold classifiers, regressions and one-class models; this is a {model.task} model"
        )
    labels = [] if regression else integral_labels(model.labels, "LIBLINEAR")
    weights = np.asarray(arrays["weights"], dtype=np.float64)
    offsets = np.asarray(arrays["offsets"], dtype=np.float64)
    n_models, n_features = weights.shape
    solver_type = solver_type_of(model)
    file_labels = [labels[1], labels[0]] if n_models == 1 and not regression else labels
    if n_models == 1 and solver_type == "MCSVM_CS":  # LIBLINEAR keeps a vector per class: halves of one score
        weights, offsets, file_labels = (
            np.vstack([-weights[0], weights[0]]) / 2,
            np.array([-1, 1]) * offsets / 2,
            labels,
        )
    bias_value = (model.params or {}).get("bias")  # the bias feature's value, as the job or the file gave it
    if isinstance(bias_value, (int, float)) and not isinstance(bias_value, bool) and bias_value > 0:
        bias_weights = offsets / float(bias_value)
    elif np.all(offsets == 0.0):
        bias_value, bias_weights = -1.0, None
    else:
        bias_value, bias_weights = 1.0, offsets  # an offset without a recorded bias feature: B = 1, w_B = b
    yield (
        f"solver_type {solver_type}\n"
        f"nr_class {2 if regression else len(labels)}\n"  # a regression: 2 and no label line, as LIBLINEAR writes it
        + ("" if regression else f"label {' '.join(str(v) for v in file_labels)}\n")
        + f"nr_feature {n_features}\n"
        f"bias {number(bias_value)}\n"
        "w\n"
    )
    for start in range(0, n_features, ROWS_PER_PIECE):
        yield format_matrix(weights[:, start : start + ROWS_PER_PIECE].T)
    if bias_weights is not None:
        yield format_matrix(bias_weights.reshape(1, -1))


def _write_one_class(model: ModelDescription, arrays: dict) -> Iterator[str]:
    """A linear one-class model as LIBLINEAR's ONECLASS_SVM file: no labels, no bias feature, rho = -offset."""
    weights = np.asarray(arrays["weights"], dtype=np.float64)
    offset = float(np.asarray(arrays["offsets"], dtype=np.float64)[0])
    n_features = weights.shape[1]
    yield f"solver_type ONECLASS_SVM\nnr_class 2\nnr_feature {n_features}\nbias -1\nrho {number(-offset)}\nw\n"
    for start in range(0, n_features, ROWS_PER_PIECE):
        yield format_matrix(weights[:, start : start + ROWS_PER_PIECE].T)


def _read_one_class(header: Header, lines: Iterator[tuple[int, str]]) -> tuple[ModelDescription, dict]:
    """A LIBLINEAR one-class (ONECLASS_SVM) file: one weight column and rho; the model predicts 1 where w'x > rho."""
    where, (token,) = header.field("nr_feature")
    n_features = parse_int(token, where, "nr_feature")
    if n_features < 1:
        raise ModelFileError(where, f"nr_feature must be at least 1, got {n_features}")
    where, (token,) = header.field("bias")
    bias = parse_float(token, where, "bias")
    where, (token,) = header.field("rho")
    rho = parse_float(token, where, "rho")
    table = _read_weight_rows(lines, n_features + (1 if bias >= 0 else 0), 1, header.end)
    model = _linear_model(Task.one_class, [-1.0, 1.0], n_features, bias, "ONECLASS_SVM")
    offset = -rho + (float(table[n_features, 0]) * bias if bias >= 0 else 0.0)
    return model, {"weights": np.ascontiguousarray(table[:n_features].T), "offsets": np.array([offset])}


def read_liblinear(text: IO[str]) -> tuple[ModelDescription, dict]:
    """(description, arrays) of a LIBLINEAR model file; ModelFileError names the line of anything wrong."""
    lines = numbered_lines(text)

    header = Header(lines, "w", HEADER_FIELDS, "LIBLINEAR", lambda key, values: None)
    field, last = header.field, header.end
    where, (solver_type,) = field("solver_type")
    if solver_type in ONE_CLASS_TYPES:
        return _read_one_class(header, lines)
    if solver_type not in CLASSIFIER_TYPES + REGRESSION_TYPES:
        raise ModelFileError(
            where,
            f"unknown solver_type {solver_type!r} (LIBLINEAR's classifiers, regressions and one-class SVM: "
            f"{', '.join(CLASSIFIER_TYPES + REGRESSION_TYPES + ONE_CLASS_TYPES)})",
        )
    if solver_type in REGRESSION_TYPES:
        return _read_regression(header, lines, solver_type)
    where, (token,) = field("nr_class")
    nr_class = parse_int(token, where, "nr_class")
    if nr_class < 2:
        raise ModelFileError(where, f"nr_class must be at least 2, got {nr_class}")
    where, tokens = field("label", nr_class)
    file_labels = [parse_int(t, where, "label") for t in tokens]
    if len(set(file_labels)) != nr_class:
        raise ModelFileError(where, f"labels must be distinct, got {file_labels}")
    where, (token,) = field("nr_feature")
    n_features = parse_int(token, where, "nr_feature")
    if n_features < 1:
        raise ModelFileError(where, f"nr_feature must be at least 1, got {n_features}")
    where, (token,) = field("bias")
    bias = parse_float(token, where, "bias")
    nr_w = 1 if nr_class == 2 and solver_type != "MCSVM_CS" else nr_class
    n_rows = n_features + (1 if bias >= 0 else 0)
    table = _read_weight_rows(lines, n_rows, nr_w, last)

    w = table[:n_features].T.copy()  # (nr_w, n_features)
    b = table[n_features] * bias if bias >= 0 else np.zeros(nr_w)
    order = np.argsort(file_labels)
    labels = [float(file_labels[i]) for i in order]
    if nr_w == 1:
        sign = 1.0 if file_labels[0] > file_labels[1] else -1.0  # Hinge: positive scores mean the larger label
        weights, offsets = sign * w, sign * b
    elif nr_class == 2:  # Crammer-Singer with two classes: the argmax of two scores is the sign of their difference
        high, low = order[1], order[0]
        weights, offsets = (w[high] - w[low]).reshape(1, -1), np.array([b[high] - b[low]])
    else:
        weights, offsets = w[order], b[order]
    model = _linear_model(Task.classification, labels, n_features, bias, solver_type)
    if solver_type in LOGISTIC_TYPES:
        model.probability = logistic_calibration(weights.shape[0])
    return model, {"weights": np.ascontiguousarray(weights), "offsets": np.ascontiguousarray(offsets)}


def _linear_model(task: Task, labels: list[float] | None, n_features: int, bias: float, solver_type: str):
    """The description of a model read from a LIBLINEAR file, its fields in the order the stored document lists
    them (``bias`` < 0: none)."""
    model = ModelDescription()
    model.kind = ModelKind.linear.value
    model.task = task.value
    model.labels = labels
    model.n_features = int(n_features)
    model.zero_based = False
    model.params = {"bias": float(bias) if bias >= 0 else None}
    model.liblinear_solver_type = solver_type
    return model


def _read_regression(
    header: Header, lines: Iterator[tuple[int, str]], solver_type: str
) -> tuple[ModelDescription, dict]:
    """A LIBLINEAR regression (SVR) file: one weight column, no labels; the decision value is the prediction."""
    where, (token,) = header.field("nr_feature")
    n_features = parse_int(token, where, "nr_feature")
    if n_features < 1:
        raise ModelFileError(where, f"nr_feature must be at least 1, got {n_features}")
    if "label" in header:
        raise ModelFileError(header.field("label", None)[0], f"a {solver_type} model has no labels")
    where, (token,) = header.field("bias")
    bias = parse_float(token, where, "bias")
    table = _read_weight_rows(lines, n_features + (1 if bias >= 0 else 0), 1, header.end)
    model = _linear_model(Task.regression, None, n_features, bias, solver_type)
    offsets = table[n_features] * bias if bias >= 0 else np.zeros(1)
    return model, {"weights": np.ascontiguousarray(table[:n_features].T), "offsets": np.ascontiguousarray(offsets)}


def _read_weight_rows(lines: Iterator[tuple[int, str]], n_rows: int, nr_w: int, header_end: int) -> np.ndarray:
    """The n_rows lines of nr_w weights after `w`; anything else is a ModelFileError with its line."""
    rows: list[list[str]] = []
    numbers: list[int] = []
    last = header_end
    for last, line in lines:
        values = line.split()
        if not values:
            continue
        if len(rows) == n_rows:
            raise ModelFileError(last, f"more weight lines than the {n_rows} that nr_feature and bias call for")
        if len(values) != nr_w:
            raise ModelFileError(
                last, f"expected {nr_w} weight{'s' if nr_w > 1 else ''} on this line, found {len(values)}"
            )
        rows.append(values)
        numbers.append(last)
    if len(rows) < n_rows:
        raise ModelFileError(
            last + 1, f"the file ends after {len(rows)} weight lines; nr_feature and bias call for {n_rows}"
        )
    try:
        table = np.array(rows, dtype=np.float64)
    except ValueError:
        for where, values in zip(numbers, rows):
            for value in values:
                parse_float(value, where, "weight")
        raise
    bad = ~np.isfinite(table).all(axis=1)
    if bad.any():
        where = numbers[int(np.flatnonzero(bad)[0])]
        raise ModelFileError(where, "a weight is not finite")
    return table.reshape(n_rows, nr_w)

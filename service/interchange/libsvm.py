"""LIBSVM model files: write a model so that LIBSVM's ``svm_load_model`` and ``svm_predict`` reproduce it,
and read one that LIBSVM wrote.

The file (as LIBSVM's ``svm_save_model`` lays it out): header lines ``svm_type``, ``kernel_type`` and
the kernel's ``degree`` / ``gamma`` / ``coef0``, ``nr_class k``, ``total_sv m``, ``rho`` (one per
pair of classes), ``label``, optional ``probA`` / ``probB`` (one per pair), ``nr_sv`` (support
vectors per class), then ``SV`` and one line per support vector: its k - 1 coefficients, then
``index:value`` pairs (indices from 1, ascending). The support vectors are grouped by class, in the
order of ``label``. LIBSVM scores the pair of classes (i, j), i < j, as

    d_ij(x) = sum over class i's vectors s of coef[j-1][s] K(s, x)
            + sum over class j's vectors s of coef[i][s] K(s, x) - rho_ij,

votes for i when d_ij > 0 (else j) and predicts the class with most votes (the first listed on a tie).

Writing Hinge's models:
- Two labels: the larger label is listed first, every expansion row is a support vector with its
  coefficient (rows with a positive coefficient in the first group), rho = -b. Probabilities (a model
  trained with ``probability: true``) become ``probA`` / ``probB``: LIBSVM's binary sigmoid is the same
  P(first label) = 1 / (1 + exp(A d + B)).
- More labels (one-vs-rest decision functions f_k = g_k + b_k): class k's group holds the rows of
  f_k's expansion, with coefficient +c_k[s] for the pairs where k comes first and -c_k[s] where it
  comes second, and rho_ij = b_j - b_i. Then d_ij = f_i - f_j exactly, so class i wins its pair with
  j iff f_i > f_j: the one-vs-rest argmax wins every one of its pairs and LIBSVM's vote predicts the
  same label. LIBSVM's decision values are these differences; the one-vs-rest probabilities have no
  pairwise form and are left out (LIBSVM then predicts without probabilities).
- Linear models are written as linear-kernel models whose support vectors are the weight vectors.
- Feature column j (from 0) is written as index j + 1, LIBSVM's numbering.

Regression and one-class models (smo's ``epsilon_svr`` and ``one_class``; ``epsilon_svr``, ``nu_svr`` and
``one_class`` files) are written and read as LIBSVM lays them out: ``nr_class 2``, no ``label`` nor ``nr_sv`` line,
one coefficient per support vector (beta_i, or alpha_i), rho = -b; the decision value is the prediction (a
one-class model: +1 where it is positive, else -1).

Reading: ``c_svc`` and ``nu_svc`` models (their decision functions have the same form), the regressions and the
one-class SVM. Two classes: one score, positive for the larger label (the
coefficients are negated when the file lists the smaller label first). More: the model keeps
LIBSVM's one-vs-one form (``multiclass: "ovo"``), its vote and its tie order; ``probA``/``probB`` are
kept and give LIBSVM's coupled probabilities. An index 0 in the file makes the model zero-based.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO

import numpy as np
import scipy.sparse as sp

from core.schemas.enums import ModelKind, Multiclass, Task
from core.schemas.model_files import ModelKernel
from core.storage.documents import ModelDescription
from service.interchange.common import (
    ROWS_PER_PIECE,
    ExportRefused,
    Header,
    ModelFileError,
    integral_labels,
    number,
    numbered_lines,
    parse_float,
    parse_int,
)

KERNEL_TYPES = {
    "linear": "linear",
    "poly": "polynomial",
    "rbf": "rbf",
    "sigmoid": "sigmoid",
    "precomputed": "precomputed",
}
SVM_TYPES = ("c_svc", "nu_svc")
REGRESSION_SVM_TYPES = ("epsilon_svr", "nu_svr")
SINGLE_SVM_TYPES = (*REGRESSION_SVM_TYPES, "one_class")
"""Files of one decision function and no labels: the regressions and the one-class SVM."""
HEADER_FIELDS = (
    "svm_type",
    "kernel_type",
    "degree",
    "gamma",
    "coef0",
    "nr_class",
    "total_sv",
    "rho",
    "label",
    "probA",
    "probB",
    "nr_sv",
    "prob_density_marks",
)


def pairs_of(n_classes: int) -> list[tuple[int, int]]:
    """LIBSVM's order of the pairs of classes: (0,1), (0,2), ..., (1,2), ..."""
    return [(i, j) for i in range(n_classes) for j in range(i + 1, n_classes)]


# -- writing ---------------------------------------------------------------------------------------


def write_libsvm(model: ModelDescription, arrays: dict) -> Iterator[str]:
    """The model as a LIBSVM model file, in pieces (ExportRefused for models LIBSVM cannot hold)."""
    kind = model.kind
    if kind not in (ModelKind.linear, ModelKind.kernel):
        raise ExportRefused(
            f"LIBSVM files hold classifiers; this is a {kind} model (its pairwise scoring function exports as json or onnx)"
        )
    single = model.task in (Task.regression, Task.one_class)  # one decision function, no label line
    labels = [] if single else integral_labels(model.labels, "LIBSVM")
    if kind == ModelKind.linear:
        kernel = ModelKernel(type="linear")
        support = sp.csr_matrix(np.asarray(arrays["weights"], dtype=np.float64))
        coef = np.eye(support.shape[0])
    else:
        stored_kernel = model.kernel_spec
        if stored_kernel is None:
            raise ExportRefused("this kernel model has no kernel stored")
        kernel = stored_kernel
        support = sp.csr_matrix(
            (
                np.asarray(arrays["sv_data"], dtype=np.float64),
                np.asarray(arrays["sv_indices"]),
                np.asarray(arrays["sv_indptr"]),
            ),
            shape=(len(arrays["sv_indptr"]) - 1, int(model.n_features)),
        )
        coef = np.asarray(arrays["coef"], dtype=np.float64)
    offsets = np.asarray(arrays["offsets"], dtype=np.float64)
    if kernel.type == "precomputed":  # LIBSVM writes a support vector as its serial alone (column 0)
        support = support[:, [0]].tocsr()
    stated = model.libsvm_svm_type or (model.params or {}).get("svm_type")  # an import's, or smo's svm_type
    svm_type = stated if stated in SVM_TYPES + SINGLE_SVM_TYPES else None
    if single:  # one expansion, no labels: rho = -b, each row's coefficient (beta_i; one-class: alpha_i)
        default_type = "one_class" if model.task == Task.one_class else "epsilon_svr"
        yield _header(kernel, [], [support.shape[0]], [-offsets[0]], svm_type=svm_type or default_type)
        yield from _sv_lines(support, np.arange(support.shape[0]), coef[0].reshape(-1, 1), first_index(kernel))
    elif model.one_vs_one:
        yield from _write_one_vs_one(model, kernel, support, coef, offsets, svm_type or "c_svc")
    elif coef.shape[0] == 1:
        yield from _write_binary(model, labels, kernel, support, coef[0], offsets[0], svm_type or "c_svc")
    else:
        yield from _write_one_vs_rest(labels, kernel, support, coef, offsets)


def first_index(kernel: ModelKernel) -> int:
    """The index a support vector line's first column is written as: 1 (LIBSVM's), or 0 for a precomputed kernel,
    whose support vectors are their serial numbers, `0:serial`."""
    return 0 if kernel.type == "precomputed" else 1


def _header(
    kernel: ModelKernel, labels: list, n_sv: list[int], rho, prob: tuple | None = None, svm_type: str = "c_svc"
) -> str:
    """The header lines up to `SV`; a regression (``svm_type`` epsilon_svr or nu_svr: no labels) has nr_class 2
    and neither a label nor an nr_sv line, as LIBSVM writes it."""
    kind = kernel.type
    regression = svm_type in SINGLE_SVM_TYPES
    lines = [f"svm_type {svm_type}", f"kernel_type {KERNEL_TYPES[kind]}"]
    if kind == "poly":
        lines.append(f"degree {int(kernel.degree if kernel.degree is not None else 3)}")
    if kind in ("poly", "rbf", "sigmoid"):
        assert kernel.gamma is not None, "a stored kernel has gamma resolved"
        lines.append(f"gamma {number(kernel.gamma)}")
    if kind in ("poly", "sigmoid"):
        lines.append(f"coef0 {number(kernel.coef0 if kernel.coef0 is not None else 0.0)}")
    lines += [
        f"nr_class {2 if regression else len(labels)}",
        f"total_sv {sum(n_sv)}",
        "rho " + " ".join(number(v) for v in rho),
    ]
    if not regression:
        lines.append("label " + " ".join(str(int(v)) for v in labels))
    if prob is not None:
        lines += ["probA " + " ".join(number(v) for v in prob[0]), "probB " + " ".join(number(v) for v in prob[1])]
    if not regression:
        lines.append("nr_sv " + " ".join(str(n) for n in n_sv))
    lines.append("SV")
    return "\n".join(lines) + "\n"


def _sv_lines(support: sp.csr_matrix, rows: np.ndarray, coefficients: np.ndarray, first: int = 1) -> Iterator[str]:
    """Lines `c_1 ... c_{k-1} index:value ...` for the given rows, with coefficients (len(rows), k - 1); indices count
    from ``first``: LIBSVM's from 1, a precomputed kernel's `0:serial` from 0 (``first_index``)."""
    indptr, indices, data = support.indptr, support.indices, support.data
    for start in range(0, rows.size, ROWS_PER_PIECE):
        out = []
        for position in range(start, min(rows.size, start + ROWS_PER_PIECE)):
            row = int(rows[position])
            lo, hi = indptr[row], indptr[row + 1]
            pairs = " ".join(f"{j + first}:{v!r}" for j, v in zip(indices[lo:hi].tolist(), data[lo:hi].tolist()))
            out.append(" ".join(map(repr, coefficients[position].tolist())) + " " + pairs + "\n")
        yield "".join(out)


def _write_binary(
    model: ModelDescription,
    labels: list,
    kernel: ModelKernel,
    support,
    coef: np.ndarray,
    offset: float,
    svm_type: str = "c_svc",
) -> Iterator[str]:
    rows = np.flatnonzero(coef != 0.0)
    first = rows[coef[rows] > 0]
    second = rows[coef[rows] < 0]
    calibration = model.calibration
    prob = None
    if calibration is not None and calibration.method == "platt_ovr" and calibration.A and calibration.B:
        prob = ([calibration.A[0]], [calibration.B[0]])
    yield _header(kernel, [labels[1], labels[0]], [first.size, second.size], [-offset], prob, svm_type)
    ordered = np.concatenate([first, second])
    yield from _sv_lines(support, ordered, coef[ordered].reshape(-1, 1), first_index(kernel))


def _write_one_vs_rest(
    labels: list, kernel: ModelKernel, support, coef: np.ndarray, offsets: np.ndarray
) -> Iterator[str]:
    k = coef.shape[0]
    groups = [np.flatnonzero(coef[c] != 0.0) for c in range(k)]
    rho = [offsets[j] - offsets[i] for i, j in pairs_of(k)]
    yield _header(kernel, labels, [g.size for g in groups], rho)
    for c, rows in enumerate(groups):
        # the line's entry for another class j: +c_k where k comes first in the pair (j > c), -c_k where second
        signs = np.array([1.0 if j > c else -1.0 for j in range(k) if j != c])
        yield from _sv_lines(support, rows, coef[c, rows].reshape(-1, 1) * signs.reshape(1, -1), first_index(kernel))


def _write_one_vs_one(
    model: ModelDescription,
    kernel: ModelKernel,
    support,
    coef: np.ndarray,
    offsets: np.ndarray,
    svm_type: str = "c_svc",
) -> Iterator[str]:
    """A one-vs-one model imported from LIBSVM (or trained with smo's ovo), written back in its own class order."""
    file_labels = [int(v) for v in model.ovo_labels or []]
    n_sv = [int(n) for n in model.nr_sv or []]
    k = len(file_labels)
    pair_index = {pair: p for p, pair in enumerate(pairs_of(k))}
    calibration = model.calibration
    prob = (
        (calibration.A, calibration.B)
        if calibration is not None and calibration.method == "pairwise_coupling"
        else None
    )
    yield _header(kernel, file_labels, n_sv, [-v for v in offsets], prob, svm_type)
    start = 0
    for c, count in enumerate(n_sv):
        rows = np.arange(start, start + count)
        columns = np.array([pair_index[(min(c, j), max(c, j))] for j in range(k) if j != c], dtype=np.int64)
        yield from _sv_lines(support, rows, coef[np.ix_(columns, rows)].T, first_index(kernel))
        start += count


# -- reading ---------------------------------------------------------------------------------------


def read_libsvm(text: IO[str], n_features: int | None = None) -> tuple[ModelDescription, dict]:
    """(description, arrays) of a LIBSVM model file; ModelFileError names the line of anything wrong.

    ``n_features``: the model's feature count (default: the largest index of a support vector). For
    the rbf kernel it matters: features past it are dropped from query rows before scoring, where
    LIBSVM would count them in the distance.
    """
    lines = numbered_lines(text)
    header = Header(lines, "SV", HEADER_FIELDS, "LIBSVM")
    field, last = header.field, header.end
    where, (svm_type,) = field("svm_type")
    if svm_type not in SVM_TYPES + SINGLE_SVM_TYPES:
        raise ModelFileError(where, f"unknown svm_type {svm_type!r} (known: {', '.join(SVM_TYPES + SINGLE_SVM_TYPES)})")
    kernel = _read_kernel(header, field)
    if svm_type in SINGLE_SVM_TYPES:
        return _read_single(header, lines, kernel, svm_type, n_features)
    where, (token,) = field("nr_class")
    k = parse_int(token, where, "nr_class")
    if k < 2:
        raise ModelFileError(where, f"nr_class must be at least 2, got {k}")
    n_pairs = k * (k - 1) // 2
    where, (token,) = field("total_sv")
    total_sv = parse_int(token, where, "total_sv")
    if total_sv < 0:
        raise ModelFileError(where, f"total_sv must be >= 0, got {total_sv}")
    where, tokens = field("rho", n_pairs)
    rho = np.array([parse_float(t, where, "rho") for t in tokens])
    where, tokens = field("label", k)
    file_labels = [parse_int(t, where, "label") for t in tokens]
    if len(set(file_labels)) != k:
        raise ModelFileError(where, f"labels must be distinct, got {file_labels}")
    where, tokens = field("nr_sv", k)
    nr_sv = [parse_int(t, where, "nr_sv") for t in tokens]
    if any(n < 0 for n in nr_sv) or sum(nr_sv) != total_sv:
        raise ModelFileError(where, f"nr_sv {nr_sv} must be >= 0 and add up to total_sv = {total_sv}")
    prob = None
    if "probA" in header or "probB" in header:
        where_a, tokens_a = field("probA", n_pairs)
        where_b, tokens_b = field("probB", n_pairs)
        prob = (
            [parse_float(t, where_a, "probA") for t in tokens_a],
            [parse_float(t, where_b, "probB") for t in tokens_b],
        )

    coefficients, support, zero_based = _read_support_vectors(lines, total_sv, k - 1, last)
    n_features = _feature_count(support, n_features, kernel)

    pair_coef = np.zeros((n_pairs, total_sv))
    starts = np.concatenate([[0], np.cumsum(nr_sv)])
    for p, (i, j) in enumerate(pairs_of(k)):
        pair_coef[p, starts[i] : starts[i + 1]] = coefficients[starts[i] : starts[i + 1], j - 1]
        pair_coef[p, starts[j] : starts[j + 1]] = coefficients[starts[j] : starts[j + 1], i]
    offsets = -rho
    labels = sorted(float(v) for v in file_labels)
    model = _kernel_model(Task.classification, labels, n_features, zero_based, kernel, svm_type, total_sv)
    if k == 2:
        sign = 1.0 if file_labels[0] > file_labels[1] else -1.0  # Hinge: positive scores mean the larger label
        pair_coef, offsets = sign * pair_coef, sign * offsets
        if prob is not None:
            # LIBSVM: P(first label) = 1 / (1 + exp(A d + B)); for d' = sign d and the larger label: A, sign * B
            model.probability = dict(
                method="platt_ovr", A=[prob[0][0]], B=[sign * prob[1][0]], source="LIBSVM probA/probB"
            )
    else:
        model.multiclass = Multiclass.ovo.value
        model.ovo_labels = [float(v) for v in file_labels]
        model.nr_sv = nr_sv
        if prob is not None:
            model.probability = dict(method="pairwise_coupling", A=prob[0], B=prob[1], source="LIBSVM probA/probB")
    arrays = {
        "sv_indptr": support.indptr.astype(np.int64),
        "sv_indices": support.indices.astype(np.int32),
        "sv_data": support.data.astype(np.float64),
        "coef": pair_coef,
        "offsets": offsets.astype(np.float64),
    }
    return model, arrays


def _read_single(
    header: Header, lines: Iterator[tuple[int, str]], kernel: dict, svm_type: str, n_features: int | None
) -> tuple[ModelDescription, dict]:
    """A LIBSVM file of one decision function: a regression (epsilon_svr, nu_svr), whose value is the prediction,
    or a one-class SVM, +1 where it is positive; rho = -b."""
    where, (token,) = header.field("total_sv")
    total_sv = parse_int(token, where, "total_sv")
    if total_sv < 0:
        raise ModelFileError(where, f"total_sv must be >= 0, got {total_sv}")
    where, (token,) = header.field("rho")
    rho = parse_float(token, where, "rho")
    for name in ("label", "nr_sv", "probA", "probB"):
        if name in header:
            raise ModelFileError(header.field(name, None)[0], f"a {svm_type} model has no {name}")
    coefficients, support, zero_based = _read_support_vectors(lines, total_sv, 1, header.end)
    n_features = _feature_count(support, n_features, kernel)
    if svm_type == "one_class":
        model = _kernel_model(Task.one_class, [-1.0, 1.0], n_features, zero_based, kernel, svm_type, total_sv)
    else:
        model = _kernel_model(Task.regression, None, n_features, zero_based, kernel, svm_type, total_sv)
    arrays = {
        "sv_indptr": support.indptr.astype(np.int64),
        "sv_indices": support.indices.astype(np.int32),
        "sv_data": support.data.astype(np.float64),
        "coef": coefficients[:, 0].reshape(1, -1).astype(np.float64),
        "offsets": np.array([-rho]),
    }
    return model, arrays


def _kernel_model(
    task: Task, labels: list[float] | None, n_features: int, zero_based: bool, kernel: dict, svm_type: str, n_sv: int
) -> ModelDescription:
    """The description of a model read from a LIBSVM file, its fields in the order the stored document lists them."""
    model = ModelDescription()
    model.kind = ModelKind.kernel.value
    model.task = task.value
    model.labels = labels
    model.n_features = int(n_features)
    model.zero_based = zero_based
    model.kernel = kernel
    model.params = {"kernel": kernel}
    model.libsvm_svm_type = svm_type
    model.n_support = int(n_sv)
    return model


def _feature_count(support: sp.csr_matrix, n_features: int | None, kernel: dict | None = None) -> int:
    """The model's feature count (default: the largest support vector column + 1), the support matrix resized to
    it; a ModelFileError when a support vector uses a column past a given count. A precomputed kernel's support
    vectors are their serial numbers (column 0): the rows it scores hold a column per serial, so the default count is
    the largest serial + 1."""
    largest = support.shape[1]
    if kernel is not None and kernel.get("type") == "precomputed" and support.nnz:
        largest = max(largest, int(support[:, 0].max()) + 1)
    if n_features is None:
        n_features = max(largest, 1)
    elif n_features < largest:
        raise ModelFileError(None, f"n_features = {n_features}, but a support vector uses feature column {largest - 1}")
    support.resize((support.shape[0], n_features))
    return n_features


def _read_kernel(header: Header, field) -> dict:
    where, (name,) = field("kernel_type")
    types = {v: k for k, v in KERNEL_TYPES.items()}
    if name not in types:
        raise ModelFileError(where, f"unknown kernel_type {name!r} (one of {', '.join(types)})")
    kind = types[name]
    kernel: dict = {"type": kind}
    if kind in ("poly", "rbf", "sigmoid"):
        where, (token,) = field("gamma")
        gamma = parse_float(token, where, "gamma")
        if not gamma > 0:
            raise ModelFileError(where, f"gamma must be > 0, got {gamma}")
        kernel["gamma"] = gamma
    if kind in ("poly", "sigmoid"):
        where, (token,) = field("coef0")
        kernel["coef0"] = parse_float(token, where, "coef0")
    if kind == "poly":
        where, (token,) = field("degree")
        degree = parse_int(token, where, "degree")
        if not 1 <= degree <= 20:
            raise ModelFileError(where, f"degree must lie in [1, 20], got {degree}")
        kernel["degree"] = degree
    return kernel


def _read_support_vectors(lines, total_sv: int, n_coef: int, header_end: int) -> tuple[np.ndarray, sp.csr_matrix, bool]:
    """Coefficients (total_sv, n_coef) and the vectors as CSR (columns from 0), and whether the file was zero-based."""
    coefficients = np.empty((total_sv, n_coef))
    indptr = [0]
    indices: list[int] = []
    values: list[float] = []
    count = 0
    last = header_end
    for last, line in lines:
        tokens = line.split()
        if not tokens:
            continue
        if count == total_sv:
            raise ModelFileError(last, f"more support vector lines than total_sv = {total_sv}")
        if len(tokens) < n_coef:
            raise ModelFileError(
                last, f"a support vector line starts with {n_coef} coefficients, found {len(tokens)} values"
            )
        for t in range(n_coef):
            coefficients[count, t] = parse_float(tokens[t], last, f"coefficient {t + 1}")
        previous = -1
        for token in tokens[n_coef:]:
            index_text, colon, value_text = token.partition(":")
            if not colon:
                raise ModelFileError(last, f"{token!r} is not index:value")
            index = parse_int(index_text, last, "feature index")
            if index < 0:
                raise ModelFileError(last, f"feature index {index} is negative")
            if index <= previous:
                raise ModelFileError(last, f"feature index {index} after {previous}: indices must ascend")
            previous = index
            indices.append(index)
            values.append(parse_float(value_text, last, f"value of feature {index}"))
        indptr.append(len(indices))
        count += 1
    if count < total_sv:
        raise ModelFileError(last + 1, f"the file ends after {count} support vectors; total_sv is {total_sv}")
    index_array = np.asarray(indices, dtype=np.int64)
    zero_based = bool(index_array.size and index_array.min() == 0)
    columns = index_array if zero_based else index_array - 1
    width = int(columns.max()) + 1 if columns.size else 1
    support = sp.csr_matrix(
        (np.asarray(values, dtype=np.float64), columns, np.asarray(indptr, dtype=np.int64)), shape=(total_sv, width)
    )
    return coefficients, support, zero_based

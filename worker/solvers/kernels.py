"""Kernel functions on sparse rows, shared by the kernel SVM solvers (``smo`` and the kernel cutting planes).

Kernels
-------
For rows x, z (CSR rows of one matrix) with squared norms |x|^2, |z|^2 precomputed once:

    linear    K(x, z) = <x, z>
    poly      K(x, z) = (gamma * <x, z> + coef0) ** degree
    rbf       K(x, z) = exp(-gamma * |x - z|^2),  |x - z|^2 = |x|^2 + |z|^2 - 2 <x, z>  (clamped at 0)
    sigmoid   K(x, z) = tanh(gamma * <x, z> + coef0)

(LIBSVM's kernels and its numbering of ``-t``: 0 linear, 1 poly, 2 rbf, 3 sigmoid). A kernel is given
to the solvers as a dict: ``{"type": "linear"}``, ``{"type": "rbf", "gamma": g}``,
``{"type": "poly", "gamma": g, "coef0": r, "degree": d}``, ``{"type": "sigmoid", "gamma": g,
"coef0": r}``; ``coef0`` defaults to 0 and ``degree`` to 3 as in LIBSVM. ``gamma`` must already be a
number there: the service resolves ``"scale"`` (and ``"auto"``) with :func:`resolve_gamma`.

gamma = "scale" is scikit-learn's rule, 1 / (n_features * Var(X)), where Var(X) is the variance of all
n_rows * n_features entries of the matrix, implicit zeros included:
Var(X) = sum(data^2) / (n*d) - (sum(data) / (n*d))^2; scikit-learn uses gamma = 1 when Var(X) = 0.
"auto" is 1 / n_features.

Evaluation
----------
The rbf kernel's exponential is ``fast_exp``: Cody and Waite's reduction exp(x) = 2^k exp(r),
k = round(x / ln 2), |r| <= ln(2) / 2, with exp(r) from its Taylor polynomial of degree 13 (truncation
below 1e-17 relative) and 2^k put into the exponent bits directly; within one unit in the last place
of ``math.exp`` on [-708, 709] and 0 below -708 (where exp is below 1e-307). Unlike a call to the C
library it has no branch or call inside, so loops over kernel values vectorize.

A sparse dot product <x_a, x_b> is computed by scattering x_a into a dense work vector of length
n_features (kept zero between uses) and gathering over the stored entries of x_b: O(nnz(x_b)) per
pair, no merge of index lists. ``_kernel_row`` fills one row of kernel values against a list of rows
(what SMO's cache needs); ``_kernel_block`` fills a block K(A, B) and, when the block's right-hand rows
fit densely (n_features * len(B) <= a budget), uses a dense transposed copy of them so that the inner
loop is a contiguous axpy over len(B) (what the sampled-cut solver needs). Nothing runs in parallel.
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import njit
from numba.core import types
from numba.extending import intrinsic

from worker.solvers.common import SolverInputError, check_int

KERNEL_CODES = {"linear": 0, "poly": 1, "rbf": 2, "sigmoid": 3, "precomputed": 4}
KERNEL_LINEAR = 0
KERNEL_POLY = 1
KERNEL_RBF = 2
KERNEL_SIGMOID = 3
KERNEL_PRECOMPUTED = 4  # K(x_p, x_t) is row p's value at row t's serial number (its column 0): smo.rows gathers it

# the dense transposed copy of a block's right-hand rows is used up to this many float64 entries
_DENSE_BLOCK_LIMIT = 1 << 22


def resolve_gamma(gamma, indptr: np.ndarray, data: np.ndarray, n_features: int) -> float:
    """Return gamma as a float: a positive number as is, "scale" or "auto" computed from the data.

    ``indptr`` gives the number of rows; only the stored values ``data`` enter the variance (implicit
    zeros are counted through the matrix size), exactly as scikit-learn's ``SVC(gamma="scale")`` does
    on a sparse matrix.
    """
    if isinstance(gamma, str):
        if gamma == "auto":
            if n_features < 1:
                raise SolverInputError(f"n_features must be >= 1 for gamma='auto', got {n_features}")
            return 1.0 / n_features
        if gamma != "scale":
            raise SolverInputError(f"gamma must be a number > 0, 'scale' or 'auto', got {gamma!r}")
        n_rows = int(np.asarray(indptr).size - 1)
        size = float(n_rows) * float(n_features)
        if size <= 0:
            raise SolverInputError("gamma='scale' needs at least one row and one feature")
        values = np.asarray(data, dtype=np.float64)
        mean = float(values.sum()) / size
        mean_sq = float(np.dot(values, values)) / size
        variance = mean_sq - mean * mean
        return 1.0 / (n_features * variance) if variance != 0.0 else 1.0
    if isinstance(gamma, bool):
        raise SolverInputError(f"gamma must be a number > 0, 'scale' or 'auto', got {gamma!r}")
    try:
        value = float(gamma)
    except (TypeError, ValueError):
        raise SolverInputError(f"gamma must be a number > 0, 'scale' or 'auto', got {gamma!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise SolverInputError(f"gamma must be a finite number > 0, got {gamma!r}")
    return value


def precomputed_serials(indptr, indices, data, n_features: int) -> tuple[np.ndarray, np.ndarray]:
    """A precomputed kernel's rows (LIBSVM's -t 4): each row's serial number i (its value at column 0, an integer in
    1..n_features - 1) and K(x_i, x_i), its value at its own serial's column. SolverInputError names a row without."""
    import scipy.sparse as sp

    indptr = np.asarray(indptr, dtype=np.int64)
    n = indptr.size - 1
    first = indptr[:-1]
    has = indptr[1:] > first
    at_zero = np.zeros(n, dtype=bool)
    at_zero[has] = np.asarray(indices)[first[has]] == 0
    if not np.all(at_zero):
        row = int(np.flatnonzero(~at_zero)[0])
        raise SolverInputError(
            f"precomputed kernel: row {row + 1} has no 0:<serial> entry (LIBSVM's -t 4 layout: 0:i, then j:K(x, x_j); "
            "upload with zero_based=true or auto)"
        )
    serial = np.asarray(data, dtype=np.float64)[first]
    if np.any(serial != np.rint(serial)) or serial.min() < 1 or serial.max() > n_features - 1:
        raise SolverInputError(
            f"precomputed kernel: the serial numbers (column 0) must be integers in 1..{n_features - 1} (the kernel "
            "columns the rows hold)"
        )
    serial = serial.astype(np.int64)
    matrix = sp.csr_matrix((data, indices, indptr), shape=(n, int(n_features)))
    diagonal = np.asarray(matrix[np.arange(n), serial]).reshape(-1).astype(np.float64)
    return serial, diagonal


def kernel_params(kernel) -> tuple[int, float, float, int]:
    """Validate a kernel dict and return (code, gamma, coef0, degree) for the numba kernels.

    gamma must already be a number (see :func:`resolve_gamma`); unused parameters are returned as
    neutral values (gamma 1, coef0 0, degree 1) so that a kernel dict fully determines the numbers.
    """
    if not isinstance(kernel, dict):
        raise SolverInputError(f"kernel must be a dict like {{'type': 'rbf', 'gamma': 0.1}}, got {kernel!r}")
    kind = kernel.get("type")
    if kind not in KERNEL_CODES:
        raise SolverInputError(f"kernel['type'] must be one of {sorted(KERNEL_CODES)}, got {kind!r}")
    allowed = {
        "linear": {"type"},
        "rbf": {"type", "gamma"},
        "poly": {"type", "gamma", "coef0", "degree"},
        "sigmoid": {"type", "gamma", "coef0"},
        "precomputed": {"type"},
    }[kind]
    unknown = set(kernel) - allowed
    if unknown:
        raise SolverInputError(f"kernel type {kind!r} takes only {sorted(allowed)}, got also {sorted(unknown)}")
    code = KERNEL_CODES[kind]
    if code in (KERNEL_LINEAR, KERNEL_PRECOMPUTED):
        return code, 1.0, 0.0, 1
    gamma = kernel.get("gamma")
    if isinstance(gamma, str) or gamma is None or isinstance(gamma, bool):
        raise SolverInputError(
            f"kernel['gamma'] must be a number > 0 here (resolve 'scale' with resolve_gamma first), got {gamma!r}"
        )
    gamma = float(gamma)
    if not (math.isfinite(gamma) and gamma > 0):
        raise SolverInputError(f"kernel['gamma'] must be a finite number > 0, got {gamma!r}")
    coef0 = kernel.get("coef0", 0.0)
    if (
        isinstance(coef0, bool)
        or not isinstance(coef0, (int, float, np.integer, np.floating))
        or not math.isfinite(coef0)
    ):
        raise SolverInputError(f"kernel['coef0'] must be a finite number, got {coef0!r}")
    degree = kernel.get("degree", 3)
    if code == KERNEL_POLY:
        degree = check_int("kernel['degree']", degree, 1, 20)
    else:
        degree = 1
    return code, gamma, float(coef0), int(degree)


@intrinsic
def _float_bits(typingctx, x):
    """The IEEE-754 bits of a float64 as an int64 (a bit cast, no conversion)."""

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))

    return types.int64(types.float64), codegen


@intrinsic
def _bits_float(typingctx, x):
    """The float64 whose IEEE-754 bits are the given int64 (a bit cast, no conversion)."""

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())

    return types.float64(types.int64), codegen


_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01  # ln 2 split so that k * _LN2_HI is exact for |k| < 2^11 (fdlibm's)
_LN2_LO = 1.90821492927058770002e-10
_ROUND_SHIFT = 6755399441055744.0  # 1.5 * 2^52: adding it rounds to an integer held in the low bits


@njit(cache=True, inline="always")
def fast_exp(x):
    """exp(x) within one ulp of math.exp on [-708, 709]; 0 below -708 (see the module docstring)."""
    xc = min(max(x, -708.0), 709.0)
    kd = xc * _LOG2E + _ROUND_SHIFT
    k = kd - _ROUND_SHIFT
    r = xc - k * _LN2_HI - k * _LN2_LO
    p = 1.0 + r * (
        1.0
        + r
        * (
            0.5
            + r
            * (
                1.0 / 6.0
                + r
                * (
                    1.0 / 24.0
                    + r
                    * (
                        1.0 / 120.0
                        + r
                        * (
                            1.0 / 720.0
                            + r
                            * (
                                1.0 / 5040.0
                                + r
                                * (
                                    1.0 / 40320.0
                                    + r
                                    * (
                                        1.0 / 362880.0
                                        + r
                                        * (
                                            1.0 / 3628800.0
                                            + r
                                            * (1.0 / 39916800.0 + r * (1.0 / 479001600.0 + r * (1.0 / 6227020800.0)))
                                        )
                                    )
                                )
                            )
                        )
                    )
                )
            )
        )
    )
    # the low bits of kd hold k: shifted into the exponent field and biased, they make 2^k
    scale = _bits_float((_float_bits(kd) << 52) + (1023 << 52))
    return p * scale if x >= -708.0 else 0.0


@njit(cache=True)
def row_sq_norms(indptr, data):
    """|x_i|^2 for every CSR row."""
    n = indptr.size - 1
    out = np.empty(n, dtype=np.float64)
    for i in range(n):
        acc = 0.0
        for k in range(indptr[i], indptr[i + 1]):
            acc += data[k] * data[k]
        out[i] = acc
    return out


@njit(cache=True, inline="always")
def kernel_from_dot(code, gamma, coef0, degree, dot, sq_a, sq_b):
    """K(a, b) from <a, b> and the squared norms."""
    if code == 2:
        d2 = sq_a + sq_b - 2.0 * dot
        if d2 < 0.0:
            d2 = 0.0
        return fast_exp(-gamma * d2)
    if code == 0 or code == 4:  # linear; precomputed: the "dot" is the gathered kernel value
        return dot
    if code == 1:
        return (gamma * dot + coef0) ** degree
    return math.tanh(gamma * dot + coef0)


@njit(cache=True)
def kernel_diagonal(indptr, indices, data, sq, code, gamma, coef0, degree):
    """K(x_i, x_i) for every row."""
    n = indptr.size - 1
    out = np.empty(n, dtype=np.float64)
    for i in range(n):
        out[i] = kernel_from_dot(code, gamma, coef0, degree, sq[i], sq[i], sq[i])
    return out


@njit(cache=True)
def scatter_row(indptr, indices, data, a, xbuf):
    """Copy row a into the dense work vector (which must be zero)."""
    for k in range(np.uint64(indptr[a]), np.uint64(indptr[a + 1])):
        xbuf[np.uint64(indices[k])] = data[k]


@njit(cache=True)
def clear_row(indptr, indices, a, xbuf):
    """Zero the entries of the work vector that row a set."""
    for k in range(np.uint64(indptr[a]), np.uint64(indptr[a + 1])):
        xbuf[np.uint64(indices[k])] = 0.0


@njit(cache=True, inline="always")
def gather_dot(indptr, indices, data, b, xbuf):
    """<x_b, xbuf> over the stored entries of row b.

    Unsigned indices: numba adds, to every array access through a signed integer, a test for a negative index
    (Python's count from the end). The loops over stored entries here and in the solvers' passes run over a range
    of np.uint64 and read an entry's column (row) as np.uint64: the same arithmetic in the same order, without the
    tests (measured in 2026-11: dcd's passes 0.65-0.88x of their time on a9a, w8a and sector, newGLMNET's 0.83x).
    Such an index must never take part in a subtraction or meet a signed integer (numba makes uint64 with int64 a
    float)."""
    acc = 0.0
    for k in range(np.uint64(indptr[b]), np.uint64(indptr[b + 1])):
        acc += data[k] * xbuf[np.uint64(indices[k])]
    return acc


DENSE_ROWS_AT_LEAST = 0.5
"""A coordinate descent over rows also keeps them as a dense n x d array when at least this share of their entries
is nonzero (``keeps_dense_rows``): a row's dot product is then of fixed length and summed in SIMD lanes
(``dense_row_dot``; a pass over ijcnn1's 22 features 0.27 ms against 0.85 from its sparse rows), in at most 1.33x
the sparse rows' memory (8 bytes a cell against 12 an entry)."""


def keeps_dense_rows(stored_values: int, rows: int, n_features: int) -> bool:
    """Whether the rows are dense enough to be kept dense too (``DENSE_ROWS_AT_LEAST``)."""
    return rows > 0 and stored_values >= DENSE_ROWS_AT_LEAST * rows * n_features


@njit(cache=True)
def fill_dense_row(indptr, indices, data, i, dense):
    """dense[i] = row i (every cell written)."""
    dense[i, :] = 0.0
    for k in range(np.uint64(indptr[i]), np.uint64(indptr[i + 1])):
        dense[i, np.uint64(indices[k])] = data[k]


@njit(cache=True, fastmath={"reassoc", "contract"})
def dense_row_dot(dense, i, v):
    """<x_i, v[:d]> over a dense row (d = its length; ``v`` may be longer), summed in any order (SIMD lanes). Not
    inlined by numba: the summation's freedom is this function's alone (LLVM inlines it, the flags kept)."""
    total = 0.0
    for j in range(dense.shape[1]):
        total += dense[i, j] * v[j]
    return total


@njit(cache=True, fastmath={"reassoc", "contract"})
def dense_rows_dot(dense, i, j):
    """<x_i, x_j> over dense rows, summed in any order."""
    total = 0.0
    for f in range(dense.shape[1]):
        total += dense[i, f] * dense[j, f]
    return total


@njit(cache=True)
def _kernel_row(indptr, indices, data, sq, a, rows, start, stop, code, gamma, coef0, degree, xbuf, out):
    """out[t] = K(x_a, x_rows[t]) for t in [start, stop); xbuf is a zeroed work vector (left zeroed)."""
    scatter_row(indptr, indices, data, a, xbuf)
    sq_a = sq[a]
    for t in range(start, stop):
        b = rows[t]
        dot = gather_dot(indptr, indices, data, b, xbuf)
        out[t] = kernel_from_dot(code, gamma, coef0, degree, dot, sq_a, sq[b])
    clear_row(indptr, indices, a, xbuf)


@njit(cache=True, nogil=True)  # nogil: threads of the subspace variant compute blocks of rows at once
def _kernel_block(
    indptr_a,
    indices_a,
    data_a,
    sq_a,
    rows_a,
    indptr_b,
    indices_b,
    data_b,
    sq_b,
    rows_b,
    n_features,
    code,
    gamma,
    coef0,
    degree,
    out,
):
    """out[i, j] = K(a_{rows_a[i]}, b_{rows_b[j]}) for two CSR matrices with the same feature space."""
    m = rows_b.size
    if n_features * m <= _DENSE_BLOCK_LIMIT:
        dense_t = np.zeros((n_features, m), dtype=np.float64)
        for j in range(m):
            b = rows_b[j]
            for k in range(indptr_b[b], indptr_b[b + 1]):
                dense_t[indices_b[k], j] += data_b[k]
        dots = np.empty(m, dtype=np.float64)
        for i in range(rows_a.size):
            a = rows_a[i]
            for j in range(m):
                dots[j] = 0.0
            for k in range(indptr_a[a], indptr_a[a + 1]):
                v = data_a[k]
                col = dense_t[indices_a[k]]
                for j in range(m):
                    dots[j] += v * col[j]
            sa = sq_a[a]
            for j in range(m):
                out[i, j] = kernel_from_dot(code, gamma, coef0, degree, dots[j], sa, sq_b[rows_b[j]])
    else:
        xbuf = np.zeros(n_features, dtype=np.float64)
        for i in range(rows_a.size):
            a = rows_a[i]
            scatter_row(indptr_a, indices_a, data_a, a, xbuf)
            sa = sq_a[a]
            for j in range(m):
                b = rows_b[j]
                dot = gather_dot(indptr_b, indices_b, data_b, b, xbuf)
                out[i, j] = kernel_from_dot(code, gamma, coef0, degree, dot, sa, sq_b[b])
            clear_row(indptr_a, indices_a, a, xbuf)


def kernel_block(indptr, indices, data, rows_a, rows_b, *, n_features, kernel, sq=None, out=None) -> np.ndarray:
    """K(x_{rows_a[i]}, x_{rows_b[j]}) as a dense (len(rows_a), len(rows_b)) float64 array (one matrix); ``sq``:
    the rows' squared norms when known, ``out``: the array to fill."""
    code, gamma, coef0, degree = kernel_params(kernel)
    sq = row_sq_norms(indptr, data) if sq is None else sq
    rows_a = np.ascontiguousarray(rows_a, dtype=np.int64)
    rows_b = np.ascontiguousarray(rows_b, dtype=np.int64)
    out = np.empty((rows_a.size, rows_b.size), dtype=np.float64) if out is None else out
    _kernel_block(
        indptr,
        indices,
        data,
        sq,
        rows_a,
        indptr,
        indices,
        data,
        sq,
        rows_b,
        n_features,
        code,
        gamma,
        coef0,
        degree,
        out,
    )
    return out


def warm_up() -> None:
    """Compile the kernels on a tiny problem."""
    indptr = np.array([0, 2, 3], dtype=np.int64)
    indices = np.array([0, 1, 1], dtype=np.int32)
    data = np.array([1.0, 2.0, -1.0])
    for kind in ("linear", "rbf"):
        kernel = {"type": kind} if kind == "linear" else {"type": kind, "gamma": 0.5}
        kernel_block(indptr, indices, data, np.arange(2), np.arange(2), n_features=2, kernel=kernel)
    sq = row_sq_norms(indptr, data)
    rows = np.arange(2, dtype=np.int64)
    xbuf = np.zeros(2)
    _kernel_row(indptr, indices, data, sq, 0, rows, 0, 2, 2, 0.5, 0.0, 1, xbuf, np.empty(2))
    _kernel_row(indptr, indices, data, sq, 0, rows, 0, 2, 2, 0.5, 0.0, 1, xbuf, np.empty(2, dtype=np.float32))
    kernel_diagonal(indptr, indices, data, sq, 2, 0.5, 0.0, 1)

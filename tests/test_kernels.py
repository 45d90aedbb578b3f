"""Kernel evaluation on sparse rows, gamma resolution, and the numpy-only kernel prediction helper."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

from core.scoring.kernel import KernelExpansion, decision_function
from tests import naive
from worker.solvers.common import SolverInputError
from worker.solvers.kernels import _kernel_row, kernel_block, kernel_params, resolve_gamma, row_sq_norms

KERNELS = [
    {"type": "linear"},
    {"type": "rbf", "gamma": 0.3},
    {"type": "poly", "gamma": 0.2, "coef0": 1.0, "degree": 3},
    {"type": "sigmoid", "gamma": 0.05, "coef0": -0.5},
]


_csr = naive.csr_parts


def _random_sparse(n_rows, n_features, density, seed):
    rng = np.random.default_rng(seed)
    matrix = sp.random(n_rows, n_features, density=density, random_state=rng, format="csr")
    matrix.data = rng.normal(size=matrix.data.size)
    return matrix


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k["type"])
def test_kernel_block_matches_dense_formulas(kernel):
    matrix = _random_sparse(60, 12, 0.4, 0)
    indptr, indices, data = _csr(matrix)
    rows_a = np.arange(0, 60, 3)
    rows_b = np.arange(60)
    got = kernel_block(indptr, indices, data, rows_a, rows_b, n_features=12, kernel=kernel)
    dense = matrix.toarray()
    want = naive.kernel_dense(dense[rows_a], dense[rows_b], kernel)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("kernel", KERNELS[:2], ids=lambda k: k["type"])
def test_kernel_block_sparse_path_for_wide_data(kernel):
    # n_features * len(rows_b) above the dense-copy budget forces the scatter/gather path
    matrix = _random_sparse(70, 100_000, 0.0005, 1)
    indptr, indices, data = _csr(matrix)
    rows = np.arange(70)
    got = kernel_block(indptr, indices, data, rows, rows, n_features=100_000, kernel=kernel)
    dense = matrix.toarray()
    np.testing.assert_allclose(got, naive.kernel_dense(dense, dense, kernel), rtol=1e-12, atol=1e-12)


def test_explicit_zeros_change_nothing():
    matrix = _random_sparse(30, 8, 0.5, 2)
    indptr, indices, data = _csr(matrix)
    # the same matrix with an explicit 0.0 stored in every row at a feature the row does not use
    dense = matrix.toarray()
    p_indptr, p_indices, p_data = [0], [], []
    for i in range(30):
        cols = list(indices[indptr[i] : indptr[i + 1]])
        vals = list(data[indptr[i] : indptr[i + 1]])
        unused = np.flatnonzero(dense[i] == 0)
        if unused.size:
            cols.append(int(unused[0]))
            vals.append(0.0)
        p_indices += cols
        p_data += vals
        p_indptr.append(len(p_indices))
    padded = (np.array(p_indptr, dtype=np.int64), np.array(p_indices, dtype=np.int32), np.array(p_data))
    assert padded[2].size > data.size
    kernel = {"type": "rbf", "gamma": 0.7}
    a = kernel_block(indptr, indices, data, np.arange(30), np.arange(30), n_features=8, kernel=kernel)
    b = kernel_block(*padded, np.arange(30), np.arange(30), n_features=8, kernel=kernel)
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-14)


@pytest.mark.parametrize("out_dtype", [np.float64, np.float32])
def test_kernel_row_matches_block(out_dtype):
    matrix = _random_sparse(40, 10, 0.5, 3)
    indptr, indices, data = _csr(matrix)
    sq = row_sq_norms(indptr, data)
    rows = np.random.default_rng(4).permutation(40).astype(np.int64)
    out = np.full(40, -7.0, dtype=out_dtype)
    xbuf = np.zeros(10)
    _kernel_row(indptr, indices, data, sq, 5, rows, 3, 30, 2, 0.4, 0.0, 1, xbuf, out)
    assert not xbuf.any(), "the work vector must be left zeroed"
    want = naive.kernel_dense(matrix.toarray()[[5]], matrix.toarray()[rows], {"type": "rbf", "gamma": 0.4})[0]
    np.testing.assert_allclose(out[3:30], want[3:30], rtol=1e-6 if out_dtype == np.float32 else 1e-12)
    assert np.all(out[:3] == -7.0) and np.all(out[30:] == -7.0)


def test_resolve_gamma_scale_matches_scikit_learn():
    from sklearn.svm import SVC

    matrix = _random_sparse(80, 15, 0.3, 5)
    matrix.data = np.abs(matrix.data) + 0.5
    y = np.where(np.arange(80) % 2 == 0, 1, -1)
    model = SVC(gamma="scale").fit(matrix, y)
    indptr, _indices, data = _csr(matrix)
    assert resolve_gamma("scale", indptr, data, 15) == pytest.approx(model._gamma, rel=1e-12)
    dense_model = SVC(gamma="scale").fit(matrix.toarray(), y)
    assert resolve_gamma("scale", indptr, data, 15) == pytest.approx(dense_model._gamma, rel=1e-9)


def test_resolve_gamma_other_forms():
    indptr = np.array([0, 1, 2], dtype=np.int64)
    data = np.array([1.0, 1.0])
    assert resolve_gamma("auto", indptr, data, 4) == 0.25
    assert resolve_gamma(0.5, indptr, data, 4) == 0.5
    # constant matrix: variance 0, scikit-learn falls back to gamma = 1
    assert resolve_gamma("scale", np.array([0, 2, 4], dtype=np.int64), np.ones(4), 2) == 1.0
    for bad in ("median", -1.0, 0.0, float("nan"), True, None):
        with pytest.raises(SolverInputError, match="gamma"):
            resolve_gamma(bad, indptr, data, 4)


@pytest.mark.parametrize(
    "kernel, word",
    [
        ({"type": "laplace"}, "type"),
        ("rbf", "dict"),
        ({"type": "rbf"}, "gamma"),
        ({"type": "rbf", "gamma": "scale"}, "resolve_gamma"),
        ({"type": "rbf", "gamma": -2.0}, "gamma"),
        ({"type": "poly", "gamma": 1.0, "degree": 0}, "degree"),
        ({"type": "poly", "gamma": 1.0, "degree": 2.5}, "degree"),
        ({"type": "sigmoid", "gamma": 1.0, "coef0": float("inf")}, "coef0"),
        ({"type": "linear", "gamma": 1.0}, "takes only"),
    ],
)
def test_kernel_params_rejects_bad_dicts(kernel, word):
    with pytest.raises(SolverInputError, match=word):
        kernel_params(kernel)


def test_kernel_params_defaults():
    assert kernel_params({"type": "poly", "gamma": 0.5}) == (1, 0.5, 0.0, 3)
    assert kernel_params({"type": "linear"})[0] == 0


@pytest.mark.parametrize("kernel", KERNELS, ids=lambda k: k["type"])
def test_kernel_expansion_matches_naive(kernel):
    support = _random_sparse(25, 9, 0.5, 6)
    queries = _random_sparse(70, 9, 0.5, 7)
    coef = np.random.default_rng(8).normal(size=25)
    want = naive.kernel_dense(queries.toarray(), support.toarray(), kernel) @ coef + 0.25
    got = decision_function(*_csr(support), coef, 0.25, kernel, *_csr(queries), n_features=9)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
    # tiny batches and the sparse-times-sparse path give the same numbers
    model = KernelExpansion(*_csr(support), coef, 0.25, kernel, n_features=9, dense_limit=0, max_block=30)
    np.testing.assert_allclose(model.decision_function(*_csr(queries)), want, rtol=1e-10, atol=1e-10)


def test_kernel_expansion_several_models_and_folded_linear():
    support = _random_sparse(20, 6, 0.6, 9)
    queries = _random_sparse(33, 6, 0.6, 10)
    coef = np.random.default_rng(11).normal(size=(3, 20))
    bias = np.array([0.1, -0.2, 0.3])
    kernel = {"type": "rbf", "gamma": 0.5}
    got = decision_function(*_csr(support), coef, bias, kernel, *_csr(queries), n_features=6)
    want = naive.kernel_dense(queries.toarray(), support.toarray(), kernel) @ coef.T + bias
    assert got.shape == (33, 3)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
    w = support.toarray().T @ coef[0]
    folded = decision_function(
        None, None, None, np.zeros(0), 0.1, {"type": "linear"}, *_csr(queries), n_features=6, w=w
    )
    np.testing.assert_allclose(folded, queries.toarray() @ w + 0.1, rtol=1e-12, atol=1e-12)


def test_kernel_expansion_empty_model_predicts_bias():
    queries = _random_sparse(5, 4, 0.5, 12)
    empty = (np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int32), np.zeros(0))
    got = decision_function(*empty, np.zeros(0), -1.5, {"type": "rbf", "gamma": 1.0}, *_csr(queries), n_features=4)
    np.testing.assert_array_equal(got, np.full(5, -1.5))


@pytest.mark.service  # a Python of its own, started to import the modules
def test_scoring_and_the_api_import_no_numba():
    """Prediction runs in the API process, which must never load numba (nor anything from worker/)."""
    code = (
        "import sys\n"
        "import core.scoring.kernel, core.scoring.models, service.api.app\n"
        "assert not [m for m in sys.modules if m == 'worker' or m.startswith('worker.')]\n"
        "bad = [m for m in sys.modules if m == 'numba' or m.startswith('numba.')]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=str(__import__("pathlib").Path(__file__).parents[1]))

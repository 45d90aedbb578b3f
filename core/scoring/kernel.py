"""Decision values of a kernel expansion, with numpy and scipy only (no numba: the API process uses it).

A kernel model is an expansion over stored rows s_1..s_m (support vectors for ``smo``, the sampled basis
rows of the kernel cutting-plane solver):

    decision_c(x) = sum_k coef[c, k] * K(s_k, x) + bias[c]        (c = 0..n_models-1)

with K one of the kernels the solvers use (``worker/solvers/kernels.py``; the formulas are repeated here
on purpose so that this module imports nothing that compiles). ``coef`` may be one vector (one binary model) or a
matrix (several models over one shared set of rows, e.g. one-vs-rest over the union of their support
vectors: each K(s_k, x) is computed once for all models). For the linear kernel a folded weight vector
``w`` (SMO paper, Section 2.3) can be given instead of rows and coefficients.

Query rows are processed in batches so that at most ``max_block`` kernel values are held at once.
The inner products <s_k, x> come from a product against a dense transposed copy of the stored rows when that
copy is small (n_features * m <= ``dense_limit`` entries): dense times dense when the query rows are well
filled, else sparse times dense; otherwise from a sparse-times-sparse product; squared norms are computed once
per model.

This module must stay free of numba (and of everything in ``worker``): the test suite checks it
(tests/test_kernels.py). The API scores kernel models with it; the workers use it for training accuracy.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

_TYPES = ("linear", "poly", "rbf", "sigmoid", "precomputed")
_DENSE_QUERY_FILL = 0.25
"""Query rows this full (stored entries over rows x features) are made dense for the product with the dense
transposed stored rows (a BLAS product), when that copy exists."""


class KernelExpansion:
    """A kernel model ready for repeated prediction (build once, keep in memory, call many times)."""

    def __init__(
        self,
        sv_indptr,
        sv_indices,
        sv_data,
        coef,
        bias,
        kernel: dict,
        *,
        n_features: int,
        w=None,
        dense_limit: int = 1 << 22,
        max_block: int = 1 << 22,
    ) -> None:
        kind = kernel.get("type") if isinstance(kernel, dict) else None
        if kind not in _TYPES:
            raise ValueError(f"kernel['type'] must be one of {list(_TYPES)}, got {kind!r}")
        self.kind = kind
        self.gamma = float(kernel.get("gamma", 1.0))
        self.coef0 = float(kernel.get("coef0", 0.0))
        self.degree = int(kernel.get("degree", 3))
        if kind not in ("linear", "precomputed") and (isinstance(kernel.get("gamma"), str) or not self.gamma > 0):
            raise ValueError(f"kernel['gamma'] must be a resolved number > 0, got {kernel.get('gamma')!r}")
        self.n_features = int(n_features)
        coef = np.asarray(coef, dtype=np.float64)
        self.single = coef.ndim == 1
        self.coef = coef.reshape(1, -1) if self.single else coef
        self.bias = np.atleast_1d(np.asarray(bias, dtype=np.float64)).reshape(-1)
        if self.bias.size != self.coef.shape[0]:
            raise ValueError(f"bias has {self.bias.size} entries for {self.coef.shape[0]} models")
        self.max_block = int(max_block)
        self.w = None
        self.serials: np.ndarray | None = None
        if w is not None:
            if kind != "linear":
                raise ValueError("a folded weight vector w is only meaningful for the linear kernel")
            w = np.asarray(w, dtype=np.float64)
            self.w = w.reshape(-1, 1) if w.ndim == 1 else w.T  # (n_features, n_models)
            self.sv = None
            return
        self.sv = sp.csr_matrix(
            (np.asarray(sv_data, dtype=np.float64), np.asarray(sv_indices), np.asarray(sv_indptr)),
            shape=(len(sv_indptr) - 1, self.n_features),
        )
        if self.sv.shape[0] != self.coef.shape[1]:
            raise ValueError(f"{self.sv.shape[0]} stored rows but coef has {self.coef.shape[1]} columns")
        self.sv_sq = np.asarray(self.sv.multiply(self.sv).sum(axis=1)).reshape(-1)
        # precomputed (LIBSVM's -t 4): K(x, s_k) is x's value at s_k's serial number, s_k's column 0
        self.serials = np.rint(self.sv[:, 0].toarray().reshape(-1)).astype(np.int64) if kind == "precomputed" else None
        m = self.sv.shape[0]
        self.sv_dense_t = self.sv.T.toarray() if self.n_features * m <= dense_limit else None
        self.coef_t = np.ascontiguousarray(self.coef.T)  # (m, n_models)

    @property
    def n_rows(self) -> int:
        return 0 if self.sv is None else self.sv.shape[0]

    def decision_function(self, indptr, indices, data) -> np.ndarray:
        """Decision values of the query rows: shape (n,) for one model, (n, n_models) for several."""
        queries = sp.csr_matrix(
            (np.asarray(data, dtype=np.float64), np.asarray(indices), np.asarray(indptr)),
            shape=(len(indptr) - 1, self.n_features),
        )
        n = queries.shape[0]
        out = np.empty((n, self.coef.shape[0]), dtype=np.float64)
        if self.w is not None:
            out[:] = queries @ self.w + self.bias
        elif self.n_rows == 0:
            out[:] = self.bias
        else:
            batch = max(1, self.max_block // self.n_rows)
            for start in range(0, n, batch):
                stop = min(n, start + batch)
                block = queries[start:stop]
                out[start:stop] = self._kernel(block) @ self.coef_t + self.bias
        return out[:, 0] if self.single else out

    def kernel_values(self, indptr, indices, data) -> np.ndarray:
        """K(x, s_k) of the query rows x and the stored rows s_k, dense (n, m): for callers that combine one set of
        kernel values with several coefficient vectors over subsets of the stored rows (a search's folds)."""
        queries = sp.csr_matrix(
            (np.asarray(data, dtype=np.float64), np.asarray(indices), np.asarray(indptr)),
            shape=(len(indptr) - 1, self.n_features),
        )
        return self._kernel(queries)

    def _kernel(self, block: sp.csr_matrix) -> np.ndarray:
        """K(x, s_k) for the rows x of block, dense (len(block), m)."""
        if self.serials is not None:
            if self.serials.size and (self.serials.min() < 1 or self.serials.max() >= self.n_features):
                raise ValueError(f"precomputed kernel: serial numbers must lie in 1..{self.n_features - 1}")
            return block[:, self.serials].toarray()
        if self.sv_dense_t is not None and block.nnz >= _DENSE_QUERY_FILL * block.shape[0] * self.n_features:
            dots = block.toarray() @ self.sv_dense_t  # well-filled rows (digits: 3.4x faster than sparse x dense)
        elif self.sv_dense_t is not None:
            dots = np.asarray(block @ self.sv_dense_t)
        else:
            assert self.sv is not None, "kernel scoring without a folded w has stored rows"
            dots = (block @ self.sv.T).toarray()
        if self.kind == "linear":
            return dots
        if self.kind == "rbf":
            q_sq = np.asarray(block.multiply(block).sum(axis=1)).reshape(-1, 1)
            dist = dots  # |x|^2 + |s|^2 - 2 <x, s>, in place (no temporary of the block's size)
            dist *= -2.0
            dist += q_sq
            dist += self.sv_sq.reshape(1, -1)
            np.maximum(dist, 0.0, out=dist)
            dist *= -self.gamma
            return np.exp(dist, out=dist)
        dots *= self.gamma
        dots += self.coef0
        if self.kind == "poly":
            return dots**self.degree
        return np.tanh(dots, out=dots)


def decision_function(
    sv_indptr,
    sv_indices,
    sv_data,
    coef,
    bias,
    kernel: dict,
    q_indptr,
    q_indices,
    q_data,
    *,
    n_features: int,
    w=None,
    max_block: int = 1 << 22,
) -> np.ndarray:
    """One-shot form of :class:`KernelExpansion` (stored rows, coefficients, bias, kernel, query rows)."""
    model = KernelExpansion(
        sv_indptr, sv_indices, sv_data, coef, bias, kernel, n_features=n_features, w=w, max_block=max_block
    )
    return model.decision_function(q_indptr, q_indices, q_data)

"""Decision values and predictions of a stored model, whatever its kind (numpy and scipy only).

Kinds (``meta["kind"]``) and their arrays:
- ``linear``: ``weights`` (k, n_features), ``offsets`` (k,). Two labels: k = 1 and a positive score means
  the larger label. More: one-vs-rest, k = number of labels, argmax.
- ``kernel``: the expansion rows ``sv_indptr``/``sv_indices``/``sv_data`` (the union of the binary problems'
  support vectors or basis rows), ``coef`` (k, m) and ``offsets`` (k,); ``meta["kernel"]`` has gamma resolved.
- ``ranking``: ``weights`` (1, n_features): scores only; ordinal models also map scores to ranks with
  ``meta["thresholds"]`` between adjacent ``meta["ranks"]``.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from service.labels import label_value
from service.scoring.kernel import KernelExpansion
from service.scoring.metrics import predicted_ranks


SCORE_BLOCK_NNZ = 1 << 22
"""Linear models score a sparse matrix by blocks of rows holding about this many stored values."""


class Scorer:
    """A stored model, ready to score rows many times (the API keeps these in its cache)."""

    def __init__(self, meta: dict, arrays: dict):
        self.meta = meta
        self.checked_at = 0.0  # when the API last saw the model still stored (monotonic seconds)
        self.kind = meta.get("kind", "linear")
        self.n_features = int(meta["n_features"])
        self.labels = np.asarray(meta["labels"], dtype=np.float64) if meta.get("labels") is not None else None
        self.offsets = np.asarray(arrays["offsets"], dtype=np.float64)
        if self.kind == "kernel":
            self.expansion = KernelExpansion(
                arrays["sv_indptr"], arrays["sv_indices"], arrays["sv_data"], arrays["coef"], self.offsets,
                meta["kernel"], n_features=self.n_features,
            )
        else:
            self.weights = np.ascontiguousarray(arrays["weights"], dtype=np.float64)

    def decision_values(self, matrix) -> np.ndarray:
        """Scores of the rows (a CSR matrix, or a dense array of rows), shape (n, k)."""
        if self.kind == "kernel":
            if not sp.issparse(matrix):
                matrix = sp.csr_matrix(matrix)
            values = self.expansion.decision_function(matrix.indptr, matrix.indices, matrix.data)
            return values.reshape(matrix.shape[0], -1)
        if not sp.issparse(matrix) or matrix.nnz <= SCORE_BLOCK_NNZ:
            return np.asarray(matrix @ self.weights.T) + self.offsets
        # By blocks of rows: scipy widens float32 values to a float64 copy for the product, and a
        # training set of 10^8 stored values must not be copied whole (800 MB) to score it.
        out = np.empty((matrix.shape[0], self.weights.shape[0]))
        indptr = matrix.indptr
        start, n = 0, matrix.shape[0]
        while start < n:
            stop = int(np.searchsorted(indptr, indptr[start] + SCORE_BLOCK_NNZ, side="right")) - 1
            stop = min(n, max(stop, start + 1))
            out[start:stop] = matrix[start:stop] @ self.weights.T
            start = stop
        return out + self.offsets

    def predict_values(self, matrix: sp.csr_matrix) -> tuple[np.ndarray | None, np.ndarray]:
        """Predicted label values (None for models that only score) and scores ((n,) or (n, k))."""
        scores = self.decision_values(matrix)
        if self.kind == "ranking":
            flat = scores[:, 0]
            if self.meta.get("thresholds") is None:
                return None, flat
            return predicted_ranks(flat, np.asarray(self.meta["ranks"]), np.asarray(self.meta["thresholds"])), flat
        if scores.shape[1] == 1:
            flat = scores[:, 0]
            return np.where(flat > 0, self.labels[1], self.labels[0]), flat
        return self.labels[np.argmax(scores, axis=1)], scores

    def predict(self, matrix: sp.csr_matrix) -> tuple[list | None, list]:
        """JSON-ready labels (None for score-only models) and scores."""
        labels, scores = self.predict_values(matrix)
        return (None if labels is None else [label_value(v) for v in labels]), scores.tolist()


def csr(arrays: dict, n_features: int) -> sp.csr_matrix:
    """The CSR matrix of a data set's arrays."""
    return sp.csr_matrix(
        (np.asarray(arrays["data"]), np.asarray(arrays["indices"]), np.asarray(arrays["indptr"])),
        shape=(len(arrays["indptr"]) - 1, n_features),
    )

"""Decision values and predictions of a stored model, whatever its kind (numpy and scipy only).

The model is a ``core.storage.documents.ModelDescription`` (a stored ``ModelRecord``, or a model the
worker has just assembled). Kinds (``kind``) and their arrays:
- ``linear``: ``weights`` (k, n_features), ``offsets`` (k,). Two labels: k = 1 and a positive score means
  the larger label. More: one-vs-rest, k = number of labels, argmax.
- ``kernel``: the expansion rows ``sv_indptr``/``sv_indices``/``sv_data`` (the union of the binary problems'
  support vectors or basis rows), ``coef`` (k, m) and ``offsets`` (k,); ``kernel`` has gamma resolved.
- ``ranking``: ``weights`` (1, n_features): scores only; ordinal models also map scores to ranks with
  ``thresholds`` between adjacent ``ranks``.

Kernel models imported from LIBSVM with more than two classes are one-vs-one (``multiclass =
"ovo"``): ``coef`` (n_pairs, m) and ``offsets`` (n_pairs,) give one decision value per pair of classes
(0,1), (0,2), ..., (1,2), ... of ``ovo_labels`` (the labels in the LIBSVM file's order),
positive for the first class of the pair; the label is LIBSVM's vote (ties go to the class listed
first in the file), and the per-class scores (columns in the order of ``labels``, ascending) are the
votes plus the summed pairwise confidences squashed into (-1/3, 1/3) (scikit-learn's one-vs-rest
shape of a one-vs-one model), so that their argmax is the voted label whenever the vote is not tied.

Calibrated models (``probability``) also give class probabilities; see ``core.scoring.probability``.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from core.labels import label_value
from core.schemas.enums import ModelKind, Task
from core.scoring.kernel import KernelExpansion
from core.scoring.metrics import predicted_ranks
from core.scoring.probability import ovr_probabilities, pairwise_coupling, softmax_probabilities
from core.storage.documents import ModelDescription

SCORE_BLOCK_NNZ = 1 << 22
"""Linear models score a sparse matrix by blocks of rows holding about this many stored values."""


class Scorer:
    """A stored model, ready to score rows many times (the API keeps these in its cache)."""

    def __init__(self, model: ModelDescription, arrays: dict):
        self.model = model
        self.kind = model.kind
        self.n_features = int(model.n_features)
        self.labels = np.asarray(model.labels, dtype=np.float64) if model.labels is not None else None
        self.offsets = np.asarray(arrays["offsets"], dtype=np.float64)
        self.one_vs_one = model.one_vs_one
        self.calibration = model.calibration  # typed once: predict requests with probabilities read it each time
        if self.one_vs_one:
            self.vote_labels = np.asarray(model.ovo_labels, dtype=np.float64)
            n_classes = self.vote_labels.size
            self.pairs = [(i, j) for i in range(n_classes) for j in range(i + 1, n_classes)]
            self.to_ascending = np.argsort(
                self.vote_labels, kind="stable"
            )  # column r of the answer: class to_ascending[r]
        if self.kind == ModelKind.kernel:
            self.expansion = KernelExpansion(
                arrays["sv_indptr"],
                arrays["sv_indices"],
                arrays["sv_data"],
                arrays["coef"],
                self.offsets,
                model.kernel or {},
                n_features=self.n_features,
            )
        else:
            # (n_features, k), rows contiguous: what scipy's product of a CSR matrix with a dense one reads. It
            # copied the transpose of (k, n_features) weights at every call: 15 ms to score one row with
            # sector's 105 x 55,197 model, 0.01 ms from this copy made once.
            self.weights_t = np.ascontiguousarray(np.asarray(arrays["weights"], dtype=np.float64).T)

    def decision_values(self, matrix) -> np.ndarray:
        """Scores of the rows (a CSR matrix, or a dense array of rows), shape (n, k)."""
        if self.kind == ModelKind.kernel:
            if not sp.issparse(matrix):
                matrix = sp.csr_matrix(matrix)
            values = self.expansion.decision_function(matrix.indptr, matrix.indices, matrix.data)
            return values.reshape(matrix.shape[0], self.offsets.size)  # explicit width: a request may have no rows
        if not sp.issparse(matrix) or matrix.nnz <= SCORE_BLOCK_NNZ:
            return np.asarray(matrix @ self.weights_t) + self.offsets
        # By blocks of rows: scipy widens float32 values to a float64 copy for the product, and a
        # training set of 10^8 stored values must not be copied whole (800 MB) to score it.
        out = np.empty((matrix.shape[0], self.weights_t.shape[1]))
        indptr = matrix.indptr
        start, n = 0, matrix.shape[0]
        while start < n:
            stop = int(np.searchsorted(indptr, indptr[start] + SCORE_BLOCK_NNZ, side="right")) - 1
            stop = min(n, max(stop, start + 1))
            out[start:stop] = matrix[start:stop] @ self.weights_t
            start = stop
        return out + self.offsets

    def predict_values(self, matrix: sp.csr_matrix, pairwise: bool = False) -> tuple[np.ndarray | None, np.ndarray]:
        """Predicted label values (None for models that only score) and scores ((n,) or (n, k)); ``pairwise``: a
        one-vs-one model's scores are its ``pairwise_values``."""
        scores = self.decision_values(matrix)
        if self.kind == ModelKind.ranking:
            flat = scores[:, 0]
            if self.model.thresholds is None:
                return None, flat
            return predicted_ranks(flat, np.asarray(self.model.ranks), np.asarray(self.model.thresholds)), flat
        if self.model.task == Task.regression:  # the score is the predicted value
            flat = scores[:, 0]
            return flat, flat
        if self.one_vs_one:
            voted_labels, voted = self._vote(scores)
            return voted_labels, self.pairwise_values(scores) if pairwise else voted
        labels = self.labels
        assert labels is not None, "a classification model has labels"
        if scores.shape[1] == 1:
            flat = scores[:, 0]
            return np.where(flat > 0, labels[1], labels[0]), flat
        return labels[np.argmax(scores, axis=1)], scores

    def _vote(self, pairwise: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """One-vs-one: the voted labels, and per-class scores (votes + squashed summed confidences)."""
        votes, scores = one_vs_one_votes(pairwise, self.vote_labels.size)
        return self.vote_labels[np.argmax(votes, axis=1)], scores[:, self.to_ascending]

    def pairwise_values(self, values: np.ndarray) -> np.ndarray:
        """One-vs-one models: from ``decision_values``, the decision value of every pair of labels (a, b), a < b in
        the ascending order of ``labels``, pairs ordered (0,1), (0,2), ..., (1,2), ..., positive for label a
        (scikit-learn's SVC with ``decision_function_shape="ovo"``), shape (n, n_pairs). A LIBSVM import's pairs,
        numbered in its file's label order, are renumbered (and their signs flipped where the order of the two
        labels is reversed)."""
        position = np.argsort(self.to_ascending)  # vote class -> its column among the ascending labels
        n_classes = self.vote_labels.size
        column = {pair: k for k, pair in enumerate((a, b) for a in range(n_classes) for b in range(a + 1, n_classes))}
        out = np.empty_like(values)
        for index, (i, j) in enumerate(self.pairs):
            a, b = int(position[i]), int(position[j])
            if a < b:
                out[:, column[(a, b)]] = values[:, index]
            else:
                out[:, column[(b, a)]] = -values[:, index]
        return out

    @property
    def has_probabilities(self) -> bool:
        """Whether the model was calibrated (trained with ``probability: true``, or imported with a calibration)."""
        return self.calibration is not None

    def probabilities(self, matrix) -> np.ndarray:
        """Class probabilities (n, n_classes), columns in the order of ``labels``; the model must be calibrated."""
        calibration = self.calibration
        assert calibration is not None, "a calibrated model (has_probabilities)"
        scores = self.decision_values(matrix)
        if calibration.method == "pairwise_coupling":
            coupled = pairwise_coupling(scores, calibration.A, calibration.B, self.vote_labels.size)
            return coupled[:, self.to_ascending]
        if calibration.method == "multinomial":
            return softmax_probabilities(scores, calibration.weights, calibration.intercepts)
        return ovr_probabilities(scores, calibration.A, calibration.B)

    def predict(self, matrix: sp.csr_matrix, pairwise: bool = False) -> tuple[list | None, list]:
        """JSON-ready labels (None for score-only models) and scores (``pairwise``: see ``predict_values``)."""
        labels, scores = self.predict_values(matrix, pairwise)
        return (None if labels is None else [label_value(v) for v in labels]), scores.tolist()


def one_vs_one_votes(pairwise: np.ndarray, n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """Votes and per-class scores of one-vs-one decision values (n, n_pairs), pairs (0,1), (0,2), ..., (1,2), ...
    positive for the first class of the pair: the votes (n, n_classes), and the votes plus the summed pairwise
    confidences squashed into (-1/3, 1/3) (scikit-learn's one-vs-rest shape of a one-vs-one model, whose argmax
    is the voted class whenever the vote is not tied). The vote's label is ``argmax(votes)``: ties go to the
    class numbered first, as LIBSVM's."""
    votes = np.zeros((pairwise.shape[0], n_classes))
    confidence = np.zeros_like(votes)
    index = 0
    for i in range(n_classes):
        for j in range(i + 1, n_classes):
            wins = pairwise[:, index] > 0
            votes[wins, i] += 1
            votes[~wins, j] += 1
            confidence[:, i] += pairwise[:, index]
            confidence[:, j] -= pairwise[:, index]
            index += 1
    return votes, votes + confidence / (3.0 * (np.abs(confidence) + 1.0))


def csr(arrays: dict, n_features: int) -> sp.csr_matrix:
    """The CSR matrix of a data set's arrays."""
    return sp.csr_matrix(
        (np.asarray(arrays["data"]), np.asarray(arrays["indices"]), np.asarray(arrays["indptr"])),
        shape=(len(arrays["indptr"]) - 1, n_features),
    )

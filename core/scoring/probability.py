"""Class probabilities from decision values: Platt's sigmoid, and the ways several sigmoids combine.

A calibrated model stores its calibration as its ``probability`` (``Calibration``); two-label models and the
``platt_ovr``/``pairwise_coupling`` methods hold one sigmoid per decision value:

    P(positive | f) = 1 / (1 + exp(A * f + B))

(Platt, "Probabilistic outputs for support vector machines", 1999; A < 0 when larger scores mean
the positive class). How the sigmoids become one probability per class depends on the method:

- ``platt_ovr`` (models trained here, and LIBLINEAR's logistic-regression models on import): two
  labels: P(larger label) is the sigmoid of the one score, P(smaller) its complement. More labels:
  each class's one-vs-rest score gives p_k, and the p_k are divided by their sum (the coupling
  scikit-learn's ``CalibratedClassifierCV`` uses for one-vs-rest).
- ``multinomial`` (multi-class models trained here): the K one-vs-rest scores f go through one
  softmax, P(k | f) = exp(z_k) / sum_j exp(z_j) with z = W f + c, W a K x K matrix and c a K-vector
  fitted by the workers on cross-validated scores (multinomial logistic regression on the scores,
  "matrix scaling"). Unlike sigmoids taken one class at a time, the softmax learns how the classes'
  scores trade off against each other; on letter (26 classes) it halves the log-loss of normalized
  one-vs-rest sigmoids. Its argmax can differ from the label ``predict`` answers, which is the
  argmax of the scores (as LIBSVM's ``-b 1`` probabilities can differ from its vote).
- ``pairwise_coupling`` (LIBSVM multi-class models imported with ``probA``/``probB``): one sigmoid
  per pair of classes gives r_ij = P(i | i or j), and the class probabilities solve Wu, Lin and Weng's
  second coupling problem (JMLR 5, 2004, Section 4, eq. (18)): minimize sum_i sum_{j != i}
  (r_ji p_i - r_ij p_j)^2 subject to sum p = 1, by their fixed-point iteration.

``fit_sigmoid`` fits (A, B) to decision values and labels by maximum likelihood with Platt's smoothed
targets, using the Newton method with backtracking of Lin, Lin and Weng ("A note on Platt's
probabilistic outputs for support vector machines", Machine Learning 68, 2007, Algorithm 1).
numpy only: the API applies the sigmoids, the workers fit them.
"""

from __future__ import annotations

import numpy as np

SIGMOID_FLOOR = 1e-7
"""Pairwise probabilities are kept in [floor, 1 - floor] before coupling, so no ratio divides by zero."""


LOGISTIC_SOURCE = "logistic regression: P = 1 / (1 + exp(-decision value)), no calibration"


LOGISTIC_A, LOGISTIC_B = -1.0, 0.0
"""The sigmoid of a logistic regression's score: P = 1 / (1 + exp(-score)), its scores being log-odds already."""


def logistic_calibration(n_scores: int, pairwise: bool = False) -> dict:
    """The calibration of a logistic-regression model (trained with dcd's ``loss: logistic``, or LIBLINEAR's -s 0,
    6, 7 on import): each sigmoid is (LOGISTIC_A, LOGISTIC_B), as LIBLINEAR's ``predict_probability``; one per score
    column, one-vs-rest (``platt_ovr``) or per pair (``pairwise``)."""
    return {
        "method": "pairwise_coupling" if pairwise else "platt_ovr",
        "A": [LOGISTIC_A] * n_scores,
        "B": [LOGISTIC_B] * n_scores,
        "source": LOGISTIC_SOURCE,
    }


def sigmoid(scores: np.ndarray, A: float, B: float) -> np.ndarray:
    """1 / (1 + exp(A * f + B)) for every score f, without overflow for any sign of A * f + B."""
    z = A * np.asarray(scores, dtype=np.float64) + B
    out = np.empty_like(z)
    positive = z >= 0
    e = np.exp(-z[positive])
    out[positive] = e / (1.0 + e)
    out[~positive] = 1.0 / (1.0 + np.exp(z[~positive]))
    return out


def fit_sigmoid(
    scores: np.ndarray,
    positive: np.ndarray,
    *,
    max_iter: int = 100,
    min_step: float = 1e-10,
    sigma: float = 1e-12,
    eps: float = 1e-5,
) -> tuple[float, float]:
    """(A, B) maximizing the likelihood of Platt's targets given the decision values.

    ``positive`` tells which rows are of the positive class. Targets are Platt's smoothed ones,
    (N+ + 1) / (N+ + 2) for positives and 1 / (N- + 2) for negatives, so the fit never runs off to
    infinite slopes on separable data. Newton steps on the convex negative log-likelihood, with a
    small ridge ``sigma`` on the Hessian and step halving until the objective decreases sufficiently;
    stops when the gradient's largest entry is below ``eps``.
    """
    f = np.asarray(scores, dtype=np.float64)
    positive = np.asarray(positive, dtype=bool)
    n_pos = int(positive.sum())
    n_neg = positive.size - n_pos
    target = np.where(positive, (n_pos + 1.0) / (n_pos + 2.0), 1.0 / (n_neg + 2.0))
    A, B = 0.0, float(np.log((n_neg + 1.0) / (n_pos + 1.0)))

    def objective(a: float, b: float) -> float:
        # sum of t*z + log(1 + exp(-z)) (the negative log-likelihood), stable for both signs of z
        z = a * f + b
        tail = np.log1p(np.exp(-np.abs(z)))
        return float(np.sum(np.where(z >= 0, target * z + tail, (target - 1.0) * z + tail)))

    value = objective(A, B)
    for _ in range(max_iter):
        p = sigmoid(f, A, B)  # = 1 / (1 + exp(z))
        q = 1.0 - p
        d2 = p * q
        h11 = sigma + float(np.sum(f * f * d2))
        h22 = sigma + float(np.sum(d2))
        h21 = float(np.sum(f * d2))
        d1 = target - p
        g1 = float(np.sum(f * d1))
        g2 = float(np.sum(d1))
        if abs(g1) < eps and abs(g2) < eps:
            break
        det = h11 * h22 - h21 * h21
        dA = -(h22 * g1 - h21 * g2) / det
        dB = -(-h21 * g1 + h11 * g2) / det
        gd = g1 * dA + g2 * dB
        step = 1.0
        while step >= min_step:
            newA, newB = A + step * dA, B + step * dB
            new_value = objective(newA, newB)
            if new_value < value + 1e-4 * step * gd:
                A, B, value = newA, newB, new_value
                break
            step /= 2.0
        else:
            break  # no step decreases the objective: as good as it gets
    return float(A), float(B)


def ovr_probabilities(scores: np.ndarray, A, B) -> np.ndarray:
    """Class probabilities (n, n_classes) from one-vs-rest scores (n,) or (n, k) and one sigmoid per score column."""
    scores = np.asarray(scores, dtype=np.float64)
    A = np.atleast_1d(np.asarray(A, dtype=np.float64))
    B = np.atleast_1d(np.asarray(B, dtype=np.float64))
    if scores.ndim == 1 or scores.shape[1] == 1:
        p = sigmoid(scores.reshape(-1), A[0], B[0])
        return np.column_stack([1.0 - p, p])
    p = np.column_stack([sigmoid(scores[:, k], A[k], B[k]) for k in range(scores.shape[1])])
    total = p.sum(axis=1, keepdims=True)
    uniform = total[:, 0] <= 0.0
    total[uniform] = 1.0
    p[uniform] = 1.0 / p.shape[1]
    return p / total


def logistic_probabilities(scores: np.ndarray) -> np.ndarray:
    """Class probabilities (n, n_classes) of a logistic regression's one-vs-rest scores (``logistic_calibration``)."""
    n_scores = 1 if np.ndim(scores) == 1 else np.shape(scores)[1]
    return ovr_probabilities(scores, [LOGISTIC_A] * n_scores, [LOGISTIC_B] * n_scores)


def probability_scores(probabilities: np.ndarray, y: np.ndarray, labels: np.ndarray) -> dict:
    """{log_loss, brier} of class probabilities (n, n_labels; columns in the order of ``labels``) against the true
    labels ``y``; a row whose label is not among ``labels`` has probability 0 (clipped) for it."""
    probabilities = np.asarray(probabilities, dtype=np.float64)
    column = np.searchsorted(labels, y)
    known = (column < len(labels)) & (np.asarray(labels)[np.minimum(column, len(labels) - 1)] == y)
    truth = np.zeros_like(probabilities)
    truth[np.flatnonzero(known), column[known]] = 1.0
    chosen = np.where(known, probabilities[np.arange(y.size), np.minimum(column, len(labels) - 1)], 0.0)
    brier = float(np.mean(np.sum((probabilities - truth) ** 2, axis=1) + np.where(known, 0.0, 1.0)))
    return {"log_loss": float(-np.mean(np.log(np.clip(chosen, 1e-15, 1.0)))), "brier": brier}


def softmax_probabilities(scores: np.ndarray, weights, intercepts) -> np.ndarray:
    """Class probabilities (n, K) from one-vs-rest scores (n, K): softmax(scores @ weights.T + intercepts) per row."""
    z = np.asarray(scores, dtype=np.float64) @ np.asarray(weights, dtype=np.float64).T
    z += np.asarray(intercepts, dtype=np.float64)
    z -= z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


COUPLING_BLOCK_ROWS = 2048
"""Rows coupled at once (their k x k matrices are held together)."""


def pairwise_coupling(pairwise: np.ndarray, A, B, n_classes: int, *, max_iter: int | None = None) -> np.ndarray:
    """Class probabilities (n, n_classes) from pairwise decision values (n, n_pairs), pairs (0,1), (0,2), ..., (1,2), ...

    The decision value of pair (i, j) is positive for class i; its sigmoid gives r_ij = P(i | i or j).
    Rows are coupled in blocks, each row by its own fixed-point iteration (``_couple``).
    """
    pairwise = np.asarray(pairwise, dtype=np.float64)
    A = np.asarray(A, dtype=np.float64).reshape(1, -1)
    B = np.asarray(B, dtype=np.float64).reshape(1, -1)
    k = n_classes
    first, second = np.triu_indices(k, 1)  # pair index -> (i, j), in the order (0,1), (0,2), ..., (1,2), ...
    iterations = max_iter or max(100, k)
    eps = 0.005 / k
    out = np.empty((pairwise.shape[0], k))
    for start in range(0, pairwise.shape[0], COUPLING_BLOCK_ROWS):
        block = pairwise[start : start + COUPLING_BLOCK_ROWS]
        values = np.clip(sigmoid(block * A + B, 1.0, 0.0), SIGMOID_FLOOR, 1.0 - SIGMOID_FLOOR)
        r = np.zeros((block.shape[0], k, k))
        r[:, first, second] = values
        r[:, second, first] = 1.0 - values
        out[start : start + block.shape[0]] = _couple(r, iterations, eps)
    return out


def _couple(r: np.ndarray, iterations: int, eps: float) -> np.ndarray:
    """Wu-Lin-Weng's second method for each row's r (n, k, k): Q p = (p'Q p) 1 with sum p = 1, by
    coordinate-wise fixed-point updates; a row stops once its largest |Qp - p'Qp| is below eps."""
    n, k, _ = r.shape
    rt = np.transpose(r, (0, 2, 1))
    Q = -(rt * r)  # Q[t, j] = -r[j, t] * r[t, j] for j != t
    diagonal = np.arange(k)
    Q[:, diagonal, diagonal] = (rt**2).sum(axis=2) - r[:, diagonal, diagonal] ** 2  # sum_{j != t} r[j, t]^2
    p = np.full((n, k), 1.0 / k)
    Qp = np.einsum("ntj,nj->nt", Q, p)
    pQp = np.sum(p * Qp, axis=1)
    active = np.arange(n)
    for _ in range(iterations):
        still = np.max(np.abs(Qp[active] - pQp[active, None]), axis=1) >= eps
        active = active[still]
        if active.size == 0:
            break
        q, qp, pqp, pa = Q[active], Qp[active], pQp[active], p[active]
        for t in range(k):
            diff = (-qp[:, t] + pqp) / q[:, t, t]
            pa[:, t] += diff
            pqp = (pqp + diff * (diff * q[:, t, t] + 2.0 * qp[:, t])) / (1.0 + diff) / (1.0 + diff)
            qp = (qp + diff[:, None] * q[:, t, :]) / (1.0 + diff[:, None])
            pa /= 1.0 + diff[:, None]
        Qp[active], pQp[active], p[active] = qp, pqp, pa
    return p

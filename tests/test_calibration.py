"""Calibration maps fitted by the workers (``worker.training.calibration``) and applied by the API
(``core.scoring.probability``): Platt's sigmoid for two labels, one softmax over the one-vs-rest
scores for more, and the JSON model document's checks of a calibration's shape."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from core.schemas.model_files import ModelDocument
from core.scoring.probability import fit_sigmoid, ovr_probabilities, sigmoid, softmax_probabilities
from worker.training.calibration import fit_softmax


def log_loss(probabilities: np.ndarray, classes: np.ndarray) -> float:
    return float(-np.mean(np.log(np.clip(probabilities[np.arange(classes.size), classes], 1e-15, 1.0))))


def draw_classes(rng, probabilities: np.ndarray) -> np.ndarray:
    cumulative = np.cumsum(probabilities, axis=1)
    return (rng.random((probabilities.shape[0], 1)) > cumulative).sum(axis=1).clip(0, probabilities.shape[1] - 1)


def test_fit_sigmoid_recovers_the_slope_and_offset_that_drew_the_labels():
    rng = np.random.default_rng(0)
    scores = rng.normal(scale=2.0, size=40_000)
    positive = rng.random(scores.size) < sigmoid(scores, -1.5, 0.4)
    A, B = fit_sigmoid(scores, positive)
    assert A == pytest.approx(-1.5, abs=0.05) and B == pytest.approx(0.4, abs=0.05)


def test_fit_softmax_recovers_the_softmax_that_drew_the_classes():
    rng = np.random.default_rng(1)
    k, n = 4, 60_000
    W = np.array([[2.0, -0.5, 0.0, 0.3], [0.0, 1.0, 0.4, 0.0], [-0.2, 0.0, 1.5, 0.0], [0.0, 0.5, 0.0, 0.8]])
    c = np.array([0.3, -0.2, 0.0, 0.1])
    scores = rng.normal(size=(n, k)) * np.array([1.0, 3.0, 0.5, 2.0]) + np.array([0.0, 1.0, -1.0, 0.5])
    truth = softmax_probabilities(scores, W, c)
    classes = draw_classes(rng, truth)
    fitted_W, fitted_c = fit_softmax(scores, classes)
    fitted = softmax_probabilities(scores, fitted_W, fitted_c)
    assert np.allclose(fitted.sum(axis=1), 1.0)
    assert np.mean(np.abs(fitted - truth)) < 0.01
    # the raw-score weights, folded back from standardized ones, up to what a softmax cannot see: one vector
    # added to every row (the same shift of every class's logit)
    assert np.max(np.abs((fitted_W - fitted_W.mean(axis=0)) - (W - W.mean(axis=0)))) < 0.1


def test_softmax_beats_normalized_sigmoids_when_scores_trade_off():
    # one-vs-rest scores whose classes depend on each other's scores: a sigmoid per column cannot see that
    rng = np.random.default_rng(2)
    k, n = 5, 20_000
    scores = rng.normal(size=(2 * n, k))
    truth = softmax_probabilities(scores, 3.0 * np.eye(k) - 1.0, np.zeros(k))
    classes = draw_classes(rng, truth)
    train, test = slice(0, n), slice(n, 2 * n)
    W, c = fit_softmax(scores[train], classes[train])
    A, B = zip(*(fit_sigmoid(scores[train, j], classes[train] == j) for j in range(k)))
    softmax_loss = log_loss(softmax_probabilities(scores[test], W, c), classes[test])
    sigmoid_loss = log_loss(ovr_probabilities(scores[test], A, B), classes[test])
    best_possible = log_loss(truth[test], classes[test])
    assert softmax_loss < sigmoid_loss
    assert softmax_loss < best_possible + 0.01


def test_softmax_probabilities_do_not_overflow():
    p = softmax_probabilities(np.array([[1e6, -1e6, 0.0]]), np.eye(3), np.zeros(3))
    assert np.all(np.isfinite(p)) and p[0, 0] == pytest.approx(1.0)


def test_fit_softmax_copes_with_a_constant_score_column():
    rng = np.random.default_rng(3)
    scores = rng.normal(size=(300, 3))
    scores[:, 2] = 1.0
    W, c = fit_softmax(scores, rng.integers(0, 3, size=300))
    assert np.all(np.isfinite(W)) and np.all(np.isfinite(c))


def document(**calibration) -> dict:
    return {
        "format": "hinge-model",
        "format_version": 1,
        "kind": "linear",
        "task": "classification",
        "multiclass": "ovr",
        "labels": [1.0, 2.0, 3.0],
        "n_features": 2,
        "zero_based": False,
        "weights": [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]],
        "offsets": [0.0, 0.0, 0.0],
        "probability": calibration,
    }


def test_model_documents_carry_a_softmax_calibration_of_the_right_shape():
    ModelDocument.model_validate(document(method="multinomial", weights=np.eye(3).tolist(), intercepts=[0.0, 0.1, 0.2]))
    with pytest.raises(ValidationError, match="3 x 3"):
        ModelDocument.model_validate(document(method="multinomial", weights=np.eye(2).tolist(), intercepts=[0, 0]))
    with pytest.raises(ValidationError, match="3 x 3"):
        ModelDocument.model_validate(document(method="multinomial", A=[1.0, 1.0, 1.0], B=[0.0, 0.0, 0.0]))
    with pytest.raises(ValidationError, match="one entry per score"):
        ModelDocument.model_validate(document(method="platt_ovr", weights=np.eye(3).tolist(), intercepts=[0, 0, 0]))
    binary = document(method="multinomial", weights=[[1.0]], intercepts=[0.0])
    binary.update(labels=[1.0, 2.0], weights=[[1.0, 0.0]], offsets=[0.0], multiclass=None)
    with pytest.raises(ValidationError, match="more than two labels"):
        ModelDocument.model_validate(binary)

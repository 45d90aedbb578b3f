"""Evaluation metrics equal scikit-learn's on the same predictions; the evaluate route uses them."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.stats import kendalltau
from sklearn import metrics as skm
from sklearn.datasets import load_breast_cancer, load_wine

from core.scoring import metrics
from tests.helpers import to_svmlight, upload, wait_job


def test_binary_report_matches_sklearn():
    rng = np.random.default_rng(0)
    true = np.where(rng.random(500) > 0.4, 1.0, -1.0)
    scores = true * 0.5 + rng.normal(size=500)
    predicted = np.where(scores > 0, 1.0, -1.0)
    report = metrics.classification_report(true, predicted, scores, np.array([-1.0, 1.0]))
    assert report["accuracy"] == pytest.approx(skm.accuracy_score(true, predicted))
    assert report["precision"] == pytest.approx(skm.precision_score(true, predicted))
    assert report["recall"] == pytest.approx(skm.recall_score(true, predicted))
    assert report["f1"] == pytest.approx(skm.f1_score(true, predicted))
    assert report["roc_auc"] == pytest.approx(skm.roc_auc_score(true, scores))
    assert report["confusion_matrix"]["matrix"] == skm.confusion_matrix(true, predicted, labels=[-1, 1]).tolist()
    k = int((true > 0).sum())
    assert report["prbep"] == pytest.approx(np.mean(true[np.argsort(-scores)[:k]] > 0))


@pytest.mark.parametrize("ties", [False, True])
def test_roc_curve_matches_sklearn(ties):
    rng = np.random.default_rng(3)
    true = np.where(rng.random(400) > 0.5, 1.0, -1.0)
    scores = true * 0.7 + rng.normal(size=400)
    if ties:
        scores = np.round(scores, 1)  # equal scores move together: a diagonal step
    curve = metrics.roc_curve(scores, true > 0)
    fpr, tpr, _ = skm.roc_curve(true, scores)
    assert curve is not None
    np.testing.assert_allclose(curve["fpr"], fpr)
    np.testing.assert_allclose(curve["tpr"], tpr)
    assert np.trapezoid(curve["tpr"], curve["fpr"]) == pytest.approx(skm.roc_auc_score(true, scores))
    thinned = metrics.roc_curve(scores, true > 0, max_points=11)
    assert thinned is not None and len(thinned["fpr"]) == 11
    assert (thinned["fpr"][0], thinned["tpr"][0], thinned["fpr"][-1], thinned["tpr"][-1]) == (0.0, 0.0, 1.0, 1.0)
    assert metrics.roc_curve(scores, np.zeros(400, dtype=bool)) is None


def test_multiclass_report_matches_sklearn():
    rng = np.random.default_rng(1)
    true = rng.integers(1, 4, 600).astype(float)
    scores = rng.normal(size=(600, 3)) + np.eye(3)[true.astype(int) - 1]
    labels = np.array([1.0, 2.0, 3.0])
    predicted = labels[np.argmax(scores, axis=1)]
    report = metrics.classification_report(true, predicted, scores, labels)
    assert report["accuracy"] == pytest.approx(skm.accuracy_score(true, predicted))
    assert report["f1"] == pytest.approx(skm.f1_score(true, predicted, average="macro"))
    assert report["precision"] == pytest.approx(skm.precision_score(true, predicted, average="macro"))
    assert report["confusion_matrix"]["matrix"] == skm.confusion_matrix(true, predicted, labels=labels).tolist()
    ovr = np.mean([skm.roc_auc_score(true == v, scores[:, k]) for k, v in enumerate(labels)])
    assert report["roc_auc"] == pytest.approx(ovr)


def test_pairwise_metrics():
    rng = np.random.default_rng(2)
    y = rng.integers(0, 4, 300).astype(float)
    scores = y + rng.normal(size=300)
    qid = np.repeat(np.arange(30), 10)
    pairs = [(i, j) for i in range(300) for j in range(300) if y[i] > y[j]]
    brute = np.mean([1.0 if scores[i] > scores[j] else 0.5 if scores[i] == scores[j] else 0.0 for i, j in pairs])
    assert metrics.pairwise_accuracy(scores, y) == pytest.approx(brute)
    within = [(i, j) for i, j in pairs if qid[i] == qid[j]]
    brute_q = np.mean([1.0 if scores[i] > scores[j] else 0.0 for i, j in within])
    assert metrics.pairwise_accuracy(scores, y, qid) == pytest.approx(brute_q)
    assert metrics.kendall_tau(scores, y) == pytest.approx(kendalltau(scores, y).statistic)


def _svmlight(X, y):
    matrix = sp.csr_matrix(X)
    return to_svmlight(matrix.indptr, matrix.indices, matrix.data, y)


def test_evaluate_route_matches_sklearn_on_predictions(http):
    X, y = load_breast_cancer(return_X_y=True)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    y = np.where(y == 1, 1.0, -1.0)
    train = upload(http, _svmlight(X[::2], y[::2])).json()
    test = upload(http, _svmlight(X[1::2], y[1::2])).json()
    job = http.post("/v1/jobs", json={"dataset_id": train["id"], "solver": "dcd", "params": {"C": 0.1}}).json()
    model_id = wait_job(http, job["id"])["model_id"]
    report = http.post(f"/v1/models/{model_id}/evaluate", json={"dataset_id": test["id"]})
    assert report.status_code == 200, report.text
    report = report.json()
    answer = http.post(f"/v1/models/{model_id}/predict", json={"instances": X[1::2].tolist()}).json()
    predicted, scores, true = np.array(answer["labels"]), np.array(answer["scores"]), y[1::2]
    assert report["n_samples"] == true.size and report["task"] == "classification"
    assert report["accuracy"] == pytest.approx(skm.accuracy_score(true, predicted))
    assert report["f1"] == pytest.approx(skm.f1_score(true, predicted))
    assert report["roc_auc"] == pytest.approx(skm.roc_auc_score(true, scores))
    fpr, tpr, _ = skm.roc_curve(true, scores)
    np.testing.assert_allclose(report["roc_curve"]["fpr"], fpr)
    np.testing.assert_allclose(report["roc_curve"]["tpr"], tpr)
    assert report["confusion_matrix"]["matrix"] == skm.confusion_matrix(true, predicted, labels=[-1, 1]).tolist()
    assert report["log_loss"] is None and report["brier"] is None  # no probabilities
    missing = http.post(f"/v1/models/{model_id}/evaluate", json={"dataset_id": "ds_nope"})
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "dataset_not_found"


def test_evaluate_multiclass_kernel_model(http):
    X, y = load_wine(return_X_y=True)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    dataset = upload(http, _svmlight(X, y.astype(float))).json()
    job = http.post(
        "/v1/jobs",
        json={
            "dataset_id": dataset["id"],
            "solver": "smo",
            "params": {"C": 1.0, "kernel": {"type": "rbf", "gamma": 0.1}},
        },
    ).json()
    model_id = wait_job(http, job["id"], timeout=120)["model_id"]
    report = http.post(f"/v1/models/{model_id}/evaluate", json={"dataset_id": dataset["id"]}).json()
    answer = http.post(f"/v1/models/{model_id}/predict", json={"instances": X.tolist()}).json()
    assert report["accuracy"] == pytest.approx(skm.accuracy_score(y, answer["labels"]))
    assert report["f1"] == pytest.approx(skm.f1_score(y, answer["labels"], average="macro"))
    assert np.array(report["confusion_matrix"]["matrix"]).sum() == y.size
    assert report["roc_curve"] is None  # two classes only


def test_evaluate_a_logistic_regression_scores_its_probabilities(http):
    """log_loss and brier of the model's probabilities, as scikit-learn computes them (three classes)."""
    X, y = load_wine(return_X_y=True)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    dataset = upload(http, _svmlight(X, y.astype(float))).json()
    body = {"dataset_id": dataset["id"], "solver": "dcd", "params": {"C": 0.3, "loss": "logistic"}}
    model_id = wait_job(http, http.post("/v1/jobs", json=body).json()["id"])["model_id"]
    report = http.post(f"/v1/models/{model_id}/evaluate", json={"dataset_id": dataset["id"]}).json()
    answer = http.post(f"/v1/models/{model_id}/predict", json={"instances": X.tolist(), "probabilities": True}).json()
    probabilities = np.array(answer["probabilities"])
    assert report["log_loss"] == pytest.approx(skm.log_loss(y, probabilities), rel=1e-9)
    truth = np.eye(3)[y]
    assert report["brier"] == pytest.approx(np.mean(np.sum((probabilities - truth) ** 2, axis=1)), rel=1e-9)

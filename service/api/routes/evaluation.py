"""POST /v1/models/{id}/evaluate: metrics of a model on a data set of the same tenant."""

from __future__ import annotations

import numpy as np
from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from core.schemas.base import ErrorResponse
from core.schemas.enums import Task
from core.schemas.evaluation import EvaluateRequest, EvaluationOut
from core.scoring import metrics
from core.scoring.models import csr
from core.scoring.probability import probability_scores
from core.storage.documents import DatasetRecord
from service.api.deps import DatasetStoreDep, ModelIdPath, ModelStoreDep, TenantDep
from service.api.errors import not_found
from service.api.predict import LoadedModel
from service.api.routes.models import ERRORS, load_model

router = APIRouter(prefix="/v1/models", tags=["models"])


def aligned_matrix(arrays: dict, dataset: DatasetRecord, n_model_features: int):
    """The data set's rows with the model's feature count: unseen features dropped, missing ones zero."""
    matrix = csr(arrays, dataset.n_features)
    if dataset.n_features > n_model_features:
        return matrix[:, :n_model_features].tocsr()
    if dataset.n_features < n_model_features:
        matrix.resize((matrix.shape[0], n_model_features))
    return matrix


def evaluate_arrays(loaded: LoadedModel, arrays: dict, dataset: DatasetRecord) -> dict:
    """Every metric that applies to the model's task."""
    model = loaded.scorer
    matrix = aligned_matrix(arrays, dataset, model.n_features)
    y = np.asarray(arrays["y"], dtype=np.float64)
    predicted, scores = model.predict_values(matrix)
    task = loaded.record.task or Task.classification.value
    result: dict = {"n_samples": int(y.size), "task": task}
    if task == Task.classification:
        assert predicted is not None and model.labels is not None, "a classification model predicts labels"
        result.update(metrics.classification_report(y, predicted, scores, model.labels))
        if model.has_probabilities:
            result.update(probability_scores(model.probabilities(matrix), y, model.labels))
        return result
    if task == Task.one_class:  # outliers predicted; against labels -1/+1 when the data set has them
        assert predicted is not None, "a one-class model predicts labels"
        result["outlier_fraction"] = float(np.mean(predicted < 0))
        labelled = set(np.unique(y).tolist()) <= {-1.0, 1.0}
        if labelled:
            result.update(metrics.classification_report(y, predicted, scores, np.array([-1.0, 1.0])))
        result["score_histogram"] = metrics.score_histogram(scores, y if labelled else None)
        return result
    if task == Task.regression:
        result.update(metrics.regression_report(scores, y))
        result["predicted_vs_true"] = metrics.predicted_vs_true(scores, y)
        return result
    qid = np.asarray(arrays["qid"]) if task == Task.ranking and "qid" in arrays else None
    result["pairwise_accuracy"] = metrics.pairwise_accuracy(scores, y, qid)
    result["kendall_tau"] = metrics.kendall_tau(scores, y, qid)
    if predicted is not None:
        result["accuracy"] = float(np.mean(predicted == y))
        result["error_rate"] = 1.0 - result["accuracy"]
    if task == Task.roc_area:
        positive = y == y.max()
        result["roc_auc"] = metrics.roc_auc(scores, positive)
        result["roc_curve"] = metrics.roc_curve(scores, positive)
        result["prbep"] = metrics.prbep(scores, positive)
    return result


@router.post(
    "/{model_id}/evaluate",
    response_model=EvaluationOut,
    summary="Evaluate a model on a data set",
    responses={**ERRORS, 404: {"model": ErrorResponse, "description": "No such model or data set (or not yours)."}},
)
async def evaluate(
    request: Request,
    model_id: ModelIdPath,
    body: EvaluateRequest,
    models: ModelStoreDep,
    datasets: DatasetStoreDep,
    tenant: TenantDep,
) -> EvaluationOut:
    """Accuracy, error rate, precision, recall, F1, PRBEP, ROC AUC and confusion matrix; pairwise accuracy and Kendall's tau for ordinal and ranking models; mean squared and absolute errors and R² for regression models."""

    def work() -> EvaluationOut:
        model = load_model(request, models, model_id, tenant)
        dataset = datasets.get(body.dataset_id, tenant)
        if dataset is None:
            raise not_found("dataset", body.dataset_id)
        arrays = datasets.load_arrays(dataset)
        return EvaluationOut.model_validate(
            dict(evaluate_arrays(model, arrays, dataset), model_id=model_id, dataset_id=body.dataset_id)
        )

    return await run_in_threadpool(work)

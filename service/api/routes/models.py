"""Routes of /v1/models: list, get, trace, delete, predict (numpy, model cached in memory)."""

from __future__ import annotations

import functools
import time
from typing import Annotated, Any

import numpy as np
from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from core.config import Settings
from core.schemas.base import ErrorResponse
from core.schemas.jobs import JobStatus, TraceOut
from core.schemas.models import ModelList, ModelOut, PredictOut, PredictRequest
from core.scoring.models import Scorer
from core.storage.documents import NOT_SHOWN, ModelRecord
from core.storage.records import RecordStore
from service.api.deps import JobStoreDep, ModelDep, ModelIdPath, ModelStoreDep, SettingsDep, TenantDep
from service.api.errors import ApiError, not_found, parse_body, read_body_limited
from service.api.predict import LoadedModel, reupload_hint, rows_to_matrix

router = APIRouter(prefix="/v1/models", tags=["models"])

ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorResponse, "description": "No such model (or not yours)."},
    401: {"model": ErrorResponse, "description": "Missing or invalid API key."},
}


def model_view(record: ModelRecord) -> dict:
    """The fields of a stored model that the API shows (``ModelOut``: all but ``NOT_SHOWN``)."""
    return {key: value for key, value in record.to_document().items() if key not in NOT_SHOWN}


@router.get("", response_model=ModelList, summary="List models", responses=ERRORS)
def list_models(
    offset: Annotated[int, Query(ge=0, description="Index of the first item.")] = 0,
    limit: Annotated[int, Query(ge=1, le=1000, description="Most items to return.")] = 100,
    *,
    store: ModelStoreDep,
    tenant: TenantDep,
) -> ModelList:
    """The caller's models, newest first."""
    records, total = store.list(tenant, offset, limit)
    return ModelList.model_validate(
        {"items": [model_view(r) for r in records], "total": total, "offset": offset, "limit": limit}
    )


@router.get("/{model_id}", response_model=ModelOut, summary="Get a model", responses=ERRORS)
async def get_model(record: ModelDep) -> ModelOut:
    """A model's metadata: labels, objective, iterations, stop reason, training seconds, accuracy."""
    return ModelOut.model_validate(model_view(record))


@router.get(
    "/{model_id}/trace", response_model=TraceOut, summary="Get the convergence trace of a model", responses=ERRORS
)
def get_model_trace(
    record: ModelDep,
    jobs: JobStoreDep,
    since: Annotated[int, Query(ge=0, description="Skip the first `since` points.")] = 0,
) -> dict:
    """The convergence points of the job that trained the model."""
    if record.job_id is None:  # imported: no training happened here
        return {"job_id": None, "status": None, "points": [], "next": 0}
    job = jobs.get(record.job_id)
    status = job.status if job is not None else JobStatus.succeeded  # the job was deleted: it had succeeded
    points = jobs.trace(record.job_id, since)
    return {"job_id": record.job_id, "status": status, "points": points, "next": since + len(points)}


@router.delete("/{model_id}", status_code=204, summary="Delete a model", responses=ERRORS)
def delete_model(request: Request, model_id: ModelIdPath, store: ModelStoreDep, tenant: TenantDep) -> Response:
    """Delete a model and its weights."""
    if not store.delete(model_id, tenant):
        raise not_found("model", model_id)
    request.app.state.model_cache.drop(model_id)
    return Response(status_code=204)


EXISTENCE_RECHECK_S = 1.0
"""A cached model is checked to still exist in Redis at most this often. A model deleted through this
API process is dropped from its cache at once; another API process may still score it for up to this
long."""


def load_model(request: Request, store: RecordStore[ModelRecord], model_id: str, tenant: str) -> LoadedModel:
    """The model from the in-memory cache (rechecking its existence now and then) or from Redis."""
    cache = request.app.state.model_cache
    model = cache.get(model_id)
    if model is not None:
        if model.record.tenant != tenant:
            raise not_found("model", model_id)
        now = time.monotonic()
        if now - model.checked_at >= EXISTENCE_RECHECK_S:
            if not store.exists(model_id):
                cache.drop(model_id)
                raise not_found("model", model_id)
            model.checked_at = now
        return model
    record = store.get(model_id, tenant)
    if record is None:
        raise not_found("model", model_id)
    model = LoadedModel(record, Scorer(record, store.load_arrays(record)), time.monotonic())
    cache.put(model_id, model)
    return model


@router.post(
    "/{model_id}/predict",
    response_model=PredictOut,
    summary="Predict labels and scores",
    responses={
        **ERRORS,
        409: {
            "model": ErrorResponse,
            "description": "`probabilities: true` for a model without a calibration, or `decision_function_shape: ovo` "
            "for a one-vs-rest model with more than two labels.",
        },
        413: {"model": ErrorResponse, "description": "More instances than the server allows in one request."},
        422: {"model": ErrorResponse, "description": "A row is malformed; the message names it."},
    },
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/PredictRequest"}}},
        }
    },
)
async def predict(
    request: Request, model_id: ModelIdPath, settings: SettingsDep, store: ModelStoreDep, tenant: TenantDep
) -> JSONResponse:
    """Score rows with a model: labels and decision values."""
    raw = await read_body_limited(request, settings.max_predict_body_bytes, "max_predict_body_bytes")
    return await predict_answer(request, model_id, raw, settings, store, tenant)


async def predict_answer(
    request: Request, model_id: str, raw: bytes, settings: Settings, store: RecordStore[ModelRecord], tenant: str
) -> JSONResponse:
    """The answer to a predict request whose body is ``raw`` (the route's work once its inputs are known; also run by
    ``service.api.predict_path``, which answers the route without the framework's layers)."""
    body = parse_body(PredictRequest, raw)
    if len(body.instances) > settings.max_predict_instances:
        raise ApiError(
            413,
            "payload_too_large",
            f"{len(body.instances)} instances exceed the limit max_predict_instances = {settings.max_predict_instances}",
            {"limit": "max_predict_instances", "value": settings.max_predict_instances},
        )
    # Small requests are scored on the event loop (a thread hop costs more than the work);
    # large ones go to the thread pool so they do not hold up other requests.
    scoring = functools.partial(
        score,
        request,
        store,
        model_id,
        tenant,
        body.instances,
        body.probabilities,
        body.ignore_unknown_features,
        body.decision_function_shape,
    )
    if len(body.instances) <= INLINE_PREDICT_ROWS:
        return JSONResponse(scoring())
    return JSONResponse(await run_in_threadpool(scoring))


INLINE_PREDICT_ROWS = 16


def score(
    request: Request,
    store: RecordStore[ModelRecord],
    model_id: str,
    tenant: str,
    instances: list,
    probabilities: bool = False,
    ignore_unknown: bool = False,
    decision_function_shape: str = "ovr",
) -> dict:
    """Load (or reuse) the model and score the rows (and give class probabilities, or a one-vs-one model's
    pairwise values, when asked)."""
    loaded = load_model(request, store, model_id, tenant)
    model = loaded.scorer
    if probabilities and not model.has_probabilities:
        raise ApiError(
            409,
            "model_not_calibrated",
            f"model {model_id} has no probability calibration: train it with params.probability: true "
            "(or import a model file that has probabilities)",
        )
    n_labels = 0 if model.labels is None else model.labels.size
    pairwise = decision_function_shape == "ovo" and n_labels > 2
    if pairwise and not model.one_vs_one:
        raise ApiError(
            409,
            "model_not_one_vs_one",
            f"decision_function_shape: ovo needs a one-vs-one model; model {model_id} is one-vs-rest over "
            f"{n_labels} labels (train it with params.multiclass: ovo, or ask for `ovr` scores)",
        )
    record = loaded.record
    matrix = rows_to_matrix(
        instances, model.n_features, record.zero_based, ignore_unknown, reupload=reupload_hint(record)
    )
    labels, scores = model.predict(matrix, pairwise)
    _check_finite_scores(np.asarray(scores, dtype=np.float64), "score")
    answer = {"labels": labels, "scores": scores, "probabilities": None}
    if probabilities:
        chances = model.probabilities(matrix)
        _check_finite_scores(chances, "probability")
        answer["probabilities"] = chances.tolist()
    return answer


def _check_finite_scores(values: np.ndarray, what: str) -> None:
    """A 422 naming the first row whose score (or probability) is not a finite number: its values are so large
    that the model's arithmetic overflows float64 (JSON has no infinity)."""
    finite = np.isfinite(values)
    if finite.all():
        return
    row = int(np.argwhere(~finite)[0][0])
    raise ApiError(
        422,
        "validation_error",
        f"instances[{row}]: its {what} overflows float64 (its values are too large for this model: scale the "
        "rows as the training data was)",
        [{"loc": ["body", "instances", row], "msg": f"the {what} is not a finite number", "type": "value_error"}],
    )

"""Models in and out of the service: GET /v1/models/{id}/export and POST /v1/models (import).

Export writes the stored model in the asked format as the client reads it (text formats stream in
pieces, so a model with 10^6 features or 10^4 support vectors never sits in memory as text); a model
the format cannot hold gets 409 with the reason. Import spools the multipart file to disk, reads it in
an ingest process (parsing is CPU work) and stores the model whole, or nothing (422 naming the line).
"""

from __future__ import annotations

import itertools
from concurrent.futures.process import BrokenProcessPool
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from core.schemas.enums import ExportFormat, ImportFormat
from core.schemas.models import ModelOut
from core.solvers import SOLVERS
from core.storage.jobs import utc_now
from core.storage.keys import new_id
from service.api.deps import ModelRecord, ModelStoreDep, SettingsDep, TenantDep
from service.api.errors import ApiError
from service.api.openapi_docs import error_responses, model_links
from service.api.routes.models import model_view
from service.api.uploads import FILE_FIELD, remove_quietly, spool_upload
from service.interchange.common import ExportRefused

router = APIRouter(prefix="/v1/models", tags=["models"])

MEDIA_TYPES = {
    ExportFormat.json: "application/json",
    ExportFormat.liblinear: "text/plain; charset=utf-8",
    ExportFormat.libsvm: "text/plain; charset=utf-8",
    ExportFormat.onnx: "application/octet-stream",
}
EXTENSIONS = {
    ExportFormat.json: "json",
    ExportFormat.liblinear: "liblinear",
    ExportFormat.libsvm: "libsvm",
    ExportFormat.onnx: "onnx",
}

EXPORT_RESPONSES = {
    200: {
        "description": (
            "The model file. `json`: a ModelDocument; `liblinear` / `libsvm`: the text of a LIBLINEAR / LIBSVM model "
            "file; `onnx`: a serialized ONNX model (input `X` float32 [N, n_features]; outputs `label`, `scores` and, "
            "for calibrated models, `probabilities`)."
        ),
        "headers": {
            "Content-Disposition": {
                "description": '`attachment; filename="<model id>.<format>"`.',
                "schema": {"type": "string"},
            }
        },
        "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/ModelDocument"}},
            "text/plain": {"schema": {"type": "string"}},
            "application/octet-stream": {
                "schema": {"type": "string", "format": "binary", "contentMediaType": "application/octet-stream"}
            },
        },
    },
    **error_responses(
        401,
        404,
        409,
        422,
        500,
        503,
        descriptions={
            404: "No such model (or not yours).",
            409: "The format cannot hold this model (e.g. LIBLINEAR and a kernel model, non-integer labels for "
            "LIBLINEAR/LIBSVM, a kernel model too large for a dense ONNX graph); the message says why and which formats can.",
        },
    ),
}

IMPORT_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "title": "ModelUpload",
                    "required": [FILE_FIELD],
                    "properties": {
                        FILE_FIELD: {
                            "type": "string",
                            "format": "binary",
                            "contentMediaType": "application/octet-stream",
                            "description": "The model file (plain or gzip): a LIBLINEAR or LIBSVM model file, or a ModelDocument as JSON.",
                        }
                    },
                },
                "encoding": {
                    FILE_FIELD: {
                        "contentType": "application/octet-stream, text/plain, application/json, application/gzip"
                    }
                },
                "example": {
                    FILE_FIELD: "solver_type L2R_L1LOSS_SVC_DUAL\nnr_class 2\nlabel 1 -1\nnr_feature 2\nbias -1\nw\n0.5\n-0.25\n"
                },
            }
        },
    }
}


def _writer(format: ExportFormat):
    if format is ExportFormat.liblinear:
        from service.interchange.liblinear import write_liblinear

        return write_liblinear
    if format is ExportFormat.libsvm:
        from service.interchange.libsvm import write_libsvm

        return write_libsvm
    from service.interchange.json_model import write_json

    return write_json


@router.get("/{model_id}/export", summary="Export a model", response_class=Response, responses=EXPORT_RESPONSES)
async def export_model(
    record: ModelRecord,
    store: ModelStoreDep,
    format: Annotated[
        ExportFormat,
        Query(
            description="`json` (every kind), `liblinear` (linear classifiers), `libsvm` (classifiers), `onnx` (every kind)."
        ),
    ] = ExportFormat.json,
) -> Response:
    """The model as a file that LIBLINEAR's `load_model`, LIBSVM's `svm_load_model`, onnxruntime or this
    service's import reads, predicting the same labels and scores; text formats stream."""
    model_id = record["id"]
    spec = SOLVERS.get(record.get("solver") or "")
    if spec is not None and format.value not in spec.exports:
        raise ApiError(
            409,
            "export_not_possible",
            f"model {model_id} cannot be exported as {format.value}: models of solver {spec.name} export to "
            f"{', '.join(spec.exports)}",
        )
    arrays = await run_in_threadpool(store.load_arrays, record)
    headers = {"Content-Disposition": f'attachment; filename="{model_id}.{EXTENSIONS[format]}"'}
    try:
        if format is ExportFormat.onnx:
            from service.interchange.onnx_model import write_onnx

            body = await run_in_threadpool(write_onnx, record, arrays)
            return Response(body, media_type=MEDIA_TYPES[format], headers=headers)
        pieces = _writer(format)(record, arrays)
        first = await run_in_threadpool(next, pieces)  # refusals happen before the first piece
    except ExportRefused as exc:
        raise ApiError(
            409, "export_not_possible", f"model {model_id} cannot be exported as {format.value}: {exc}"
        ) from None
    return StreamingResponse(itertools.chain([first], pieces), media_type=MEDIA_TYPES[format], headers=headers)


@router.post(
    "",
    status_code=201,
    response_model=ModelOut,
    summary="Import a model",
    openapi_extra=IMPORT_BODY,
    responses={
        201: {
            "description": "The imported model.",
            "links": model_links(),
            "headers": {
                "Location": {"description": "The model's URL.", "required": True, "schema": {"type": "string"}}
            },
        },
        **error_responses(
            401,
            413,
            415,
            422,
            500,
            503,
            descriptions={
                413: "File over max_upload_bytes.",
                422: "Not a valid model file: the message names the line (LIBLINEAR, LIBSVM, JSON syntax) or the field (JSON) and what is wrong.",
            },
        ),
    },
)
async def import_model(
    request: Request,
    response: Response,
    format: Annotated[
        ImportFormat, Query(description="Format of the file: `json` (a ModelDocument), `liblinear` or `libsvm`.")
    ],
    n_features: Annotated[
        int | None,
        Query(
            ge=1,
            le=100_000_000,
            description=(
                "libsvm only: the number of features the model reads (default: the largest index of a support vector). "
                "Rows are cut to it before scoring; for the rbf kernel LIBSVM would count later features in the distance."
            ),
        ),
    ] = None,
    *,
    settings: SettingsDep,
    store: ModelStoreDep,
    tenant: TenantDep,
) -> ModelOut:
    """Store a model trained elsewhere (or exported from here): it predicts, evaluates and exports like a trained one."""
    from service.interchange.reader import read_model_file

    upload = await spool_upload(request, settings.data_dir / "uploads", settings.max_upload_bytes)
    try:
        try:
            outcome = await request.app.state.ingest.run(read_model_file, str(upload.path), format.value, n_features)
        except BrokenProcessPool:
            raise ApiError(
                503,
                "ingest_unavailable",
                "the parser process stopped while reading this file; nothing was stored, try again",
                headers={"Retry-After": "1"},
            ) from None
    finally:
        remove_quietly(upload.path)
    if "error" in outcome:
        error = outcome["error"]
        where = f"line {error['line']}: " if error["line"] is not None else ""
        raise ApiError(
            422,
            "invalid_model_file",
            f"{format.value} model file: {where}{error['reason']}",
            {"line": error["line"], "column": None, "reason": error["reason"]},
        )
    meta, arrays = outcome["meta"], outcome["arrays"]
    if meta["n_features"] > settings.max_features:
        raise ApiError(
            413,
            "payload_too_large",
            f"the model reads {meta['n_features']} features, over max_features = {settings.max_features}",
            {"limit": "max_features", "value": settings.max_features},
        )
    model_id = new_id("mdl")
    record = {
        "n_iter": None,
        "converged": None,
        "stop_reason": None,
        "training_seconds": None,
        "objective": None,
        "objectives": [],
        "train_accuracy": None,
        "solver": None,
        **meta,
        "id": model_id,
        "tenant": tenant,
        "source": "imported",
        "import_format": format.value,
        "job_id": None,
        "dataset_id": None,
        "created_at": utc_now(),
    }
    await run_in_threadpool(store.create, record, arrays)
    response.headers["Location"] = f"/v1/models/{model_id}"
    return ModelOut.model_validate(model_view(record))

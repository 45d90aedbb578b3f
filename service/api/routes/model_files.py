"""Models in and out of the service: GET /v1/models/{id}/export/{format} (or ?format=) and POST /v1/models (import).

Export has a route per format (``/export/json``, ``/export/liblinear``, ``/export/libsvm``, ``/export/onnx``),
each declaring its one content type, so a client generated from the OpenAPI document reads a ModelDocument,
text or bytes as the format is; ``/export?format=`` answers the same files. Export writes the stored model
in the asked format as the client reads it (text formats stream in pieces, so a model with 10^6 features
or 10^4 support vectors never sits in memory as text); a model the format cannot hold gets 409 with the
reason. Import spools the multipart file to disk, reads it in an ingest process (parsing is CPU work) and
stores the model whole, or nothing (422 naming the line).
"""

from __future__ import annotations

import itertools
from concurrent.futures.process import BrokenProcessPool
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from core.schemas.enums import ExportFormat, ImportFormat, ModelSource
from core.schemas.models import ModelOut
from core.solvers import SOLVERS
from core.storage.documents import ModelRecord
from core.storage.jobs import utc_now
from core.storage.keys import new_id
from core.storage.records import RecordStore
from service.api.deps import ModelDep, ModelStoreDep, SettingsDep, TenantDep
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

FILE_CONTENT = {
    ExportFormat.json: {"application/json": {"schema": {"$ref": "#/components/schemas/ModelDocument"}}},
    ExportFormat.liblinear: {"text/plain": {"schema": {"type": "string"}}},
    ExportFormat.libsvm: {"text/plain": {"schema": {"type": "string"}}},
    ExportFormat.onnx: {
        "application/octet-stream": {
            "schema": {"type": "string", "format": "binary", "contentMediaType": "application/octet-stream"}
        }
    },
}
"""The 200 response's content of each format, as the OpenAPI document declares it."""
FILE_DESCRIPTIONS = {
    ExportFormat.json: "a ModelDocument (every kind of model)",
    ExportFormat.liblinear: "the text of a LIBLINEAR model file (linear classifiers with integer labels)",
    ExportFormat.libsvm: "the text of a LIBSVM model file (classifiers with integer labels)",
    ExportFormat.onnx: "a serialized ONNX model (input `X` float32 [N, n_features]; outputs `label`, `scores` and, "
    "for calibrated models, `probabilities`; every kind of model that fits a dense graph)",
}
"""What each format's file is, in the OpenAPI document."""


def export_responses(formats: tuple[ExportFormat, ...]) -> dict:
    """The responses of an export route that answers in ``formats``: the file, or an error."""
    content: dict = {}
    # binary first: a generated client (openapi-python-client reads a response as the first content type it
    # knows) then takes any format's file as bytes from an operation that answers several, never parses it as JSON
    for format in sorted(formats, key=lambda format: format is not ExportFormat.onnx):
        content.update(FILE_CONTENT[format])
    files = "; ".join(f"`{format.value}`: {FILE_DESCRIPTIONS[format]}" for format in formats)
    return {
        200: {
            "description": f"The model file. {files}.",
            "headers": {
                "Content-Disposition": {
                    "description": '`attachment; filename="<model id>.<format>"`.',
                    "schema": {"type": "string"},
                }
            },
            "content": content,
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
                "LIBLINEAR/LIBSVM, a kernel model too large for a dense ONNX graph); the message says why and which "
                "formats can.",
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


async def export_file(record: ModelRecord, store: RecordStore[ModelRecord], format: ExportFormat) -> Response:
    """The model as a file in ``format`` (see the module docstring); 409 when the format cannot hold it."""
    model_id = record.id
    spec = SOLVERS.get(record.solver or "")
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


@router.get(
    "/{model_id}/export",
    summary="Export a model (format chosen by a parameter)",
    response_class=Response,
    responses=export_responses(tuple(ExportFormat)),
)
async def export_model(
    record: ModelDep,
    store: ModelStoreDep,
    format: Annotated[
        ExportFormat,
        Query(
            description="`json` (every kind), `liblinear` (linear classifiers), `libsvm` (classifiers), `onnx` (every kind)."
        ),
    ] = ExportFormat.json,
) -> Response:
    """The model as a file that LIBLINEAR's `load_model`, LIBSVM's `svm_load_model`, onnxruntime or this
    service's import reads, predicting the same labels and scores; text formats stream. The same file as
    `GET /v1/models/{id}/export/{format}`, whose answers each declare their one content type (a ModelDocument, text
    or binary) for typed clients; a client generated from this operation gets every format as bytes."""
    return await export_file(record, store, format)


def _export_route(format: ExportFormat):
    async def export_as(record: ModelDep, store: ModelStoreDep) -> Response:
        return await export_file(record, store, format)

    export_as.__doc__ = (
        f"The model as {FILE_DESCRIPTIONS[format]}: the same file as `GET /v1/models/{{id}}/export?format="
        f"{format.value}`, its one content type declared (`{MEDIA_TYPES[format].split(';')[0]}`)."
    )
    return export_as


for _format in ExportFormat:
    router.add_api_route(
        f"/{{model_id}}/export/{_format.value}",
        _export_route(_format),
        methods=["GET"],
        name=f"export_model_{_format.value}",
        summary=f"Export a model as {_format.value}",
        response_class=Response,
        responses=export_responses((_format,)),
    )


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
                "Rows are cut to it before scoring; for the rbf kernel LIBSVM would count later features in the distance. "
                "A precomputed kernel (-t 4): its rows hold a column per training row after the serial, so give the "
                "training rows + 1 (default: the largest support vector serial + 1)."
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
    model_id = new_id("mdl")
    # the file's description of the model (``service.interchange``), then where it came from
    record = ModelRecord.from_document(
        {
            "n_iter": None,
            "converged": None,
            "stop_reason": None,
            "training_seconds": None,
            "objective": None,
            "objectives": [],
            "train_accuracy": None,
            "solver": None,
            **outcome["model"].to_document(),
            "id": model_id,
            "tenant": tenant,
            "source": ModelSource.imported.value,
            "import_format": format.value,
            "job_id": None,
            "dataset_id": None,
            "created_at": utc_now(),
        }
    )
    if record.n_features > settings.max_features:
        raise ApiError(
            413,
            "payload_too_large",
            f"the model reads {record.n_features} features, over max_features = {settings.max_features}",
            {"limit": "max_features", "value": settings.max_features},
        )
    record = await run_in_threadpool(store.create, record, outcome["arrays"])
    response.headers["Location"] = f"/v1/models/{model_id}"
    return ModelOut.model_validate(model_view(record))

"""Routes of /v1/datasets: upload (streamed to disk, parsed in an ingest process), list, get, delete."""

from __future__ import annotations

import asyncio
from concurrent.futures.process import BrokenProcessPool
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response

from core.config import cache_root
from core.schemas.base import ErrorResponse
from core.schemas.datasets import DatasetFormat, DatasetLabels, DatasetList, DatasetOut, ValueDtype, ZeroBased
from core.storage import cache
from core.storage.documents import DatasetRecord
from core.storage.jobs import utc_now
from core.storage.keys import new_id
from core.storage.objects import store_config
from service.api.deps import DatasetDep, DatasetIdPath, DatasetStoreDep, SettingsDep, TenantDep
from service.api.errors import ApiError, not_found
from service.api.uploads import (
    FILE_FIELD,
    declared_length,
    marker_path,
    new_spool_file,
    remove_quietly,
    spool_upload,
    write_marker,
)

router = APIRouter(prefix="/v1/datasets", tags=["datasets"])


def _ignore_outcome(task: asyncio.Future) -> None:
    """Collect the result of an ingest whose upload failed (so no 'exception never retrieved' warning)."""
    if not task.cancelled():
        task.exception()


ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorResponse, "description": "No such data set (or not yours)."},
    401: {"model": ErrorResponse, "description": "Missing or invalid API key."},
}

UPLOAD_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "title": "DatasetUpload",
                    "required": [FILE_FIELD],
                    "properties": {
                        FILE_FIELD: {
                            "type": "string",
                            "format": "binary",
                            "description": "The data set: svmlight/libsvm text (optional qid, # comments) or CSV with a header; gzip-compressed or plain.",
                        }
                    },
                }
            }
        },
    }
}


def public_view(record: DatasetRecord) -> dict:
    """The fields of a stored data set that the API shows."""
    return {key: value for key, value in record.to_document().items() if key not in ("tenant", "arrays", "shards")}


@router.post(
    "",
    status_code=201,
    response_model=DatasetOut,
    summary="Upload a data set",
    openapi_extra=UPLOAD_BODY,
    responses={
        **ERRORS,
        413: {
            "model": ErrorResponse,
            "description": "Over a size limit (bytes, decompressed bytes, line bytes, rows, features, nnz).",
        },
        415: {"model": ErrorResponse, "description": "Not a multipart/form-data body."},
        422: {
            "model": ErrorResponse,
            "description": "The file could not be parsed; the message names line, column and reason.",
        },
        408: {
            "model": ErrorResponse,
            "description": "The body stopped arriving, or arrived slower than body_min_rate.",
        },
        507: {
            "model": ErrorResponse,
            "description": "No room: Redis is at its maxmemory (`storage_full`) or the API's "
            "disk is full (`disk_full`); nothing was stored.",
        },
        503: {
            "model": ErrorResponse,
            "description": "The object store does not answer (`store_unavailable`, with Retry-After) or refuses "
            "(`store_misconfigured`), or the parser process stopped (`ingest_unavailable`); nothing was stored.",
        },
    },
)
async def upload_dataset(
    request: Request,
    response: Response,
    format: Annotated[DatasetFormat, Query(description="Text format of the file.")] = DatasetFormat.svmlight,
    name: Annotated[
        str | None, Query(max_length=200, description="A name for the data set (default: the file's name).")
    ] = None,
    zero_based: Annotated[
        ZeroBased,
        Query(
            description="svmlight feature indices: `auto` (zero-based iff some index is 0; the answer's `zero_based_guessed` "
            "says it was guessed), `true` (zero-based, as scikit-learn's dump_svmlight_file writes) or `false` (one-based, "
            "LIBSVM's convention)."
        ),
    ] = ZeroBased.auto,
    label_column: Annotated[
        str, Query(min_length=1, max_length=200, description="CSV only: the header name of the label column.")
    ] = "label",
    labels: Annotated[
        DatasetLabels,
        Query(
            description="`given` (default): every row has a label (svmlight: first on the line; CSV: the column "
            "`label_column`). `none`: the rows have no label (svmlight lines start with their first feature, every "
            "CSV column is a feature): one-class data, for smo's `svm_type: one_class`; every row's label is 1."
        ),
    ] = DatasetLabels.given,
    value_dtype: Annotated[
        ValueDtype,
        Query(
            description="How feature values are stored. `auto`: float32 when every value has at most 7 significant "
            "digits and rounding its float32 to as many significant digits as its text has gives back the text exactly "
            "(every value of 6 digits or fewer, outside float32's subnormal range; half the memory; "
            "training then sees each value as that float32 widened to float64), else float64. `float32`: the float32 "
            "nearest to each value, always (422 for a value beyond float32's range). `float64`: the double nearest "
            "to each value."
        ),
    ] = ValueDtype.auto,
    *,
    settings: SettingsDep,
    tenant: TenantDep,
) -> DatasetOut:
    """Stream the multipart field `file` to disk, parse it in an ingest process and store it whole, or nothing.

    A large upload (Content-Length of at least ``follow_upload_bytes``) is parsed while it arrives: the
    ingest process follows the spool file as it grows and stores the arrays chunk by chunk, so the
    answer comes about as soon as the last byte is in.
    """
    upload_dir = settings.data_dir / "uploads"
    dataset_id = new_id("ds")
    zero = {"auto": "auto", "true": True, "false": False}[zero_based.value]
    length = declared_length(request)
    follow = length is not None and length >= settings.follow_upload_bytes
    options = dict(
        dataset_id=dataset_id,
        redis_url=settings.redis_url,
        store_config=store_config(settings),
        shard_bytes=settings.shard_bytes,
        format=format.value,
        zero_based=zero,
        value_dtype=value_dtype.value,
        label_column=label_column,
        labelled=labels == DatasetLabels.given,
        limits={
            "max_decompressed_bytes": settings.max_decompressed_bytes,
            "max_rows": settings.max_rows,
            "max_features": settings.max_features,
            "max_nnz": settings.max_nnz,
            "max_line_bytes": settings.max_line_bytes,
        },
        inflater=settings.gzip_inflater,
        reserve_fraction=settings.storage_reserve_fraction,
    )
    base_meta = {"id": dataset_id, "tenant": tenant, "format": format.value, "created_at": utc_now()}
    ingest = request.app.state.ingest
    if follow:
        spool = new_spool_file(upload_dir)
        task = asyncio.ensure_future(
            ingest.ingest(
                str(spool),
                meta=dict(base_meta, name=name or dataset_id, bytes=0, sha256=""),
                follow_marker=str(marker_path(spool)),
                **options,
            )
        )
        try:
            upload = await spool_upload(request, upload_dir, settings.max_upload_bytes, path=spool, keep_on_error=True)
        except BaseException as exc:
            # the ingest process stops at the marker, discards what it stored and deletes the files
            write_marker(spool, {"status": "aborted", "reason": f"the upload failed ({type(exc).__name__})"})
            task.add_done_callback(_ignore_outcome)
            raise
        write_marker(
            spool,
            {
                "status": "complete",
                "meta": {"name": name or upload.filename or dataset_id, "bytes": upload.size, "sha256": upload.sha256},
            },
        )
        try:
            outcome = await task
        except BrokenProcessPool:
            raise ApiError(
                503,
                "ingest_unavailable",
                "the parser process stopped while reading this upload; nothing was stored, try again",
            ) from None
        finally:
            remove_quietly(spool)
            remove_quietly(marker_path(spool))
    else:
        upload = await spool_upload(request, upload_dir, settings.max_upload_bytes)
        try:
            meta = dict(base_meta, name=name or upload.filename or dataset_id, bytes=upload.size, sha256=upload.sha256)
            try:
                outcome = await ingest.ingest(str(upload.path), meta=meta, **options)
            except BrokenProcessPool:
                raise ApiError(
                    503,
                    "ingest_unavailable",
                    "the parser process stopped while reading this upload; nothing was stored, try again",
                ) from None
        finally:
            remove_quietly(upload.path)
    if "aborted" in outcome:  # only when the marker says so, which this request did not write
        raise ApiError(503, "ingest_unavailable", "the upload was abandoned while it was parsed; nothing was stored")
    if "error" in outcome:
        err = outcome["error"]
        headers = {"Retry-After": str(err["retry_after"])} if err.get("retry_after") else None
        raise ApiError(err["status"], err["code"], err["message"], err["details"], headers=headers)
    response.headers["Location"] = f"/v1/datasets/{dataset_id}"
    return DatasetOut.model_validate(public_view(DatasetRecord.from_document(outcome["record"])))


@router.get("", response_model=DatasetList, summary="List data sets", responses=ERRORS)
def list_datasets(
    offset: Annotated[int, Query(ge=0, description="Index of the first item.")] = 0,
    limit: Annotated[int, Query(ge=1, le=1000, description="Most items to return.")] = 100,
    *,
    store: DatasetStoreDep,
    tenant: TenantDep,
) -> DatasetList:
    """The caller's data sets, newest first."""
    records, total = store.list(tenant, offset, limit)
    return DatasetList.model_validate(
        {"items": [public_view(r) for r in records], "total": total, "offset": offset, "limit": limit}
    )


@router.get("/{dataset_id}", response_model=DatasetOut, summary="Get a data set", responses=ERRORS)
async def get_dataset(record: DatasetDep) -> DatasetOut:
    """One data set's description."""
    return DatasetOut.model_validate(public_view(record))


@router.delete("/{dataset_id}", status_code=204, summary="Delete a data set", responses=ERRORS)
def delete_dataset(
    dataset_id: DatasetIdPath, store: DatasetStoreDep, tenant: TenantDep, settings: SettingsDep
) -> Response:
    """Delete a data set (models trained on it stay; queued jobs on it will fail with dataset_not_found), and this
    machine's cached copy of it (the other machines' workers remove theirs when idle: ``core.storage.cache``)."""
    if not store.delete(dataset_id, tenant):
        raise not_found("dataset", dataset_id)
    cache.forget(cache_root(settings), dataset_id)
    return Response(status_code=204)

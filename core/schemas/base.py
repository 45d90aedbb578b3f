"""Shared schema pieces: strict request models and the one error shape."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class StrictModel(BaseModel):
    """A request model that rejects unknown fields (a typo must not be silently ignored)."""

    model_config = ConfigDict(extra="forbid")


class ResponseModel(BaseModel):
    """An answer: every field is always present (fields with a default are listed as required in the document)."""

    model_config = ConfigDict(json_schema_serialization_defaults_required=True)


class ValidationIssue(ResponseModel):
    """One invalid field of a request."""

    loc: list[str | int] = Field(
        description="Where: `body`, `query` or `path`, then field names and list indices, as the request wrote them."
    )
    msg: str = Field(description="What is wrong with it.")
    type: str = Field(description="Machine-readable kind of problem, e.g. `missing`, `greater_than`, `json_invalid`.")


class ParseErrorDetails(ResponseModel):
    """Where an uploaded file (data set or model) is malformed."""

    line: int | None = Field(description="Line of the file, from 1 (null when the whole file is at fault).")
    column: int | None = Field(default=None, description="Column (byte) of the line, from 1, when known.")
    reason: str = Field(description="What is wrong there.")


class LimitDetails(ResponseModel):
    """Which configured limit a request crossed."""

    limit: str = Field(
        description="Name of the limit (setting), e.g. `max_upload_bytes`, `max_queued_jobs_per_tenant`."
    )
    value: int = Field(description="The limit's value.")


class TimeoutDetails(ResponseModel):
    """Which limit a request body that stopped arriving, or arrived too slowly, crossed (408)."""

    limit: str = Field(
        description="`body_timeout_s` (nothing arrived for that long) or `body_min_rate` (bytes per second)."
    )
    value: float = Field(description="The limit's value.")
    received_bytes: int = Field(description="Bytes of the body that had arrived.")


class StorageDetails(ResponseModel):
    """How far Redis is from room for what a request would store (507 `storage_full`)."""

    needed_bytes: int = Field(description="Bytes the request would store.")
    available_bytes: int = Field(description="Bytes Redis can still take under its maxmemory.")
    maxmemory: int = Field(description="Redis's maxmemory in bytes (`HINGE_REDIS_MAXMEMORY`).")


class StoreDetails(ResponseModel):
    """Which object store an error is about (503 `store_unavailable`, `store_misconfigured`; never a credential)."""

    store: str = Field(description="The object store: backend and location (`backend=s3 endpoint=... bucket=...`).")


class SpoolDetails(ResponseModel):
    """How much of an upload the API spooled before its disk filled (507 `disk_full`)."""

    written_bytes: int = Field(description="Bytes written to the API's disk before it refused more.")


class ReadinessDetails(ResponseModel):
    """What readiness found (503 `not_ready` from `/readyz`)."""

    status: str = Field(
        description="`warming` while the workers compile their first solver's code, else `unavailable`."
    )
    redis: bool = Field(description="Whether Redis answered.")
    workers: int | None = Field(description="Workers that take jobs (0), null when Redis did not answer.")
    warming: int | None = Field(description="Workers compiling their first solver's code, when `status` is `warming`.")
    solvers_compiling: list[str] | None = Field(
        default=None, description="Solvers whose code is still being compiled, when warming."
    )
    compile_eta_s: float | None = Field(
        default=None, description="Estimated seconds until it is compiled, when warming."
    )
    kernels_left: list[str] | None = Field(
        description="Deprecated: the same as `solvers_compiling`, its earlier name, kept for one more version."
    )
    kernels_eta_s: float | None = Field(
        description="Deprecated: the same as `compile_eta_s`, its earlier name, kept for one more version."
    )
    object_store: str | None = Field(
        default=None,
        description="`ok`, or why the object store (data sets, large models) does not serve: `unavailable: ...` or "
        "`refused: ...`; null when it was not asked.",
    )


class JobStateDetails(ResponseModel):
    """The state that keeps a job from what was asked (409 `job_not_finished`)."""

    status: str = Field(description="The job's status when it was asked, e.g. `queued` or `running`.")


class ErrorBody(ResponseModel):
    """What went wrong, for a machine (code) and for a person (message)."""

    code: str = Field(description="Stable machine-readable error code, e.g. `validation_error`, `not_found`.")
    message: str = Field(description="A sentence saying what is wrong and where (field, line, column).")
    details: (
        list[ValidationIssue]
        | ParseErrorDetails
        | LimitDetails
        | TimeoutDetails
        | StorageDetails
        | SpoolDetails
        | StoreDetails
        | JobStateDetails
        | ReadinessDetails
        | None
    ) = Field(
        default=None,
        description=(
            "Structured details: validation errors (422) a list of {loc, msg, type}; malformed files (422) "
            "{line, column, reason}; limits (413, 429) {limit, value}; a body too slow (408) {limit, value, "
            "received_bytes}; a full Redis (507 `storage_full`) "
            "{needed_bytes, available_bytes, maxmemory}; a full API disk (507 `disk_full`) {written_bytes}; "
            "the object store (503 `store_unavailable`, `store_misconfigured`) {store}; "
            "a job not finished (409) {status}; readiness (503 `not_ready`) {status, redis, workers, warming, "
            "solvers_compiling, compile_eta_s, object_store; the deprecated kernels_left, kernels_eta_s}; null otherwise."
        ),
    )


class ErrorResponse(ResponseModel):
    """The one JSON shape of every 4xx and 5xx answer."""

    error: ErrorBody = Field(description="The error.")


class Page(ResponseModel):
    """Paging information of a list answer."""

    total: int = Field(description="How many items exist in all.")
    offset: int = Field(description="Index of the first item of this page.")
    limit: int = Field(description="Most items a page holds.")

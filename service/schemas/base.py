"""Shared schema pieces: strict request models and the one error shape."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class StrictModel(BaseModel):
    """A request model that rejects unknown fields (a typo must not be silently ignored)."""

    model_config = ConfigDict(extra="forbid")


class ErrorBody(BaseModel):
    """What went wrong, for a machine (code) and for a person (message)."""

    code: str = Field(description="Stable machine-readable error code, e.g. `validation_error`, `not_found`.")
    message: str = Field(description="A sentence saying what is wrong and where (field, line, column).")
    details: Any = Field(
        default=None,
        description="Structured details: for validation errors a list of {loc, msg, type}; for parse errors {line, column, reason}.",
    )


class ErrorResponse(BaseModel):
    """The one JSON shape of every 4xx and 5xx answer."""

    error: ErrorBody = Field(description="The error.")


class Page(BaseModel):
    """Paging information of a list answer."""

    total: int = Field(description="How many items exist in all.")
    offset: int = Field(description="Index of the first item of this page.")
    limit: int = Field(description="Most items a page holds.")

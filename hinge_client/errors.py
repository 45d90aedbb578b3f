"""Errors the client raises: the service's JSON error shape as an exception, and a failed job."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class HingeError(Exception):
    """A 4xx/5xx answer of the service: ``status``, and the error body's ``code``, ``message`` and ``details``."""

    def __init__(self, status: int, code: str, message: str, details: Any = None, headers: dict | None = None):
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.headers = headers or {}


class JobFailed(Exception):
    """A training job ended `failed` (or `canceled` without a model); ``job`` is its last state."""

    def __init__(self, job: Mapping[str, Any]):
        error = job.get("error") or {}
        super().__init__(
            f"job {job.get('id')} ended {job.get('status')}: {error.get('code', '')} {error.get('message', '')}".strip()
        )
        self.job = job

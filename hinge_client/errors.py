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


class ResultWarning(UserWarning):
    """Issued (``warnings.warn``) by ``Client.train`` when the model it returns carries warnings: stopped at
    max_iter, a large certified gap, no better than the majority label, settings a search could not evaluate.
    ``code`` is the warning's code; the scikit-learn estimators issue ``ConvergenceWarning`` instead. Make them
    errors with ``warnings.simplefilter("error", ResultWarning)``."""

    def __init__(self, model_id: str, code: str, message: str):
        super().__init__(f"model {model_id}: {code}: {message}")
        self.model_id = model_id
        self.code = code


def warn_about(model: Mapping[str, Any], stacklevel: int = 3) -> None:
    """Issue a ``ResultWarning`` for each of a model's warnings."""
    import warnings

    for item in model.get("warnings") or []:
        warnings.warn(
            ResultWarning(str(model.get("id")), item.get("code", ""), item.get("message", "")), stacklevel=stacklevel
        )

"""The API's operations as requests (``Call``): path, query, body and how to read the answer.

One function per operation of the OpenAPI document; ``Client`` and ``AsyncClient`` send them (with
retries) and differ only in how.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx

from hinge_client.data import to_svmlight

FileLike = str | Path | bytes | IO[bytes]


def _json(response: httpx.Response) -> Any:
    return response.json()


def _nothing(response: httpx.Response) -> None:
    return None


def _bytes(response: httpx.Response) -> bytes:
    return response.content


Progress = Callable[[int, int], None]
"""Called with (bytes sent, bytes in all) as a file named by its path is sent."""


class _FileReader:
    """A file named by its path, read by httpx in pieces as it sends it (never whole in memory), each piece
    reported to ``on_progress``. httpx takes its size from ``fileno()`` (the request has a Content-Length)."""

    def __init__(self, path: Path, on_progress: Progress | None):
        self.handle = path.open("rb")
        self.size = path.stat().st_size
        self.sent = 0
        self.on_progress = on_progress

    def fileno(self) -> int:
        return self.handle.fileno()

    def seek(self, offset: int, whence: int = 0) -> int:
        position = self.handle.seek(offset, whence)
        self.sent = position
        return position

    def tell(self) -> int:
        return self.handle.tell()

    def read(self, size: int = -1) -> bytes:
        piece = self.handle.read(size)
        self.sent += len(piece)
        if piece and self.on_progress is not None:
            self.on_progress(self.sent, self.size)
        return piece

    def close(self) -> None:
        self.handle.close()


@dataclass
class Call:
    """One request: method, path, query, JSON body or multipart file, and how to read the answer."""

    method: str
    path: str
    params: dict | None = None
    json: Any = None
    file: FileLike | None = None
    file_name: str = "data"
    parse: Callable[[httpx.Response], Any] = field(default=_json)
    on_progress: Progress | None = None  # a file named by its path: (sent, total) bytes as it goes

    @contextlib.contextmanager
    def files(self) -> Iterator[dict | None]:
        """The multipart part, made afresh for every attempt (a retry sends the whole file again): a file named
        by its path is streamed from disk (and closed afterwards), bytes and file objects are read whole."""
        if self.file is None:
            yield None
            return
        content: Any = self.file
        if isinstance(content, (str, Path)):
            reader = _FileReader(Path(content), self.on_progress)
            try:
                yield {"file": (self.file_name, reader, "application/octet-stream")}
            finally:
                reader.close()
            return
        if hasattr(content, "read"):
            if hasattr(content, "seek"):
                content.seek(0)
            content = content.read()
        yield {"file": (self.file_name, content, "application/octet-stream")}


def _query(**values) -> dict:
    return {key: value for key, value in values.items() if value is not None}


def _file_name(file: FileLike, default: str) -> str:
    if isinstance(file, (str, Path)):
        return Path(file).name
    name = getattr(file, "name", None)
    return Path(str(name)).name if isinstance(name, str) else default


# -- data sets --------------------------------------------------------------------------------------


def upload_dataset(
    file: FileLike,
    *,
    name: str | None = None,
    format: str | None = None,
    zero_based: bool | str | None = None,
    label_column: str | None = None,
    value_dtype: str | None = None,
    on_progress: Progress | None = None,
) -> Call:
    """POST /v1/datasets: a file (path, bytes or binary file object), svmlight or CSV, plain or gzip."""
    params = _query(
        name=name,
        format=format,
        label_column=label_column,
        zero_based=None if zero_based is None else str(zero_based).lower(),
        value_dtype=value_dtype,
    )
    return Call(
        "POST",
        "/v1/datasets",
        params=params,
        file=file,
        file_name=_file_name(file, "data.svm"),
        on_progress=on_progress,
    )


def upload_arrays(X, y, *, qid=None, name: str | None = None) -> Call:
    """POST /v1/datasets with rows X (numpy or scipy sparse) and labels y written as svmlight."""
    return Call(
        "POST",
        "/v1/datasets",
        params=_query(name=name, zero_based="false"),
        file=to_svmlight(X, y, qid),
        file_name="arrays.svm",
    )


def get_dataset(dataset_id: str) -> Call:
    """GET /v1/datasets/{id}."""
    return Call("GET", f"/v1/datasets/{dataset_id}")


def list_datasets(offset: int = 0, limit: int = 100) -> Call:
    """GET /v1/datasets: a page, newest first."""
    return Call("GET", "/v1/datasets", params={"offset": offset, "limit": limit})


def delete_dataset(dataset_id: str) -> Call:
    """DELETE /v1/datasets/{id}."""
    return Call("DELETE", f"/v1/datasets/{dataset_id}", parse=_nothing)


# -- jobs -------------------------------------------------------------------------------------------


def submit_job(dataset_id: str, solver: str = "dcd", params: dict | None = None) -> Call:
    """POST /v1/jobs: train ``solver`` with ``params`` (see the OpenAPI document) on a data set."""
    return Call("POST", "/v1/jobs", json={"dataset_id": dataset_id, "solver": solver, "params": params or {}})


def get_job(job_id: str, wait_s: float | None = None) -> Call:
    """GET /v1/jobs/{id}; with ``wait_s``, the answer waits up to that many seconds for the job to end."""
    return Call("GET", f"/v1/jobs/{job_id}", params=_query(wait_s=wait_s))


def list_jobs(offset: int = 0, limit: int = 100, status: str | None = None) -> Call:
    """GET /v1/jobs: a page, newest first, optionally only one status."""
    return Call("GET", "/v1/jobs", params=_query(offset=offset, limit=limit, status=status))


def get_trace(job_id: str, since: int = 0) -> Call:
    """GET /v1/jobs/{id}/trace: convergence points from ``since`` on."""
    return Call("GET", f"/v1/jobs/{job_id}/trace", params={"since": since})


def cancel_job(job_id: str) -> Call:
    """POST /v1/jobs/{id}/cancel."""
    return Call("POST", f"/v1/jobs/{job_id}/cancel")


def delete_job(job_id: str) -> Call:
    """DELETE /v1/jobs/{id}: a finished job and its trace (409 while queued or running); its model stays."""
    return Call("DELETE", f"/v1/jobs/{job_id}", parse=_nothing)


# -- models -----------------------------------------------------------------------------------------


def get_model(model_id: str) -> Call:
    """GET /v1/models/{id}."""
    return Call("GET", f"/v1/models/{model_id}")


def list_models(offset: int = 0, limit: int = 100) -> Call:
    """GET /v1/models: a page, newest first."""
    return Call("GET", "/v1/models", params={"offset": offset, "limit": limit})


def delete_model(model_id: str) -> Call:
    """DELETE /v1/models/{id}."""
    return Call("DELETE", f"/v1/models/{model_id}", parse=_nothing)


def get_model_trace(model_id: str, since: int = 0) -> Call:
    """GET /v1/models/{id}/trace."""
    return Call("GET", f"/v1/models/{model_id}/trace", params={"since": since})


def predict(
    model_id: str,
    instances: list,
    probabilities: bool = False,
    ignore_unknown_features: bool = False,
    decision_function_shape: str = "ovr",
) -> Call:
    """POST /v1/models/{id}/predict: dense rows (lists) or sparse rows ({"index": value}).

    ``ignore_unknown_features``: a sparse index beyond the model's features is dropped (else a 422).
    ``decision_function_shape="ovo"``: a one-vs-one model's scores are its pairwise decision values.
    """
    body: dict = {"instances": instances}
    if probabilities:
        body["probabilities"] = True
    if ignore_unknown_features:
        body["ignore_unknown_features"] = True
    if decision_function_shape != "ovr":
        body["decision_function_shape"] = decision_function_shape
    return Call("POST", f"/v1/models/{model_id}/predict", json=body)


def evaluate(model_id: str, dataset_id: str) -> Call:
    """POST /v1/models/{id}/evaluate on a data set."""
    return Call("POST", f"/v1/models/{model_id}/evaluate", json={"dataset_id": dataset_id})


def export_model(model_id: str, format: str = "json") -> Call:
    """GET /v1/models/{id}/export: the file's bytes (json, liblinear, libsvm or onnx)."""
    return Call("GET", f"/v1/models/{model_id}/export", params={"format": format}, parse=_bytes)


def import_model(file: FileLike, format: str, n_features: int | None = None) -> Call:
    """POST /v1/models: a model file (json, liblinear or libsvm) becomes a model of the service."""
    return Call(
        "POST",
        "/v1/models",
        params=_query(format=format, n_features=n_features),
        file=file,
        file_name=_file_name(file, f"model.{format}"),
    )


# -- health -----------------------------------------------------------------------------------------


def health() -> Call:
    """GET /healthz."""
    return Call("GET", "/healthz")


def openapi_document() -> Call:
    """GET /openapi.json: the service's OpenAPI document (its solvers and what each takes)."""
    return Call("GET", "/openapi.json")


def ready() -> Call:
    """GET /readyz (answered, not raised, when not ready)."""
    return Call("GET", "/readyz")

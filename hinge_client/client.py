"""Sync and async clients of the Hinge API over httpx, thin by hand over the OpenAPI document.

Every method is one HTTP call (``train`` and ``wait_job`` poll) and returns the answer's JSON as a
dict typed in ``hinge_client.types``. Errors become ``HingeError`` with the service's code, message
and details. Answers 429 (too many queued jobs) and 503 (storage, the object store or the parser briefly
unavailable) are retried with exponential backoff, honouring ``Retry-After``, but not 503 ``store_misconfigured``
(the service's object store refuses it: a setting to fix); so are connection failures of GET and DELETE
requests. The base URL comes from the argument, else ``HINGE_URL``, else
http://127.0.0.1:8000; the API key from the argument, else ``HINGE_API_KEY`` (none: an open server).

    from hinge_client import Client
    with Client() as hinge:
        dataset = hinge.upload_dataset("train.svm")
        model = hinge.train(dataset["id"], "dcd", {"C": 1.0})
        print(hinge.predict(model["id"], [[0.5, 1.0, 0.0]])["labels"])
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from hinge_client import operations as ops
from hinge_client.errors import HingeError, JobFailed, warn_about
from hinge_client.operations import Call, FileLike, Progress
from hinge_client.types import Dataset, Evaluation, ExportFormat, ImportFormat, Job, Model, Page, Prediction, TracePage

DEFAULT_URL = "http://127.0.0.1:8000"
RETRY_STATUSES = (429, 503)
FINAL_CODES = ("store_misconfigured",)
"""503 answers that a retry cannot cure (the service's object store refuses it: an operator must fix a setting)."""
FINAL_STATUSES = ("succeeded", "failed", "canceled")
WAIT_S = 20.0
"""Longest wait of one GET /v1/jobs/{id}?wait_s=... in ``wait_job`` (at most half the client's timeout)."""
STREAM_RECONNECTS = 5  # reconnections of a lost event stream, in a row, before giving up


def _wait_s(end: float | None, now: float, timeout: float) -> float:
    """How long one request of ``wait_job`` asks the service to wait: WAIT_S, at most half the client's timeout,
    at most what is left before ``end``; rounded to milliseconds."""
    left = WAIT_S if end is None else max(0.0, end - now)
    return round(min(WAIT_S, timeout / 2, left), 3)


def _timeout(call: Call, timeout: float) -> httpx.Timeout:
    """A file's answer comes once the service has parsed it, however long that takes: no read timeout then."""
    return httpx.Timeout(timeout, read=None) if call.file is not None else httpx.Timeout(timeout)


def parse_sse(lines: Iterator[str]) -> Iterator[tuple[str, str | None, dict]]:
    """(event, id, JSON data) of each event in a text/event-stream (comments and retry lines skipped)."""
    kind, event_id, data = "message", None, []  # type: tuple[str, str | None, list[str]]
    for line in lines:
        if line == "":
            if data:
                yield kind, event_id, json.loads("\n".join(data))
            kind, data = "message", []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            kind = value
        elif field == "data":
            data.append(value)
        elif field == "id":
            event_id = value


def raise_for(response: httpx.Response) -> None:
    """HingeError for a 4xx/5xx answer (readiness answers are returned, not raised)."""
    if response.status_code < 400 or response.request.url.path == "/readyz":
        return
    try:
        error = response.json()["error"]
        code, message, details = error.get("code", "http_error"), error.get("message", ""), error.get("details")
    except Exception:
        code, message, details = "http_error", response.text[:500], None
    raise HingeError(response.status_code, code, message, details, dict(response.headers))


class RetryPolicy:
    """How many times and how long to wait: Retry-After when the answer gives it, else exponential backoff."""

    def __init__(self, retries: int = 5, backoff: float = 0.5, max_backoff: float = 30.0):
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff

    def delay(self, attempt: int, response: httpx.Response | None) -> float:
        """Seconds to wait before attempt ``attempt + 1``."""
        if response is not None:
            retry_after = response.headers.get("retry-after", "").strip()
            if retry_after.isdigit():
                return min(float(retry_after), self.max_backoff)
        return min(self.backoff * (2**attempt), self.max_backoff)

    def retry(self, attempt: int, call: Call, response: httpx.Response | None) -> bool:
        """Whether to try again after this answer (None: a connection failure)."""
        if attempt >= self.retries:
            return False
        if response is None:
            return call.method in ("GET", "DELETE")
        return response.status_code in RETRY_STATUSES and _error_code(response) not in FINAL_CODES


def _error_code(response: httpx.Response) -> str | None:
    """The ``error.code`` of an answer in the service's error shape, if it is one."""
    try:
        return response.json()["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return None


def _connection(base_url: str | None, api_key: str | None) -> tuple[str, dict]:
    url = (base_url or os.environ.get("HINGE_URL") or DEFAULT_URL).rstrip("/")
    key = api_key if api_key is not None else os.environ.get("HINGE_API_KEY")
    return url, ({"Authorization": f"Bearer {key}"} if key else {})


class Client:
    """Synchronous client. Methods take and return plain data (dicts typed in ``hinge_client.types``)."""

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 60.0,
        retries: int = 5,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ):
        self.base_url, headers = _connection(base_url, api_key)
        self.policy = RetryPolicy(retries, backoff, max_backoff)
        self.timeout = timeout
        self.http = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout, transport=transport)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool."""
        self.http.close()

    def send(self, call: Call) -> Any:
        """Send one operation, retrying as the policy says; its parsed answer, or HingeError."""
        attempt = 0
        while True:
            try:
                with call.files() as files:
                    response = self.http.request(
                        call.method,
                        call.path,
                        params=call.params,
                        json=call.json,
                        files=files,
                        timeout=_timeout(call, self.timeout),
                    )
            except httpx.TransportError:
                if not self.policy.retry(attempt, call, None):
                    raise
                time.sleep(self.policy.delay(attempt, None))
            else:
                if not self.policy.retry(attempt, call, response):
                    raise_for(response)
                    return call.parse(response)
                time.sleep(self.policy.delay(attempt, response))
            attempt += 1

    # data sets
    def upload_dataset(
        self,
        file: FileLike,
        *,
        name: str | None = None,
        format: str | None = None,
        zero_based: bool | str | None = None,
        label_column: str | None = None,
        value_dtype: str | None = None,
        on_progress: Progress | None = None,
    ) -> Dataset:
        """Upload a file (path, bytes or binary file object): svmlight or CSV, plain or gzip. A file named by its
        path is streamed from disk, calling ``on_progress(sent, total)`` as it goes."""
        return self.send(
            ops.upload_dataset(
                file,
                name=name,
                format=format,
                zero_based=zero_based,
                label_column=label_column,
                value_dtype=value_dtype,
                on_progress=on_progress,
            )
        )

    def upload_arrays(self, X, y, *, qid=None, name: str | None = None) -> Dataset:
        """Upload rows X (numpy or scipy sparse) with labels y (and query ids)."""
        return self.send(ops.upload_arrays(X, y, qid=qid, name=name))

    def get_dataset(self, dataset_id: str) -> Dataset:
        """One data set."""
        return self.send(ops.get_dataset(dataset_id))

    def list_datasets(self, offset: int = 0, limit: int = 100) -> Page:
        """A page of data sets, newest first."""
        return self.send(ops.list_datasets(offset, limit))

    def delete_dataset(self, dataset_id: str) -> None:
        """Delete a data set."""
        return self.send(ops.delete_dataset(dataset_id))

    # jobs
    def submit_job(self, dataset_id: str, solver: str = "dcd", params: dict | None = None) -> Job:
        """Queue a training job."""
        return self.send(ops.submit_job(dataset_id, solver, params))

    def get_job(self, job_id: str, wait_s: float | None = None) -> Job:
        """A job's state; with ``wait_s``, once it has ended or after that many seconds (a long poll)."""
        return self.send(ops.get_job(job_id, wait_s))

    def list_jobs(self, offset: int = 0, limit: int = 100, status: str | None = None) -> Page:
        """A page of jobs, newest first."""
        return self.send(ops.list_jobs(offset, limit, status))

    def get_trace(self, job_id: str, since: int = 0) -> TracePage:
        """A job's convergence points from ``since`` on."""
        return self.send(ops.get_trace(job_id, since))

    def cancel_job(self, job_id: str) -> Job:
        """Cancel a queued or running job."""
        return self.send(ops.cancel_job(job_id))

    def delete_job(self, job_id: str) -> None:
        """Delete a finished job and its trace (409 while it is queued or running: cancel it first)."""
        return self.send(ops.delete_job(job_id))

    def wait_job(self, job_id: str, timeout: float | None = None, poll: float = 0.2) -> Job:
        """Wait until a job ends; its final state (TimeoutError after ``timeout`` seconds).

        Each request waits on the service's side (``GET /v1/jobs/{id}?wait_s=...``), which answers as soon as
        the job ends; ``poll`` is the least time between two requests (a service that answers at once)."""
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            began = time.monotonic()
            job = self.get_job(job_id, _wait_s(end, began, self.timeout))
            if job["status"] in FINAL_STATUSES:
                return job
            if end is not None and time.monotonic() > end:
                raise TimeoutError(f"job {job_id} is still {job['status']} after {timeout} s")
            time.sleep(max(0.0, poll - (time.monotonic() - began)))

    def events(self, job_id: str) -> Iterator[tuple[str, dict]]:
        """(event, data) of a job's event stream (``status``, ``progress``, ``trace``, ...) up to its ``end`` event,
        whose data is the job's final state. A lost connection reconnects with Last-Event-ID (nothing lost or
        repeated); when ``STREAM_RECONNECTS`` reconnections in a row fail, the last httpx.TransportError is raised."""
        last_id: str | None = None
        failures = 0
        while True:
            headers = {"Accept": "text/event-stream"}
            if last_id is not None:
                headers["Last-Event-ID"] = last_id
            try:
                with self.http.stream(
                    "GET", f"/v1/jobs/{job_id}/events", headers=headers, timeout=httpx.Timeout(self.timeout, read=None)
                ) as response:
                    if response.status_code >= 400:
                        response.read()
                        raise_for(response)
                    for kind, event_id, data in parse_sse(response.iter_lines()):
                        failures = 0
                        if event_id is not None:
                            last_id = event_id
                        yield kind, data
                        if kind == "end":
                            return
            except httpx.TransportError:
                failures += 1
                if failures > STREAM_RECONNECTS:
                    raise

    def train(
        self, dataset_id: str, solver: str = "dcd", params: dict | None = None, *, timeout: float | None = None
    ) -> Model:
        """Submit a job, wait for it and return its model (JobFailed when it ends without one; a ``ResultWarning``
        for each of the model's warnings)."""
        job = self.wait_job(self.submit_job(dataset_id, solver, params)["id"], timeout=timeout)
        model_id = job.get("model_id")
        if job["status"] != "succeeded" or not model_id:
            raise JobFailed(job)
        model = self.get_model(model_id)
        warn_about(model)
        return model

    # models
    def get_model(self, model_id: str) -> Model:
        """One model."""
        return self.send(ops.get_model(model_id))

    def list_models(self, offset: int = 0, limit: int = 100) -> Page:
        """A page of models, newest first."""
        return self.send(ops.list_models(offset, limit))

    def delete_model(self, model_id: str) -> None:
        """Delete a model."""
        return self.send(ops.delete_model(model_id))

    def get_model_trace(self, model_id: str, since: int = 0) -> TracePage:
        """The convergence trace of the job that trained a model."""
        return self.send(ops.get_model_trace(model_id, since))

    def predict(
        self,
        model_id: str,
        instances: list,
        probabilities: bool = False,
        ignore_unknown_features: bool = False,
        decision_function_shape: str = "ovr",
    ) -> Prediction:
        """Labels and scores (and class probabilities, for calibrated models) of dense or sparse rows.

        ``ignore_unknown_features``: sparse indices beyond the model's features are dropped (else HingeError 422).
        ``decision_function_shape="ovo"``: a one-vs-one model's scores are one per pair of labels (scikit-learn's
        SVC order; HingeError 409 for a one-vs-rest model of more than two labels).
        """
        return self.send(
            ops.predict(model_id, instances, probabilities, ignore_unknown_features, decision_function_shape)
        )

    def evaluate(self, model_id: str, dataset_id: str) -> Evaluation:
        """Metrics of a model on a data set."""
        return self.send(ops.evaluate(model_id, dataset_id))

    def export_model(self, model_id: str, format: ExportFormat = "json") -> bytes:
        """A model file's bytes: json, liblinear, libsvm or onnx (``export_to`` streams into a file)."""
        return self.send(ops.export_model(model_id, format))

    def export_to(self, model_id: str, path: str | Path, format: ExportFormat = "json") -> Path:
        """Stream a model's export into a file (a large model never sits in memory); returns the path."""
        path = Path(path)
        with self.http.stream("GET", f"/v1/models/{model_id}/export", params={"format": format}) as response:
            if response.status_code >= 400:
                response.read()
                raise_for(response)
            with path.open("wb") as out:
                for piece in response.iter_bytes():
                    out.write(piece)
        return path

    def import_model(self, file: FileLike, format: ImportFormat, n_features: int | None = None) -> Model:
        """Import a model file (json, liblinear or libsvm)."""
        return self.send(ops.import_model(file, format, n_features))

    # health
    def health(self) -> dict:
        """Liveness."""
        return self.send(ops.health())

    def ready(self) -> dict:
        """Readiness: {status, redis, workers, detail}."""
        return self.send(ops.ready())

    def openapi(self) -> dict:
        """The service's OpenAPI document (``hinge_client.solvers.solvers_in`` reads its solvers from it)."""
        return self.send(ops.openapi_document())


class AsyncClient:
    """Asynchronous client: the methods of ``Client``, as coroutines."""

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 60.0,
        retries: int = 5,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ):
        self.base_url, headers = _connection(base_url, api_key)
        self.policy = RetryPolicy(retries, backoff, max_backoff)
        self.timeout = timeout
        self.http = httpx.AsyncClient(base_url=self.base_url, headers=headers, timeout=timeout, transport=transport)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self.http.aclose()

    async def send(self, call: Call) -> Any:
        """Send one operation, retrying as the policy says; its parsed answer, or HingeError."""
        attempt = 0
        while True:
            try:
                with call.files() as files:
                    response = await self.http.request(
                        call.method,
                        call.path,
                        params=call.params,
                        json=call.json,
                        files=files,
                        timeout=_timeout(call, self.timeout),
                    )
            except httpx.TransportError:
                if not self.policy.retry(attempt, call, None):
                    raise
                await asyncio.sleep(self.policy.delay(attempt, None))
            else:
                if not self.policy.retry(attempt, call, response):
                    raise_for(response)
                    return call.parse(response)
                await asyncio.sleep(self.policy.delay(attempt, response))
            attempt += 1

    async def upload_dataset(
        self,
        file: FileLike,
        *,
        name: str | None = None,
        format: str | None = None,
        zero_based: bool | str | None = None,
        label_column: str | None = None,
        value_dtype: str | None = None,
        on_progress: Progress | None = None,
    ) -> Dataset:
        """Upload a file (path, bytes or binary file object): svmlight or CSV, plain or gzip. A file named by its
        path is streamed from disk, calling ``on_progress(sent, total)`` as it goes."""
        return await self.send(
            ops.upload_dataset(
                file,
                name=name,
                format=format,
                zero_based=zero_based,
                label_column=label_column,
                value_dtype=value_dtype,
                on_progress=on_progress,
            )
        )

    async def upload_arrays(self, X, y, *, qid=None, name: str | None = None) -> Dataset:
        """Upload rows X (numpy or scipy sparse) with labels y (and query ids)."""
        return await self.send(ops.upload_arrays(X, y, qid=qid, name=name))

    async def get_dataset(self, dataset_id: str) -> Dataset:
        """One data set."""
        return await self.send(ops.get_dataset(dataset_id))

    async def list_datasets(self, offset: int = 0, limit: int = 100) -> Page:
        """A page of data sets, newest first."""
        return await self.send(ops.list_datasets(offset, limit))

    async def delete_dataset(self, dataset_id: str) -> None:
        """Delete a data set."""
        return await self.send(ops.delete_dataset(dataset_id))

    async def submit_job(self, dataset_id: str, solver: str = "dcd", params: dict | None = None) -> Job:
        """Queue a training job."""
        return await self.send(ops.submit_job(dataset_id, solver, params))

    async def get_job(self, job_id: str, wait_s: float | None = None) -> Job:
        """A job's state; with ``wait_s``, once it has ended or after that many seconds (a long poll)."""
        return await self.send(ops.get_job(job_id, wait_s))

    async def list_jobs(self, offset: int = 0, limit: int = 100, status: str | None = None) -> Page:
        """A page of jobs, newest first."""
        return await self.send(ops.list_jobs(offset, limit, status))

    async def get_trace(self, job_id: str, since: int = 0) -> TracePage:
        """A job's convergence points from ``since`` on."""
        return await self.send(ops.get_trace(job_id, since))

    async def cancel_job(self, job_id: str) -> Job:
        """Cancel a queued or running job."""
        return await self.send(ops.cancel_job(job_id))

    async def delete_job(self, job_id: str) -> None:
        """Delete a finished job and its trace (409 while it is queued or running: cancel it first)."""
        return await self.send(ops.delete_job(job_id))

    async def wait_job(self, job_id: str, timeout: float | None = None, poll: float = 0.2) -> Job:
        """Wait until a job ends; its final state (TimeoutError after ``timeout`` seconds). As ``Client.wait_job``."""
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            began = time.monotonic()
            job = await self.get_job(job_id, _wait_s(end, began, self.timeout))
            if job["status"] in FINAL_STATUSES:
                return job
            if end is not None and time.monotonic() > end:
                raise TimeoutError(f"job {job_id} is still {job['status']} after {timeout} s")
            await asyncio.sleep(max(0.0, poll - (time.monotonic() - began)))

    async def train(
        self, dataset_id: str, solver: str = "dcd", params: dict | None = None, *, timeout: float | None = None
    ) -> Model:
        """Submit a job, wait for it and return its model (JobFailed when it ends without one; a ``ResultWarning``
        for each of the model's warnings)."""
        job = await self.wait_job((await self.submit_job(dataset_id, solver, params))["id"], timeout=timeout)
        model_id = job.get("model_id")
        if job["status"] != "succeeded" or not model_id:
            raise JobFailed(job)
        model = await self.get_model(model_id)
        warn_about(model)
        return model

    async def get_model(self, model_id: str) -> Model:
        """One model."""
        return await self.send(ops.get_model(model_id))

    async def list_models(self, offset: int = 0, limit: int = 100) -> Page:
        """A page of models, newest first."""
        return await self.send(ops.list_models(offset, limit))

    async def delete_model(self, model_id: str) -> None:
        """Delete a model."""
        return await self.send(ops.delete_model(model_id))

    async def get_model_trace(self, model_id: str, since: int = 0) -> TracePage:
        """The convergence trace of the job that trained a model."""
        return await self.send(ops.get_model_trace(model_id, since))

    async def predict(
        self,
        model_id: str,
        instances: list,
        probabilities: bool = False,
        ignore_unknown_features: bool = False,
        decision_function_shape: str = "ovr",
    ) -> Prediction:
        """Labels and scores (and class probabilities, for calibrated models) of dense or sparse rows.

        ``ignore_unknown_features``: sparse indices beyond the model's features are dropped (else HingeError 422).
        ``decision_function_shape="ovo"``: a one-vs-one model's scores are one per pair of labels (scikit-learn's
        SVC order; HingeError 409 for a one-vs-rest model of more than two labels).
        """
        return await self.send(
            ops.predict(model_id, instances, probabilities, ignore_unknown_features, decision_function_shape)
        )

    async def evaluate(self, model_id: str, dataset_id: str) -> Evaluation:
        """Metrics of a model on a data set."""
        return await self.send(ops.evaluate(model_id, dataset_id))

    async def export_model(self, model_id: str, format: ExportFormat = "json") -> bytes:
        """A model file's bytes: json, liblinear, libsvm or onnx."""
        return await self.send(ops.export_model(model_id, format))

    async def import_model(self, file: FileLike, format: ImportFormat, n_features: int | None = None) -> Model:
        """Import a model file (json, liblinear or libsvm)."""
        return await self.send(ops.import_model(file, format, n_features))

    async def health(self) -> dict:
        """Liveness."""
        return await self.send(ops.health())

    async def ready(self) -> dict:
        """Readiness: {status, redis, workers, detail}."""
        return await self.send(ops.ready())

    async def openapi(self) -> dict:
        """The service's OpenAPI document (``hinge_client.solvers.solvers_in`` reads its solvers from it)."""
        return await self.send(ops.openapi_document())

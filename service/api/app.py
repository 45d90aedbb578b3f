"""The FastAPI application factory: lifespan (Redis, queue, ingest pool, model cache), middleware, routes."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import itertools
import logging
import uuid

import redis
from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse

from core.config import Settings, get_settings
from core.lifecycle import start_reaper_thread
from core.logs import request_id_var
from core.queueing import JobQueue
from core.schemas.model_files import ModelDocument
from core.schemas.models import PredictRequest
from core.storage.capacity import StorageFull, is_out_of_memory
from core.storage.connection import resilient_client
from core.storage.garbage import start_collector_thread
from core.storage.jobs import JobStore
from core.storage.objects import StoreError, StoreRefused, StoreUnavailable, object_store
from core.storage.records import dataset_store, model_store
from service.api import job_wait
from service.api.deps import key_digests_from, reject_unknown_query
from service.api.errors import BodyTimeout, BodyTooLarge, error_response, install_handlers
from service.api.metrics import MetricsMiddleware, build_registry
from service.api.predict import ModelCache
from service.api.predict_path import PredictPath
from service.api.routes import datasets, evaluation, health, job_events, jobs, model_files, models, plots
from service.api.routes.ui import install_ui
from service.ingest.pool import IngestPool

log = logging.getLogger("hinge.api")

DESCRIPTION = """
Hinge trains Support Vector Machines over HTTP. Upload a data set (svmlight/libsvm or CSV, gzip or
plain), submit a training job, follow its convergence trace while it runs, then predict.

One C convention for every solver (LIBLINEAR's): minimize 0.5*|w|^2 + C * sum_i loss_i.
Every error answer has the shape `{"error": {"code", "message", "details"}}`.
"""


class BodyLimitMiddleware:
    """Refuses JSON bodies over ``max_json_body_bytes`` while they stream (uploads have their own limit)."""

    def __init__(self, app, max_bytes: int):
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["path"] == "/v1/datasets":
            return await self.app(scope, receive, send)
        limit = self.max_bytes
        for name, value in scope.get("headers", []):
            if name == b"content-length" and value.isdigit() and int(value) > limit:
                response = error_response(
                    413,
                    "payload_too_large",
                    f"request body of {int(value)} bytes exceeds max_json_body_bytes = {limit}",
                    {"limit": "max_json_body_bytes", "value": limit},
                )
                return await response(scope, receive, send)
        received = 0

        async def counting_receive():
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge("max_json_body_bytes", limit)
            return message

        return await self.app(scope, counting_receive, send)


class BodyTimeoutMiddleware:
    """Answers 408 to a request whose body stops arriving, or arrives too slowly (lying or stalled clients).

    A body must keep arriving: each piece within ``timeout_s`` of the previous one, and, after the
    first ``timeout_s``, at an average of at least ``min_rate`` bytes per second (as Apache's
    mod_reqtimeout: the allowance grows by one second per ``min_rate`` bytes received). A client
    that announces `Content-Length: 1 GB` and sends 10 bytes gets its answer after ``timeout_s``;
    one that sends a byte a second, once the allowance is used up. Nothing it sent is kept (the
    upload's spool file is removed) and the connection is closed.
    """

    def __init__(self, app, timeout_s: float, min_rate: float):
        self.app = app
        self.timeout_s = timeout_s
        self.min_rate = min_rate

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        loop = asyncio.get_running_loop()
        started: float | None = None
        received = 0
        finished = False

        async def timed_receive():
            nonlocal started, received, finished
            if finished:  # after the body only a disconnect can come: no deadline
                return await receive()
            now = loop.time()
            if started is None:
                started = now
            wait = self.timeout_s
            if self.min_rate > 0:
                wait = min(wait, started + self.timeout_s + received / self.min_rate - now)
            if wait <= 0:
                raise BodyTimeout(received, self.timeout_s, self.min_rate, slow=True)
            try:
                async with asyncio.timeout(wait):  # a timer on this task (wait_for would start another task)
                    message = await receive()
            except TimeoutError:
                raise BodyTimeout(
                    received, self.timeout_s, self.min_rate, slow=loop.time() - now < self.timeout_s - 1e-3
                ) from None
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                finished = not message.get("more_body", False)
            return message

        return await self.app(scope, timed_receive, send)


_REQUEST_ID_PREFIX = uuid.uuid4().hex[:8]
_request_numbers = itertools.count(1)


def new_request_id() -> str:
    """A request id unique to this API process's life: a random prefix drawn at start and a counter (16 hex digits,
    as a uuid4's first 16 were; no system call per request: os.urandom showed in the event loop's profile)."""
    return f"{_REQUEST_ID_PREFIX}{next(_request_numbers) & 0xFFFFFFFF:08x}"


def settle_garbage_collector() -> None:
    """Once the application has started: collect, then freeze what is alive (the app, its routes, schemas and
    clients) out of the cyclic collector's reach, so that its full collections while serving walk only what requests
    made. Measured under bench_load's default mix: full collections of the API took up to 90-96 ms, each one holding
    every request in flight."""
    gc.collect()
    gc.freeze()


class RequestIdMiddleware:
    """Gives every request an id (the caller's `X-Request-ID`, or a new one) and echoes it in the answer."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        rid = None
        for name, value in scope.get("headers", []):
            if name == b"x-request-id":
                rid = value.decode("latin-1")[:64]
                break
        rid = rid or new_request_id()
        scope.setdefault("state", {})["request_id"] = rid
        header = (b"x-request-id", rid.encode("latin-1"))

        async def send_with_id(message):
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), header]
            await send(message)

        token = request_id_var.set(rid)  # every log line of this request carries its id
        try:
            return await self.app(scope, receive, send_with_id)
        finally:
            request_id_var.reset(token)


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the application; clients are created when it starts, not here."""
    settings = settings or get_settings()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        if not settings.redis_url:
            raise RuntimeError("REDIS_URL is not set: run `hinge serve` (it starts an embedded Redis) or set REDIS_URL")
        # Short retries: a request waits a few seconds for a restarting Redis, then gets a 503.
        client = resilient_client(settings.redis_url, min(settings.redis_retry_s, 5.0), health_check_interval=30)
        app.state.settings = settings
        app.state.redis = client
        app.state.datasets = dataset_store(client, settings)
        app.state.models = model_store(client, settings)
        app.state.objects = object_store(settings)
        app.state.jobs = JobStore(client)
        app.state.job_queue = JobQueue(client, settings)
        reaper, reaper_stop = start_reaper_thread(client, settings)
        collector, collector_stop = start_collector_thread(client, settings)
        app.state.ingest = IngestPool(settings.ingest_processes)
        app.state.ingest.start()
        await app.state.ingest.ready()
        app.state.model_cache = ModelCache(settings.model_cache_size)
        app.state.key_digests = key_digests_from(settings)
        settle_garbage_collector()
        try:
            yield
        finally:
            reaper_stop.set()
            collector_stop.set()
            reaper.join(5)
            app.state.ingest.close(wait=True)  # no upload is in flight any more: their processes exit at once
            job_wait.stop_watcher(app)
            client.close()

    app = FastAPI(
        generate_unique_id_function=lambda route: route.name,
        title="Hinge",
        version="0.1.0",
        description=DESCRIPTION,
        lifespan=lifespan,
        dependencies=[Depends(reject_unknown_query)],
        docs_url=None,  # /docs and /redoc come from service.api.routes.ui, with vendored scripts
        redoc_url=None,
        openapi_tags=[
            {"name": "datasets", "description": "Upload and manage training data."},
            {"name": "jobs", "description": "Train models; follow their convergence; cancel."},
            {"name": "models", "description": "Trained models and prediction."},
            {"name": "plots", "description": "Pictures of convergence traces and searches (SVG, PNG)."},
            {"name": "health", "description": "Liveness and readiness."},
        ],
    )
    install_handlers(app)

    @app.exception_handler(redis.exceptions.ConnectionError)
    async def _redis_down(request: Request, exc: Exception) -> JSONResponse:
        log.error("Redis unavailable: %s", exc)
        return error_response(
            503, "storage_unavailable", "storage is unavailable; try again shortly", headers={"Retry-After": "5"}
        )

    @app.exception_handler(StoreError)
    async def _store_error(request: Request, exc: StoreError) -> JSONResponse:
        log.error("object store: %s", exc)
        if isinstance(exc, StoreUnavailable):
            message = f"the object store is unavailable ({exc}); try again shortly"
            return error_response(503, exc.code, message, {"store": exc.store}, headers={"Retry-After": "5"})
        if isinstance(exc, StoreRefused):
            message = f"the object store refused the request ({exc}); an operator must fix its settings"
            return error_response(503, exc.code, message, {"store": exc.store})
        request_id = getattr(request.state, "request_id", None)
        message = f"stored data is missing or damaged in the object store: {exc} (request id {request_id})"
        return error_response(500, exc.code, message, {"store": exc.store})

    @app.exception_handler(StorageFull)
    async def _storage_full(request: Request, exc: StorageFull) -> JSONResponse:
        return error_response(507, "storage_full", str(exc), exc.details())

    @app.exception_handler(redis.exceptions.ResponseError)
    async def _redis_refused(request: Request, exc: redis.exceptions.ResponseError) -> JSONResponse:
        if is_out_of_memory(exc):  # a small write (a job record) while Redis is full to its last byte
            log.warning("Redis is full: %s", exc)
            return error_response(
                507,
                "storage_full",
                "storage is full (Redis is at its maxmemory); nothing was "
                "stored: try again after data sets, models or jobs were deleted",
            )
        request_id = getattr(request.state, "request_id", None)
        log.error(
            "Redis refused a command on %s %s (request %s): %s", request.method, request.url.path, request_id, exc
        )
        return error_response(
            500, "internal_error", f"internal error; the request did not complete (request id {request_id})"
        )

    app.add_middleware(PredictPath, application=app)
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_json_body_bytes)
    app.add_middleware(BodyTimeoutMiddleware, timeout_s=settings.body_timeout_s, min_rate=settings.body_min_rate)
    app.add_middleware(RequestIdMiddleware)
    app.state.metrics_registry, requests_total, latency = build_registry(app)
    app.add_middleware(MetricsMiddleware, requests=requests_total, latency=latency)
    for router in (
        datasets.router,
        jobs.router,
        job_events.router,
        models.router,
        model_files.router,
        plots.router,
        evaluation.router,
        health.router,
    ):
        app.include_router(router)
    install_ui(app)
    install_openapi(app)
    return app


BODY_SCHEMAS = (PredictRequest, ModelDocument)
"""Bodies parsed by the routes themselves (pydantic's JSON parser), documented here (ModelDocument: the
body of a JSON export, and the file of a JSON import)."""


def install_openapi(app: FastAPI) -> None:
    """Document the real error shape: every 422 (and other error) answer is an ErrorResponse."""
    from fastapi.openapi.utils import get_openapi

    from service.api.openapi_docs import finish_document

    def openapi() -> dict:
        if app.openapi_schema:
            return app.openapi_schema
        schema = get_openapi(
            title=app.title, version=app.version, description=app.description, routes=app.routes, tags=app.openapi_tags
        )
        error_ref = {"$ref": "#/components/schemas/ErrorResponse"}
        for operations in schema.get("paths", {}).values():
            for operation in operations.values():
                responses = operation.get("responses", {})
                if "422" in responses:
                    responses["422"] = {
                        "description": responses["422"].get("description", "Validation error")
                        if responses["422"].get("description") != "Validation Error"
                        else "Invalid request: the message and details name the field.",
                        "content": {"application/json": {"schema": error_ref}},
                    }
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        for extra in BODY_SCHEMAS:
            extra_schema = extra.model_json_schema(ref_template="#/components/schemas/{model}")
            for name, definition in extra_schema.pop("$defs", {}).items():
                components.setdefault(name, definition)
            components[extra.__name__] = extra_schema
        components.pop("HTTPValidationError", None)
        components.pop("ValidationError", None)
        components.pop("ValidationErrorContext", None)
        finish_document(schema)
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's documented way to post-process the schema

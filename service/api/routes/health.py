"""Liveness, readiness and Prometheus metrics."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, Field

from service.lifecycle import live_worker_count

router = APIRouter(tags=["health"])


class Health(BaseModel):
    """Whether the service can do its work."""

    status: str = Field(description="`ok`, or `unavailable` with the reason in `detail`.")
    redis: bool | None = Field(default=None, description="Whether Redis answered.")
    workers: int | None = Field(default=None, description="Number of workers with a current heartbeat.")
    detail: str | None = Field(default=None, description="What is missing when not ready.")


@router.get("/healthz", response_model=Health, summary="Liveness: the API process is up")
def healthz() -> dict:
    """Always ok while the process serves requests."""
    return {"status": "ok"}


@router.get("/readyz", response_model=Health, summary="Readiness: Redis reachable and at least one worker",
            responses={503: {"model": Health, "description": "Not ready."}})
def readyz(request: Request):
    """Ready when Redis answers and at least one worker's heartbeat is current."""
    try:
        request.app.state.redis.ping()
        workers = live_worker_count(request.app.state.redis)
    except Exception:
        return JSONResponse({"status": "unavailable", "redis": False, "detail": "Redis does not answer"}, status_code=503)
    if workers < 1:
        return JSONResponse({"status": "unavailable", "redis": True, "workers": 0, "detail": "no worker is running"}, status_code=503)
    return {"status": "ok", "redis": True, "workers": workers}


@router.get(
    "/metrics",
    summary="Prometheus metrics",
    response_class=Response,
    responses={200: {"description": "Metrics in the Prometheus text format.", "content": {"text/plain": {"schema": {"type": "string"}}}}},
)
def metrics(request: Request) -> Response:
    """Requests and latencies by route and status; jobs by status; queue depth; workers; solver seconds; data sets."""
    return Response(generate_latest(request.app.state.metrics_registry), media_type=CONTENT_TYPE_LATEST)

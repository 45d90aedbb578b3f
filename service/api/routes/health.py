"""Liveness, readiness and Prometheus metrics."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, Field

from service.lifecycle import worker_beats

router = APIRouter(tags=["health"])


class Health(BaseModel):
    """Whether the service can do its work."""

    status: str = Field(description="`ok`; `warming` while the workers compile their solver kernels (first run); "
                        "`unavailable` with the reason in `detail`.")
    redis: bool | None = Field(default=None, description="Whether Redis answered.")
    workers: int | None = Field(default=None, description="Number of workers with a current heartbeat that take jobs.")
    warming: int | None = Field(default=None, description="Workers still compiling their kernels.")
    kernels_left: list[str] | None = Field(default=None, description="Solvers whose kernels some worker still compiles.")
    detail: str | None = Field(default=None, description="What is missing when not ready, or what is left to warm.")


@router.get("/healthz", response_model=Health, summary="Liveness: the API process is up")
def healthz() -> dict:
    """Always ok while the process serves requests."""
    return {"status": "ok"}


@router.get("/readyz", response_model=Health, summary="Readiness: Redis reachable and at least one worker",
            responses={503: {"model": Health, "description": "Not ready."}})
def readyz(request: Request):
    """Ready when Redis answers and at least one worker's heartbeat is current and its kernels are warm.

    While the workers compile their kernels (the first run), 503 with status `warming` and the solvers left."""
    try:
        request.app.state.redis.ping()
        beats = worker_beats(request.app.state.redis)
    except Exception:
        return JSONResponse({"status": "unavailable", "redis": False, "detail": "Redis does not answer"}, status_code=503)
    workers = sum(1 for beat in beats.values() if beat.get("ready", True))
    warming = [beat["warming"] for beat in beats.values() if not beat.get("ready", True) and beat.get("warming")]
    if workers < 1 and warming:
        left = sorted({name for state in warming for name in state.get("left", [])})
        detail = (f"{len(warming)} worker(s) compiling solver kernels (first run only; cached afterwards): "
                  f"{', '.join(left) or 'finishing'} left")
        return JSONResponse({"status": "warming", "redis": True, "workers": 0, "warming": len(warming),
                             "kernels_left": left, "detail": detail}, status_code=503)
    if workers < 1:
        starting = sum(1 for beat in beats.values() if not beat.get("ready", True))
        detail = f"{starting} worker(s) starting" if starting else "no worker is running (start one: hinge worker)"
        return JSONResponse({"status": "unavailable", "redis": True, "workers": 0, "detail": detail}, status_code=503)
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

"""Liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from rq import Worker

router = APIRouter(tags=["health"])


class Health(BaseModel):
    """Whether the service can do its work."""

    status: str = Field(description="`ok`, or `unavailable` with the reason in `detail`.")
    redis: bool | None = Field(default=None, description="Whether Redis answered.")
    workers: int | None = Field(default=None, description="Number of live workers on the queue.")
    detail: str | None = Field(default=None, description="What is missing when not ready.")


@router.get("/healthz", response_model=Health, summary="Liveness: the API process is up")
def healthz() -> dict:
    """Always ok while the process serves requests."""
    return {"status": "ok"}


@router.get("/readyz", response_model=Health, summary="Readiness: Redis reachable and at least one worker",
            responses={503: {"model": Health, "description": "Not ready."}})
def readyz(request: Request):
    """Ready when Redis answers and at least one worker listens on the queue."""
    try:
        request.app.state.redis.ping()
        workers = Worker.count(queue=request.app.state.queue)
    except Exception:
        return JSONResponse({"status": "unavailable", "redis": False, "detail": "Redis does not answer"}, status_code=503)
    if workers < 1:
        return JSONResponse({"status": "unavailable", "redis": True, "workers": 0, "detail": "no worker is running"}, status_code=503)
    return {"status": "ok", "redis": True, "workers": workers}

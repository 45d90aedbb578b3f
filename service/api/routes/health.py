"""Liveness, readiness and Prometheus metrics."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import BaseModel, Field

from core.lifecycle import live_worker_count, solver_readiness, worker_beats
from core.schemas.base import ErrorResponse, ReadinessDetails
from core.solvers import SOLVERS
from core.storage import keys
from core.storage.objects import ObjectStore, StoreError, StoreRefused
from service.api.errors import error_response

router = APIRouter(tags=["health"])


class Health(BaseModel):
    """The service can do its work (readiness), or the API process is up (liveness)."""

    status: str = Field(
        description="`ok`; `degraded` when the object store does not answer (predictions work, uploads and jobs on "
        "data sets not cached wait or answer 503); a 503 answer carries `warming` or `unavailable` in "
        "`error.details.status`."
    )
    redis: bool | None = Field(default=None, description="Whether Redis answered.")
    workers: int | None = Field(default=None, description="Number of workers with a current heartbeat that take jobs.")
    solvers_ready: list[str] | None = Field(
        default=None,
        description="Readiness: solvers whose code the workers' machines have compiled (a job of theirs starts "
        "at once); null on /healthz.",
    )
    solvers_compiling: list[str] | None = Field(
        default=None,
        description="Readiness: solvers whose code is still being compiled (the first run on a machine; their "
        "jobs wait in the queue, `progress.phase` `waiting for compilation`); null on /healthz.",
    )
    formulations_compiling: dict[str, str] | None = Field(
        default=None,
        description="Readiness: solvers of `solvers_compiling` whose default formulation is compiled (its jobs start "
        "at once) while the code of their other formulations still compiles, with what those are (dcd: `logistic "
        "regression, SVR, one-class and L1`: a hinge or squared-hinge job trains now, a logistic one waits in the "
        "queue). Empty when none; null on /healthz.",
    )
    compile_eta_s: float | None = Field(
        default=None,
        description="Readiness: estimated seconds until every solver's code is compiled (0 when it is); null on "
        "/healthz.",
    )
    solvers_failed: list[str] | None = Field(
        default=None,
        description="Readiness: solvers whose code a machine's background compile failed to build (the worker's "
        "log says why); a job of theirs compiles it again and fails with the error if it fails again. Empty when "
        "none; null on /healthz.",
    )
    kernels_eta_s: float | None = Field(
        default=None,
        description="Deprecated: the same as `compile_eta_s`, its earlier name, kept for one more version.",
    )
    object_store: str | None = Field(
        default=None,
        description="Readiness: `ok` when the object store (data sets, large models) answers, else `unavailable: "
        "...` (status `degraded`); null on /healthz.",
    )


@router.get("/healthz", response_model=Health, summary="Liveness: the API process is up")
async def healthz() -> Health:
    """Always ok while the process serves requests."""
    return Health(status="ok")


def _not_ready(message: str, **found) -> JSONResponse:
    """503 in the one error shape; what readiness found is in ``details``, every field present (null: not known)."""
    details = dict.fromkeys(ReadinessDetails.model_fields) | found
    return error_response(503, "not_ready", message, ReadinessDetails.model_validate(details).model_dump())


@router.get(
    "/readyz",
    response_model=Health,
    summary="Readiness: Redis reachable, the object store accepting us, and at least one worker",
    responses={
        503: {
            "model": ErrorResponse,
            "description": "Not ready: `details.status` is `warming` "
            "(solvers' code compiling, `details.solvers_compiling`) or `unavailable`.",
        }
    },
)
def readyz(request: Request) -> Health | JSONResponse:
    """Ready when Redis answers, the object store does not refuse us, and at least one worker's heartbeat is
    current and it takes jobs (its first solver, dcd, is warm); the answer says which solvers are ready and
    which still compile, and whether the object store answers (`degraded` when it does not: predictions go on).

    Otherwise 503 `not_ready` in the error shape, with the readiness in `details`: `status` is `warming`
    while the workers compile their first solver's code (the first run), with the solvers left; else `unavailable`
    (Redis does not answer, the object store refuses our requests: a setting to fix, or no worker)."""
    try:
        request.app.state.redis.ping()
        beats = worker_beats(request.app.state.redis)
    except Exception:
        return _not_ready("Redis does not answer", status="unavailable", redis=False)
    store = store_state(request.app.state.objects)
    if store.startswith("refused"):
        return _not_ready(f"the object store {store}", status="unavailable", redis=True, object_store=store)
    workers = sum(1 for beat in beats.values() if beat.get("ready", True))
    solvers = solver_readiness(beats)
    left, ready, failed, eta = solvers["left"], sorted(solvers["ready"]), solvers["failed"], solvers["eta_s"]
    if workers < 1 and solvers["warming"]:
        detail = (
            f"{solvers['warming']} worker(s) compiling solver code (first run only; cached afterwards): "
            f"{', '.join(left) or 'finishing'} left, about {eta:.0f} s"
        )
        compiling = {"solvers_compiling": left, "compile_eta_s": eta, "kernels_left": left, "kernels_eta_s": eta}
        return _not_ready(detail, status="warming", redis=True, workers=0, warming=solvers["warming"], **compiling)
    if workers < 1:
        starting = sum(1 for beat in beats.values() if not beat.get("ready", True))
        detail = f"{starting} worker(s) starting" if starting else "no worker is running (start one: hinge worker)"
        return _not_ready(detail, status="unavailable", redis=True, workers=0)
    return Health(
        status="ok" if store == "ok" else "degraded",
        redis=True,
        workers=workers,
        solvers_ready=ready,
        solvers_compiling=left,
        formulations_compiling={name: SOLVERS[name].formulation_names for name in solvers["partly"]},
        compile_eta_s=eta,
        solvers_failed=failed,
        kernels_eta_s=eta,
        object_store=store,
    )


def store_state(objects: ObjectStore) -> str:
    """``ok``, ``unavailable: why`` or ``refused: why`` (an answer within about 3 s)."""
    try:
        objects.probe()
    except StoreRefused as exc:
        return f"refused: {exc}"
    except StoreError as exc:
        return f"unavailable: {exc}"
    return "ok"


class QueueStats(BaseModel):
    """How much work waits for workers, across every tenant: what an autoscaler reads (KEDA's metrics-api scaler)."""

    queued: int = Field(description="Jobs accepted and not started yet (every tenant's queue).")
    running: int = Field(description="Jobs running on a worker now.")
    pending: int = Field(
        description="`queued + running`: the jobs that need a worker now. Scale workers to this (one job a worker); "
        "counting the running ones keeps a scale-down from stopping a worker in the middle of its job."
    )
    workers: int = Field(description="Workers with a current heartbeat.")


@router.get(
    "/queue",
    response_model=QueueStats,
    summary="Jobs waiting for workers, for autoscalers",
    responses={503: {"model": ErrorResponse, "description": "Redis does not answer (`storage_unavailable`)."}},
)
def queue_stats(request: Request) -> QueueStats:
    """Jobs queued and running over every tenant, and the live workers (no API key needed, as /metrics: it names
    no tenant and no job)."""
    client = request.app.state.redis
    stats = {k.decode(): int(float(v)) for k, v in client.hgetall(keys.job_stats()).items()}
    queued, running = max(0, stats.get("queued", 0)), max(0, stats.get("running", 0))
    return QueueStats(queued=queued, running=running, pending=queued + running, workers=live_worker_count(client))


@router.get(
    "/metrics",
    summary="Prometheus metrics",
    response_class=Response,
    responses={
        200: {
            "description": "Metrics in the Prometheus text format.",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        }
    },
)
def metrics(request: Request) -> Response:
    """Requests and latencies by route and status; jobs by status; queue depth; workers; solver seconds; data sets."""
    return Response(generate_latest(request.app.state.metrics_registry), media_type=CONTENT_TYPE_LATEST)

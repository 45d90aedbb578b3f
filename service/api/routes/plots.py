"""Pictures: a job's convergence trace (SVG or PNG) and a search's scores against C (see service/plots.py).

Drawn on request from what Redis holds now, so the trace picture of a running job shows the points
recorded so far. Drawing takes a fraction of a second and runs in the thread pool, off the event loop.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import Response

from core.schemas.base import ErrorResponse
from core.storage.job_record import JobRecord
from core.storage.jobs import JobStore
from service import plots
from service.api.deps import JobDep, JobStoreDep, ModelDep
from service.api.errors import ApiError

router = APIRouter(tags=["plots"])

MEDIA = {"svg": "image/svg+xml", "png": "image/png"}
ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorResponse, "description": "No such job or model (or not yours), or no search to draw."},
    401: {"model": ErrorResponse, "description": "Missing or invalid API key."},
}


def _image(figure, fmt: str) -> Response:
    return Response(plots.render(figure, fmt), media_type=MEDIA[fmt], headers={"Cache-Control": "no-cache"})


def _responses(fmt: str) -> dict:
    # The media type is named in the description, not as `content`: generated clients (openapi-python-client)
    # refuse image/* content types, and a picture is for browsers and people, not for typed clients.
    return {**ERRORS, 200: {"description": f"The picture ({fmt.upper()}, `{MEDIA[fmt]}`)."}}


def _trace_picture(job: JobRecord, fmt: str, jobs: JobStore) -> Response:
    points = jobs.trace(job.id)
    title = f"{job.solver} on {job.dataset_id}: job {job.id} ({job.status.value})"
    return _image(plots.trace_figure(points, title), fmt)


def _search_table(table: dict | None, kind: str, ident: str) -> dict:
    if not table:
        raise ApiError(
            404,
            "search_not_found",
            f"{kind} {ident} has no search results: only jobs with params.search cross-validate settings",
        )
    return table


@router.get(
    "/v1/jobs/{job_id}/trace.svg",
    summary="Picture of a job's convergence trace (SVG)",
    response_class=Response,
    responses=_responses("svg"),
)
def job_trace_svg(job: JobDep, jobs: JobStoreDep) -> Response:
    """Primal and dual (or lower bound) above, the gap below, against solver seconds on log scales; one colour
    per binary problem. Lines have SVG ids `primal-<k>`, `dual-<k>`, `gap-<k>`."""
    return _trace_picture(job, "svg", jobs)


@router.get(
    "/v1/jobs/{job_id}/trace.png",
    summary="Picture of a job's convergence trace (PNG)",
    response_class=Response,
    responses=_responses("png"),
)
def job_trace_png(job: JobDep, jobs: JobStoreDep) -> Response:
    """The trace picture as a PNG."""
    return _trace_picture(job, "png", jobs)


@router.get(
    "/v1/jobs/{job_id}/search.svg",
    summary="Picture of a running or finished search's scores (SVG)",
    response_class=Response,
    responses=_responses("svg"),
)
def job_search_svg(job: JobDep) -> Response:
    """The cross-validated score against C, error bars of one standard deviation, one line per gamma (as it fills)."""
    table = _search_table(job.search_results, "job", job.id)
    return _image(plots.search_figure(table, f"search of job {job.id}"), "svg")


@router.get(
    "/v1/models/{model_id}/search.svg",
    summary="Picture of the search that chose a model (SVG)",
    response_class=Response,
    responses=_responses("svg"),
)
def model_search_svg(model: ModelDep) -> Response:
    """The cross-validated score against C (log scale), error bars of one standard deviation over the folds, one
    line per gamma (SVG ids `search-gamma-<gamma>` or `search-C`), the chosen setting starred (`search-best`)."""
    table = _search_table(model.search_results, "model", model.id)
    return _image(plots.search_figure(table, f"search of model {model.id}"), "svg")


@router.get(
    "/v1/models/{model_id}/search.png",
    summary="Picture of the search that chose a model (PNG)",
    response_class=Response,
    responses=_responses("png"),
)
def model_search_png(model: ModelDep) -> Response:
    """The search picture as a PNG."""
    table = _search_table(model.search_results, "model", model.id)
    return _image(plots.search_figure(table, f"search of model {model.id}"), "png")

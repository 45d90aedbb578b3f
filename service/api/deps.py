"""Dependencies handed to routes: settings, the stores, the caller's tenant and the records a path names.

Clients are made in the application's lifespan (never at import time) and kept on ``app.state``.
Routes take them through the ``Annotated`` aliases at the end of this module (``SettingsDep``,
``JobStoreDep``, ``TenantDep``, ...), as FastAPI's full-stack template does; ``JobDep``,
``ModelDep`` and ``DatasetDep`` are the caller's record named in the path (typed: ``JobRecord``,
``ModelRecord``, ``DatasetRecord``), or a 404.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from typing import Annotated

from fastapi import Depends, Path, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from core.config import Settings
from core.storage.documents import DatasetRecord, ModelRecord
from core.storage.job_record import JobRecord
from core.storage.jobs import JobStore
from core.storage.records import RecordStore
from service.api.errors import ApiError, not_found

PUBLIC_TENANT = "public"

_bearer = HTTPBearer(auto_error=False, description="API key, when the server has keys configured.")


async def settings_dep(request: Request) -> Settings:
    """The settings the application was created with."""
    return request.app.state.settings


async def datasets_dep(request: Request) -> RecordStore[DatasetRecord]:
    """The data-set store."""
    return request.app.state.datasets


async def models_dep(request: Request) -> RecordStore[ModelRecord]:
    """The model store."""
    return request.app.state.models


async def jobs_dep(request: Request) -> JobStore:
    """The job store."""
    return request.app.state.jobs


def _key_digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


# These dependencies are coroutines: FastAPI would run plain functions in its thread pool, a hop that
# costs more than the work they do. tenant_dep asks Redis whether it holds any API key at most every
# couple of seconds; when it does, the presented key is looked up (one HMGET) on every request.
async def tenant_dep(request: Request, credentials: HTTPAuthorizationCredentials | None = Depends(_bearer)) -> str:
    """The tenant of the caller: 'public' when no keys are configured, else the key's tenant (401 without one).

    Keys come from the HINGE_API_KEYS setting and from Redis (`hinge keys create`); both are
    compared by their SHA-256 digests in constant time (see core/storage/apikeys.py).
    """
    key_digests: list[tuple[bytes, str]] = request.app.state.key_digests
    if not key_digests and not _redis_keys_active(request):
        return PUBLIC_TENANT
    if credentials is None or credentials.scheme.lower() != "bearer" or not credentials.credentials:
        raise ApiError(
            401,
            "unauthorized",
            "missing API key: send `Authorization: Bearer <key>`",
            headers={"WWW-Authenticate": "Bearer"},
        )
    digest = _key_digest(credentials.credentials)
    tenant = None
    for known, owner in key_digests:
        if hmac.compare_digest(known, digest):
            tenant = owner
    if tenant is None:
        from core.storage.apikeys import ApiKeyStore

        tenant = ApiKeyStore(request.app.state.redis).tenant_of(credentials.credentials)
    if tenant is None:
        raise ApiError(401, "unauthorized", "invalid API key", headers={"WWW-Authenticate": "Bearer"})
    return tenant


async def request_tenant(request: Request) -> str:
    """``tenant_dep`` outside FastAPI's dependency solving: the caller's tenant from the request's own
    `Authorization` header, read by the same ``HTTPBearer`` (``service.api.predict_path``)."""
    return await tenant_dep(request, await _bearer(request))


_ACTIVE_CACHE_S = 2.0


def _redis_keys_active(request: Request) -> bool:
    """Whether Redis holds an active API key (cached for a couple of seconds per process)."""
    state = request.app.state
    cached = getattr(state, "redis_keys_active", None)
    now = time.monotonic()
    if cached is not None and now - cached[1] < _ACTIVE_CACHE_S:
        return cached[0]
    from core.storage.apikeys import ApiKeyStore

    active = ApiKeyStore(state.redis).any_active()
    state.redis_keys_active = (active, now)
    return active


_query_names: dict[int, frozenset[str]] = {}


def _declared_query_names(route) -> frozenset[str]:
    """The query parameters a route declares (its own and its dependencies'), computed once per route."""
    names = _query_names.get(id(route))
    if names is None:
        found: set[str] = set()
        todo = [getattr(route, "dependant", None)]
        while todo:
            dependant = todo.pop()
            if dependant is not None:
                found.update(param.alias for param in dependant.query_params)
                todo.extend(dependant.dependencies)
        names = _query_names[id(route)] = frozenset(found)
    return names


async def reject_unknown_query(request: Request) -> None:
    """422 naming every query parameter the route does not take (a typo or a wish must not pass silently).

    Applied to every route of the API (an application-wide dependency; the pages for people, left out
    of the OpenAPI document, are not checked); `?probability=true` on predict is refused.
    """
    if not request.scope.get("query_string"):  # most requests: nothing to check, nothing to parse
        return
    route = request.scope.get("route")
    if not getattr(route, "include_in_schema", True):
        return  # pages for people (dashboard, /docs and its OAuth redirect): not part of the API
    allowed = _declared_query_names(route)
    unknown = list(dict.fromkeys(name for name in request.query_params.keys() if name not in allowed))
    if unknown:
        takes = ", ".join(sorted(allowed)) if allowed else "no query parameters"
        plural = "s" if len(unknown) > 1 else ""
        raise ApiError(
            422,
            "validation_error",
            f"unknown query parameter{plural} {', '.join(repr(n) for n in unknown)}: this route takes {takes}",
            [{"loc": ["query", name], "msg": "unknown query parameter", "type": "extra_forbidden"} for name in unknown],
        )


def key_digests_from(settings: Settings) -> list[tuple[bytes, str]]:
    """The configured API keys as (digest, tenant) pairs."""
    return [(_key_digest(key), tenant) for key, tenant in settings.api_keys.items()]


DatasetIdPath = Annotated[str, Path(description="Data set id (`ds_…`).", max_length=100)]
JobIdPath = Annotated[str, Path(description="Job id (`job_…`).", max_length=100)]
ModelIdPath = Annotated[str, Path(description="Model id (`mdl_…`).", max_length=100)]

SettingsDep = Annotated[Settings, Depends(settings_dep)]
DatasetStoreDep = Annotated[RecordStore[DatasetRecord], Depends(datasets_dep)]
ModelStoreDep = Annotated[RecordStore[ModelRecord], Depends(models_dep)]
JobStoreDep = Annotated[JobStore, Depends(jobs_dep)]
TenantDep = Annotated[str, Depends(tenant_dep)]


# Get-or-404: plain functions, so FastAPI runs their Redis look-up in its thread pool, off the event loop.
def job_record(job_id: JobIdPath, jobs: JobStoreDep, tenant: TenantDep) -> JobRecord:
    """The caller's job named in the path; 404 `job_not_found` when there is none (or it is another tenant's)."""
    job = jobs.get(job_id, tenant)
    if job is None:
        raise not_found("job", job_id)
    return job


def model_record(model_id: ModelIdPath, models: ModelStoreDep, tenant: TenantDep) -> ModelRecord:
    """The caller's model named in the path; 404 `model_not_found` when there is none (or it is another tenant's)."""
    model = models.get(model_id, tenant)
    if model is None:
        raise not_found("model", model_id)
    return model


def dataset_record(dataset_id: DatasetIdPath, datasets: DatasetStoreDep, tenant: TenantDep) -> DatasetRecord:
    """The caller's data set named in the path; 404 `dataset_not_found` when there is none (or another tenant's)."""
    dataset = datasets.get(dataset_id, tenant)
    if dataset is None:
        raise not_found("dataset", dataset_id)
    return dataset


JobDep = Annotated[JobRecord, Depends(job_record)]
ModelDep = Annotated[ModelRecord, Depends(model_record)]
DatasetDep = Annotated[DatasetRecord, Depends(dataset_record)]

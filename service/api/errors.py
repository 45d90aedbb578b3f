"""Domain errors and the handlers that turn every error into the one JSON shape.

Every 4xx/5xx answer is ``{"error": {"code", "message", "details"}}``. Internals (tracebacks,
Redis errors) never reach a response: a 500 says only that something failed on our side and gives
the request id to quote.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from core.schemas.kernel_params import KERNEL_TYPES
from core.solvers import SOLVERS

log = logging.getLogger("hinge.api")


class ApiError(Exception):
    """An error answered with ``status`` and the JSON error shape."""

    def __init__(self, status: int, code: str, message: str, details: Any = None, headers: dict | None = None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.headers = headers


def not_found(kind: str, ident: str) -> ApiError:
    """404 for a data set, job or model that does not exist (or belongs to another tenant)."""
    return ApiError(404, f"{kind}_not_found", f"no {kind.replace('_', ' ')} with id {ident!r}")


def unprocessable(message: str, loc: list | None = None, code: str = "validation_error") -> ApiError:
    """422 for a request that is well formed but says something impossible."""
    details = [{"loc": loc, "msg": message, "type": code}] if loc is not None else None
    return ApiError(422, code, message, details)


def too_large(limit: str, value: int, message: str) -> ApiError:
    """413 for a body or data set over one of the configured limits."""
    return ApiError(413, "payload_too_large", message, {"limit": limit, "value": value})


class BodyTooLarge(StarletteHTTPException):
    """Raised from inside the request stream when a body crosses its byte limit."""

    def __init__(self, limit: str, value: int):
        super().__init__(413, f"request body exceeds {limit} = {value} bytes")
        self.limit = limit
        self.value = value


class BodyTimeout(StarletteHTTPException):
    """Raised from inside the request stream when a body stops arriving or arrives too slowly (408)."""

    def __init__(self, received: int, timeout_s: float, min_rate: float, slow: bool):
        if slow:
            message = (
                f"request body too slow: {received} bytes arrived, below the minimum rate of {min_rate:g} bytes "
                f"per second (body_min_rate) after the first {timeout_s:g} s (body_timeout_s)"
            )
        else:
            message = (
                f"request body stopped arriving: nothing for {timeout_s:g} s (body_timeout_s) after {received} "
                "bytes; was the Content-Length right?"
            )
        super().__init__(408, message, headers={"Connection": "close"})
        self.received = received
        self.limit = "body_min_rate" if slow else "body_timeout_s"
        self.value = min_rate if slow else timeout_s

    def details(self) -> dict:
        """The error's ``details`` (``TimeoutDetails``)."""
        return {"limit": self.limit, "value": self.value, "received_bytes": self.received}


def parse_body(schema, raw: bytes):
    """Validate a JSON body with pydantic's own JSON parser (several times faster than json.loads first).

    Errors become the same 422 as FastAPI's, with locations under ``body``.
    """
    from pydantic import ValidationError

    try:
        return schema.model_validate_json(raw)
    except ValidationError as exc:
        errors = []
        for err in exc.errors(include_url=False):
            loc = ["body", *err.get("loc", ())]
            errors.append({"loc": loc, "msg": err.get("msg", ""), "type": err.get("type", "")})
        raise RequestValidationError(errors) from None


async def read_body_limited(request, limit: int, name: str) -> bytes:
    """The request body, refused with 413 (naming the limit) as soon as it grows past ``limit`` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large(name, limit, f"request body of {int(declared)} bytes exceeds {name} = {limit}")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large(name, limit, f"request body exceeds {name} = {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def error_body(code: str, message: str, details: Any = None) -> dict:
    """The one error shape, ``{"error": {"code", "message", "details"}}``, limits named by their HINGE_* variables."""
    from service.api.hints import setting_variable, with_setting_variables

    if isinstance(details, dict) and isinstance(details.get("limit"), str) and details["limit"].startswith("max_"):
        details = dict(details, setting=setting_variable(details["limit"]))
    return {"error": {"code": code, "message": with_setting_variables(message), "details": details}}


def error_response(
    status: int, code: str, message: str, details: Any = None, headers: dict | None = None
) -> JSONResponse:
    """An error answer: every handler, middleware and route that answers an error builds it here."""
    return JSONResponse(error_body(code, message, details), status_code=status, headers=headers)


def content_type_hint(request: Request) -> str | None:
    """What is wrong with a JSON route's Content-Type, in a sentence ending in the header to send; None when it says JSON."""
    sent = request.headers.get("content-type")
    if sent and "json" in sent.lower():
        return None
    what = f"was sent as {sent.split(';')[0].strip()!r}" if sent else "has no Content-Type header"
    return (
        f"the request {what}: send the JSON object with the header 'Content-Type: application/json' "
        "(curl: -H 'Content-Type: application/json')"
    )


async def _explain(request: Request, detail: dict) -> str:
    """The message of one validation error, with how to fix it where we can tell."""
    from service.api import hints

    loc, kind = detail["loc"], detail.get("type", "")  # pydantic's location, union tags included (hints need them)
    message = f"{_loc_text(user_loc(loc))}: {detail['msg']}"
    if loc == ["body"] and kind in ("model_attributes_type", "dict_type", "model_type", "missing", "json_invalid"):
        header = content_type_hint(request)
        if header:
            return f"body: expected a JSON object, but {header}"
    if kind == "json_invalid" and len(loc) == 2 and isinstance(loc[1], int):
        reason = (detail.get("ctx") or {}).get("error") or "not valid JSON"
        body = await request.body()
        return f"body: not valid JSON at {hints.json_position(body, loc[1])} (character {loc[1]}): {reason}"
    if kind == "union_tag_not_found" and loc[-1:] == [(detail.get("ctx") or {}).get("discriminator", "").strip("'")]:
        return f"{_loc_text(user_loc(loc))}: missing; {hints.tag_choices(loc[-1])}"
    if kind == "union_tag_invalid" and loc == ["body"]:
        sent = detail.get("input")
        tag = sent.get("solver") if isinstance(sent, dict) else None
        if tag is None:
            return f"solver: null is not a solver; {hints.tag_choices('solver')}"
        return f"solver: {tag!r} is not a solver; {hints.solver_hint(tag, tuple(SOLVERS))}"
    shown = user_loc(loc)
    if shown and kind in ("model_attributes_type", "dict_type", "model_type", "literal_error"):
        hint = hints.value_hint(str(shown[-1]), detail.get("input"), KERNEL_TYPES)
        if hint:
            return f"{message}; {hint}"
    if kind == "extra_forbidden" and loc[:1] == ["body"]:
        route = request.scope.get("route")
        field = getattr(route, "body_field", None)
        roots = hints._models_of(field.field_info.annotation) if field is not None else []
        hint = hints.extra_field_hint(roots, loc[1:]) if roots else None
        if hint:
            return f"{message}; {hint}"
    return message


UNION_TAGS = {"body": tuple(SOLVERS), "kernel": KERNEL_TYPES}
"""Tags of the discriminated unions (the job body by `solver`, a kernel by `type`) that pydantic puts in locations."""
_TYPE_TAG = re.compile(r"^((constrained-)?(float|int|str|bool|bytes|none)|\[key\]|[a-z_-]+\[.*\])$")
"""Member names of plain unions (``list[float]``, ``dict[str,float]``, ``literal['scale']``, ``float``)."""


def user_loc(loc) -> list:
    """A validation location as the user wrote the request: without the union tags pydantic adds.

    ``body.dcd.params.C`` becomes ``body.params.C``; ``params.kernel.rbf.gamma.float`` becomes
    ``params.kernel.gamma``.
    """
    out: list = []
    for index, part in enumerate(loc):
        previous = loc[index - 1] if index else ""

        if isinstance(part, str) and (
            part in UNION_TAGS.get(previous, ()) and (previous != "body" or index == 1) or _TYPE_TAG.match(part)
        ):
            continue
        out.append(part)
    return out


def _loc_text(loc: Any) -> str:
    parts = [str(p) for p in loc if p not in ("body",)] if isinstance(loc, (list, tuple)) else [str(loc)]
    text = ""
    for part in parts:
        text += f"[{part}]" if part.isdigit() else (f".{part}" if text else part)
    return text or "body"


def allowed_methods(request: Request) -> list[str]:
    """Every method some route answers on this path (Starlette's 405 names only the first route's)."""
    from starlette.routing import Match

    allowed = []
    for method in ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"):
        scope = dict(request.scope, method=method)
        if any(route.matches(scope)[0] is Match.FULL for route in request.app.router.routes):
            allowed.append(method)
    return allowed


def install_handlers(app: FastAPI) -> None:
    """Register the handlers that map every exception to the JSON error shape."""

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
        return error_response(exc.status, exc.code, exc.message, exc.details, exc.headers)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        details = []
        for err in exc.errors():
            loc = list(err.get("loc", ()))
            details.append({"loc": loc, "msg": err.get("msg", ""), "type": err.get("type", "")})
            ctx = err.get("ctx")
            if err.get("type") == "json_invalid" and isinstance(ctx, dict) and isinstance(ctx.get("error"), str):
                details[-1]["ctx"] = {"error": ctx["error"]}
            if err.get("type") == "union_tag_not_found" and isinstance(ctx, dict):
                # a missing `solver` (or kernel `type`): located at the field itself, as any missing field
                field = str(ctx.get("discriminator", "")).strip("'")
                details[-1].update(loc=[*loc, field], msg="Field required", ctx={"discriminator": field})
            details[-1]["input"] = err.get("input")  # for the hints only: never sent back
        first = details[0] if details else {"loc": [], "msg": "invalid request"}
        more = f" (and {len(details) - 1} more)" if len(details) > 1 else ""
        message = (await _explain(request, first) if details else "body: invalid request") + more
        for detail in details:
            detail.pop("ctx", None)
            detail.pop("input", None)
            detail["loc"] = user_loc(detail["loc"])
        return error_response(422, "validation_error", message, details)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400 and "parsing the body" in str(exc.detail):
            # FastAPI's answer to a body that is not even text (bad UTF-8): the same 422 as invalid JSON.
            message = "body: not valid JSON (it must be UTF-8 text)"
            return error_response(
                422, "validation_error", message, [{"loc": ["body"], "msg": message, "type": "json_invalid"}]
            )
        headers = getattr(exc, "headers", None)
        if exc.status_code == 405:
            headers = dict(headers or {}, Allow=", ".join(allowed_methods(request)))
        codes = {
            404: "not_found",
            405: "method_not_allowed",
            413: "payload_too_large",
            401: "unauthorized",
            408: "request_timeout",
        }
        code = codes.get(exc.status_code, "http_error")
        details = None
        if isinstance(exc, BodyTooLarge):
            details = {"limit": exc.limit, "value": exc.value}
        elif isinstance(exc, BodyTimeout):
            details = exc.details()
        message = str(exc.detail) if exc.status_code != 404 else f"no route {request.method} {request.url.path}"
        return error_response(exc.status_code, code, message, details, headers)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        request_id = getattr(request.state, "request_id", None)
        log.exception("unhandled error on %s %s (request %s)", request.method, request.url.path, request_id)
        message = "internal error; the request did not complete"
        if request_id:
            message += f" (request id {request_id})"
        return error_response(500, "internal_error", message)

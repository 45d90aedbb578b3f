"""The predict route answered without the framework's routing, dependency solving and exception layers.

``POST /v1/models/{model_id}/predict`` is what other services call most, and one-row requests are the common
case: there, FastAPI's router, its dependency solving and its exception and exit-stack layers cost the API several
times what the scoring does (a profile of the API under bench_load's default mix: the event loop busy in 42% of its
samples, 28 points of them in those layers, 5 in the predict route itself). ``PredictPath`` sits inside the application's
own middleware (metrics, request id, body timeout and limit still see every request) and answers such a request
itself, with the route's own functions: ``deps.tenant_dep`` for the caller, ``routes.models.predict_answer`` for
the answer. Whatever it cannot answer as the route would (a body that comes in several pieces, a query string,
an id the path parameter refuses, any error) goes on to the framework with the body it read, so that every
refusal is the route's own: the same status, the one error shape, the same message.
"""

from __future__ import annotations

import re

from fastapi import FastAPI
from fastapi.routing import APIRoute
from starlette.requests import Request

from service.api import deps
from service.api.routes import models

PREDICT_PATH = re.compile(r"/v1/models/([^/]{1,100})/predict")
"""The route's path; an id of at most 100 characters (``deps.ModelIdPath``'s limit)."""


class PredictPath:
    """ASGI middleware: one-piece predict requests answered by the route's functions directly (module docstring)."""

    def __init__(self, app, application: FastAPI):
        self.app = app
        self.application = application
        self.route = next(r for r in models.router.routes if isinstance(r, APIRoute) and r.name == "predict")

    async def __call__(self, scope, receive, send):
        if (
            scope["type"] != "http"
            or scope["method"] != "POST"
            or scope.get("query_string")
            or (match := PREDICT_PATH.fullmatch(scope["path"])) is None
        ):
            return await self.app(scope, receive, send)
        try:
            first = await receive()
        except Exception as refused:  # too large, too slow: the framework answers as it does for the route
            return await self.app(scope, _raising(refused), send)
        replay = _replaying(first, receive)
        if first["type"] != "http.request" or first.get("more_body", False):
            return await self.app(scope, replay, send)
        scope["route"] = self.route  # what the metrics label the request by, as the router would
        scope["path_params"] = {"model_id": match.group(1)}
        state = self.application.state
        raw = first.get("body", b"")
        if len(raw) > state.settings.max_predict_body_bytes:  # the route's 413
            return await self.app(scope, replay, send)
        request = Request(scope, replay, send)  # (its body is never read from it: ``raw`` is passed on)
        try:
            tenant = await deps.request_tenant(request)
            response = await models.predict_answer(request, match.group(1), raw, state.settings, state.models, tenant)
        except Exception:  # a refusal or a failure: the route itself answers (the same body replayed)
            return await self.app(scope, _replaying(first, receive), send)
        await response(scope, replay, send)


def _replaying(first: dict, receive):
    """A receive that gives ``first`` once, then what ``receive`` gives."""
    pending = [first]

    async def replay():
        return pending.pop() if pending else await receive()

    return replay


def _raising(error: Exception):
    """A receive that raises ``error`` (what reading the body raised)."""

    async def raise_it():
        raise error

    return raise_it

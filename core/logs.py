"""Logging: plain text on a terminal, one JSON object per line otherwise, with the request id (API) and
the job id (workers) attached (``HINGE_LOG_FORMAT=json|text`` forces either).

The ids travel in context variables: the API's request-id middleware sets ``request_id`` for the
duration of a request, ``worker.runtime.jobs.train`` sets ``job_id`` while a job runs. A filter copies them
onto every record, so any logger (ours, uvicorn's, RQ's) gets them without passing them around.
``extra={"job_id": ...}`` on a call wins over the context.
"""

from __future__ import annotations

import contextvars
import json
import logging
import sys
import time
from typing import Any

request_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar("hinge_request_id", default=None)
job_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar("hinge_job_id", default=None)

_STANDARD = set(logging.LogRecord("", 0, "", 0, "", (), None).__dict__) | {"message", "asctime"}


class ContextFilter(logging.Filter):
    """Adds ``request_id`` and ``job_id`` from the context to each record (unless already set)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "request_id", None) is None:
            record.request_id = request_id_var.get()
        if getattr(record, "job_id", None) is None:
            record.job_id = job_id_var.get()
        return True


class JsonFormatter(logging.Formatter):
    """``{"ts", "level", "logger", "message", "request_id"?, "job_id"?, ...extra, "exc"?}``."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name, value in record.__dict__.items():
            if name in _STANDARD or name.startswith("_") or value is None:
                continue
            if name in ("color_message",):
                continue
            out[name] = value if isinstance(value, (str, int, float, bool)) else repr(value)
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """Plain lines, with the ids in brackets when set."""

    def __init__(self):
        super().__init__("%(asctime)s %(name)s %(levelname)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        ids = [f"{n}={getattr(record, n)}" for n in ("request_id", "job_id") if getattr(record, n, None)]
        return f"{text} [{' '.join(ids)}]" if ids else text


def resolve_format(fmt: str) -> str:
    """`auto` becomes `text` when stderr is a terminal and `json` otherwise; `json` and `text` stay."""
    if fmt == "auto":
        return "text" if sys.stderr.isatty() else "json"
    return fmt


def make_handler(fmt: str = "json") -> logging.Handler:
    """A stderr handler with the context filter and the chosen formatter (``auto``: see resolve_format)."""
    fmt = resolve_format(fmt)
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(ContextFilter())
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    return handler


RQ_LOGGERS = ("rq", "rq.worker", "rq.job", "rq.queue")
"""RQ's loggers that log through their own handlers unless given ours."""


def rq_log_level(level: str) -> str:
    """RQ's own level for a service that runs at ``level``: WARNING or above, unless the service runs at DEBUG.

    RQ says at INFO what is routine for it ("cleaning group registries", "result is kept for 3600 seconds",
    "Job OK"); the service says what a job did in its own lines (``hinge.*``).
    """
    level = level.upper()
    if level == "DEBUG":
        return level
    number = logging.getLevelName(level)
    return level if isinstance(number, int) and number > logging.WARNING else "WARNING"


def configure_logging(level: str = "INFO", fmt: str = "json") -> None:
    """Route the root logger (and RQ's and uvicorn's, which keep their own handlers) through one handler;
    RQ's loggers at ``rq_log_level``."""
    handler = make_handler(fmt)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in (*RQ_LOGGERS, "uvicorn", "uvicorn.error", "uvicorn.access"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.propagate = False
    for name in RQ_LOGGERS:
        logging.getLogger(name).setLevel(rq_log_level(level))


SERVER_BANNER = (
    "Started server process",
    "Waiting for application startup",
    "Application startup complete",
    "Uvicorn running on",
)
"""uvicorn's start-up lines: under ``hinge serve`` they came 25 s before its own "ready" line, which says where the
API listens once the workers take jobs too (``uvicorn_log_config(banner=False)``)."""


class ServerBannerFilter(logging.Filter):
    """Leaves out uvicorn's start-up lines (``SERVER_BANNER``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        """False for a start-up line."""
        return not str(record.msg).startswith(SERVER_BANNER)


def uvicorn_log_config(level: str = "INFO", fmt: str = "json", banner: bool = True) -> dict:
    """A ``log_config`` for uvicorn.run that uses these formatters (``banner`` False: without uvicorn's start-up
    lines, unless at DEBUG)."""
    fmt = resolve_format(fmt)
    formatter = {"()": "core.logs.JsonFormatter"} if fmt == "json" else {"()": "core.logs.TextFormatter"}
    handler = {
        "class": "logging.StreamHandler",
        "stream": "ext://sys.stderr",
        "formatter": "main",
        "filters": ["context"],
    }
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"context": {"()": "core.logs.ContextFilter"}, "banner": {"()": "core.logs.ServerBannerFilter"}},
        "formatters": {"main": formatter},
        "handlers": {"main": handler},
        "loggers": {
            "": {"handlers": ["main"], "level": level.upper()},
            "uvicorn": {"handlers": ["main"], "level": level.upper(), "propagate": False},
            "uvicorn.error": {
                "handlers": ["main"],
                "level": level.upper(),
                "propagate": False,
                "filters": [] if banner or level.upper() == "DEBUG" else ["banner"],
            },
            "uvicorn.access": {"handlers": ["main"], "level": level.upper(), "propagate": False},
            "rq": {"level": rq_log_level(level)},  # the API enqueues through RQ
        },
    }

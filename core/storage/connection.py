"""Redis clients that ride out a Redis restart: commands are retried with backoff for ``redis_retry_s``.

redis-py's default retries for about five seconds; a Redis restarted from a large append-only file
takes longer. A worker whose trace flush fails while Redis is away would otherwise fail a healthy job.
A retried write can be applied twice when the connection broke after Redis executed it but before
the answer arrived; every write the service retries is idempotent (SET, HSET, Lua transitions
fenced on status) except trace appends, where a point can then appear twice.
"""

from __future__ import annotations

import math

import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

BACKOFF_CAP_S = 1.0


def resilient_client(url: str, retry_s: float, **kwargs) -> redis.Redis:
    """A client whose commands retry on connection errors and timeouts for about ``retry_s`` seconds."""
    retries = max(3, math.ceil(retry_s / BACKOFF_CAP_S) + 4)
    retry = Retry(ExponentialBackoff(cap=BACKOFF_CAP_S, base=0.05), retries)
    return redis.Redis.from_url(
        url,
        retry=retry,
        retry_on_error=[redis.exceptions.ConnectionError, redis.exceptions.TimeoutError],
        socket_connect_timeout=2.0,
        **kwargs,
    )


def text(reply: bytes | str | object) -> str:
    """A Redis reply as text. The service's clients answer bytes (``decode_responses`` off); redis-py
    types a reply as ``bytes | str`` (either setting), so the type checker needs this one decoding place."""
    if isinstance(reply, bytes):
        return reply.decode()
    if isinstance(reply, str):
        return reply
    raise TypeError(f"expected a Redis string reply, got {type(reply).__name__}")

"""Prometheus metrics of the service, served by the API at ``GET /metrics``.

Several processes do the work (one API process, many workers on many machines), so the design
splits by where the truth lives:

* HTTP requests and latencies are the API's own: counted in this process by a middleware, labelled
  by method, route template (``/v1/jobs/{job_id}``, never the raw path, so ids do not explode the
  label set; ``unmatched`` for 404s without a route) and status.
* Everything about jobs and data lives in Redis and is read when Prometheus scrapes: jobs per
  status (a hash kept by the job transition script in the same atomic step as each status change),
  loss/retry/interrupt counters, queue depth (RQ's lists), live workers (heartbeat keys), solver
  seconds per solver (workers add to a Redis hash after each job) and data sets and their stored
  bytes, in Redis and in the object store (kept by the data-set store's commit and delete transactions). Any number of API replicas
  then report the same numbers, and no worker needs an HTTP port.
"""

from __future__ import annotations

import logging
import time
from urllib.parse import parse_qs

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from core.lifecycle import live_worker_count
from core.queueing import JobQueue
from core.storage import keys

log = logging.getLogger("hinge.api")

STATUSES = ("queued", "running", "succeeded", "failed", "canceled")


class RedisCollector:
    """Reads the job, queue, worker, solver and data-set figures from Redis at scrape time."""

    def __init__(self, app):
        self.app = app

    def collect(self):
        state = getattr(self.app, "state", None)
        client = getattr(state, "redis", None)
        up = GaugeMetricFamily("hinge_redis_up", "1 when Redis answered this scrape.")
        if client is None:
            up.add_metric([], 0)
            yield up
            return
        try:
            stats = {k.decode(): float(v) for k, v in client.hgetall(keys.job_stats()).items()}
            depth = JobQueue(client, state.settings).depth()
            workers = live_worker_count(client)
            solver = {k.decode(): float(v) for k, v in client.hgetall(keys.solver_stats()).items()}
            datasets = {k.decode(): float(v) for k, v in client.hgetall(keys.dataset_stats()).items()}
        except Exception as exc:  # a scrape never fails because Redis is away: it says so
            log.warning("metrics: Redis unavailable (%s)", exc)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        jobs = GaugeMetricFamily("hinge_jobs", "Jobs per status (all tenants).", labels=["status"])
        for status in STATUSES:
            jobs.add_metric([status], max(0.0, stats.get(status, 0.0)))
        yield jobs
        events = CounterMetricFamily(
            "hinge_job_events",
            "Job life-cycle events: lost (worker died), retried, "
            "interrupted (checkpointed on SIGTERM), requeued_on_shutdown, rescued (its "
            "worker died between taking it from RQ and starting it).",
            labels=["event"],
        )
        for event in ("lost", "retried", "interrupted", "requeued_on_shutdown", "rescued"):
            events.add_metric([event], stats.get(f"event:{event}", 0.0))
        yield events
        queue = GaugeMetricFamily("hinge_queue_depth", "Jobs waiting in the RQ queues (all tenants).")
        queue.add_metric([], float(sum(depth.values())))
        yield queue
        live = GaugeMetricFamily("hinge_workers", "Workers with a current heartbeat.")
        live.add_metric([], float(workers))
        yield live
        seconds = CounterMetricFamily(
            "hinge_solver_seconds", "Solver seconds spent by finished jobs, per solver.", labels=["solver"]
        )
        for name, value in sorted(solver.items()):
            seconds.add_metric([name], value)
        yield seconds
        count = GaugeMetricFamily("hinge_datasets", "Data sets stored.")
        count.add_metric([], max(0.0, datasets.get("count", 0.0)))
        yield count
        size = GaugeMetricFamily(
            "hinge_dataset_bytes",
            "Bytes of data sets' arrays stored in Redis (data sets stored before the object store).",
        )
        size.add_metric([], max(0.0, datasets.get("bytes", 0.0)))
        yield size
        shards = GaugeMetricFamily("hinge_dataset_object_bytes", "Bytes of the data sets' shards in the object store.")
        shards.add_metric([], max(0.0, datasets.get("object_bytes", 0.0)))
        yield shards


def build_registry(app) -> tuple[CollectorRegistry, Counter, Histogram]:
    """A registry for one application: the HTTP metrics and the Redis collector."""
    registry = CollectorRegistry(auto_describe=False)
    requests = Counter(
        "hinge_http_requests", "HTTP requests answered.", ["method", "route", "status"], registry=registry
    )
    latency = Histogram(
        "hinge_http_request_duration_seconds",
        "Time to answer an HTTP request.",
        ["method", "route", "status"],
        registry=registry,
        buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
    )
    registry.register(RedisCollector(app))
    return registry, requests, latency


LONG_POLLS = {("GET", "/v1/jobs/{job_id}"): "wait_s"}
"""Routes that may wait on purpose, and the query parameter that asks them to: a request that waits is counted
and timed under the route template with ``?<parameter>`` added, so that the waits do not pass for slow answers."""


def route_label(method: str, template: str, query_string: bytes) -> str:
    """The ``route`` label of a request: its template, with ``?wait_s`` added for a long poll (see LONG_POLLS)."""
    parameter = LONG_POLLS.get((method, template))
    if parameter is None or not query_string:
        return template
    values = parse_qs(query_string.decode("latin-1")).get(parameter, [])
    try:
        waits = bool(values) and float(values[-1]) > 0
    except ValueError:
        waits = False
    return f"{template}?{parameter}" if waits else template


class MetricsMiddleware:
    """Counts every HTTP request by method, route template (see ``route_label``) and status, and times it."""

    def __init__(self, app, requests: Counter, latency: Histogram):
        self.app = app
        self.requests = requests
        self.latency = latency

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        start = time.perf_counter()
        status = {"code": 500}

        async def send_and_note(message):
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_and_note)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            method = scope.get("method", "")
            labels = (method, route_label(method, template, scope.get("query_string", b"")), str(status["code"]))
            self.requests.labels(*labels).inc()
            self.latency.labels(*labels).observe(time.perf_counter() - start)

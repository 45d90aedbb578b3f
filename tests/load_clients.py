"""HTTP clients that load the service from outside (asyncio + httpx, and a minimal HTTP/1.1 client for the
predicting clients of the load runs), for the load and soak runs.

Each client is a coroutine that loops until a monotonic instant and counts what it saw in a
``Tally``: requests by status class, 5xx and transport errors with the wall-clock instant they
happened (a soak run compares them with the window in which Redis was restarting), one-row predict
latencies, and jobs by final status.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import resource
import time
from collections.abc import Callable

import httpx

from tests.helpers import sparse_problem, to_svmlight

FINAL = ("succeeded", "failed", "canceled")
SOLVERS = {
    "dcd": {"C": 1.0},
    "cpa": {"C": 1.0},
    "ocas": {"C": 1.0},
    "smo": {"C": 1.0, "kernel": {"type": "rbf", "gamma": "scale"}},
    "sampled_cuts": {"C": 1.0, "kernel": {"type": "rbf", "gamma": "scale"}, "sample_size": 100},
}
LONG = {"C": 1000.0, "tol": 1e-12, "max_iter": 10_000_000, "shrinking": False}


class Tally:
    """What one client process saw: request counts by status class, latencies, jobs."""

    def __init__(self):
        self.requests = 0
        self.status: dict[str, int] = {}
        self.errors: list[str] = []
        self.predict_ms: list[float] = []
        self.predict_at: list[float] = []  # wall-clock instants of the predictions (for the soak's windows)
        self.server_errors_at: list[float] = []
        self.jobs: dict[str, int] = {}

    def note_status(self, status: int, describe: Callable[[], str]) -> None:
        """Count one answered request by its status; ``describe()`` (method, path, status and the answer's start)
        is kept for a 5xx."""
        self.requests += 1
        key = f"{status // 100}xx"
        self.status[key] = self.status.get(key, 0) + 1
        if status >= 500:
            self.server_errors_at.append(time.time())
            if len(self.errors) < 50:
                self.errors.append(describe())

    def note(self, response: httpx.Response | None, error: str | None = None) -> None:
        """Count one httpx request: its answer (``note_status``), or None when the connection failed."""
        if response is None:
            self.requests += 1
            self.status["transport_error"] = self.status.get("transport_error", 0) + 1
            self.errors.append(error or "transport error")
            self.server_errors_at.append(time.time())
            return
        self.note_status(
            response.status_code,
            lambda: (
                f"{response.request.method} {response.request.url.path}: {response.status_code} {response.text[:200]}"
            ),
        )

    def as_dict(self) -> dict:
        return dict(vars(self))


async def call(tally: Tally, client: httpx.AsyncClient, method: str, url: str, **kwargs) -> httpx.Response | None:
    """One request, counted; None when the connection failed (also counted)."""
    try:
        response = await client.request(method, url, **kwargs)
    except httpx.HTTPError as exc:
        tally.note(None, f"{method} {url}: {type(exc).__name__} {exc}")
        await asyncio.sleep(0.05)
        return None
    tally.note(response)
    return response


async def predictor(base: str, model_id: str, row: list, until: float, tally: Tally) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        body = json.dumps({"instances": [row]}).encode()
        headers = {"Content-Type": "application/json"}
        while time.monotonic() < until:
            start = time.perf_counter()
            response = await call(
                tally, client, "POST", f"/v1/models/{model_id}/predict", content=body, headers=headers
            )
            if response is not None and response.status_code == 200:
                tally.predict_ms.append((time.perf_counter() - start) * 1000)
                tally.predict_at.append(time.time())


async def lean_predictor(
    base: str, model_id: str, row: list, until: float, tally: Tally, interval_s: float = 0.0
) -> None:
    """As ``predictor``, through a minimal HTTP/1.1 client: one kept-alive connection, the request's bytes built
    once, the answer read by its Content-Length. 0.06 ms of CPU a request against httpx's 0.8 (the load generator
    then takes less of the cores it shares with the service, as a client on another machine would take none); the
    latency is measured the same way, from before the request is written to after the answer is read.
    ``interval_s``: at most one request started every ``interval_s`` (paced on a fixed schedule; 0: again as soon
    as answered)."""
    host, port = base.removeprefix("http://").rstrip("/").rsplit(":", 1)
    body = json.dumps({"instances": [row]}).encode()
    path = f"/v1/models/{model_id}/predict"
    request = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    reader = writer = None
    checked = False
    next_at = time.monotonic() + random.uniform(0.0, interval_s)  # the clients' schedules staggered
    while time.monotonic() < until:
        if interval_s:
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
            next_at += interval_s
        try:
            if writer is None:
                reader, writer = await asyncio.open_connection(host, int(port))
                checked = False
            start = time.perf_counter()
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            status = int(head[9:12])
            length = None
            for line in head.split(b"\r\n")[1:]:
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            if length is None:  # the API answers with a length; a chunked answer would be misread
                raise ValueError(f"an answer without Content-Length: {head[:200]!r}")
            answer = await reader.readexactly(length)
            elapsed_ms = (time.perf_counter() - start) * 1000
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError) as exc:
            tally.note(None, f"POST {path}: {type(exc).__name__} {exc}")
            if writer is not None:
                writer.close()
            reader = writer = None
            await asyncio.sleep(0.05)
            continue
        tally.note_status(status, lambda: f"POST {path}: {status} {answer[:200]!r}")
        if status == 200 and not checked:  # the first answer of a connection read whole: one label, one score
            predicted = json.loads(answer)
            assert len(predicted["labels"]) == len(predicted["scores"]) == 1, predicted
            checked = True
        if status == 200:
            tally.predict_ms.append(elapsed_ms)
            tally.predict_at.append(time.time())
        if b"connection: close" in head.lower():
            writer.close()
            reader = writer = None
    if writer is not None:
        writer.close()


async def run_job(
    client: httpx.AsyncClient,
    tally: Tally,
    body: dict,
    until: float,
    cancel_after: float | None = None,
    poll_s: float = 0.05,
    long_poll: bool = False,
) -> str | None:
    """Submit a job and poll it to its end (cancel it after ``cancel_after`` s); returns its final status.
    ``long_poll``: wait as the product's Python client does, ``GET /v1/jobs/{id}?wait_s=30`` (answered once the job
    ends), instead of a plain GET every ``poll_s``."""
    response = await call(tally, client, "POST", "/v1/jobs", json=body)
    if response is None or response.status_code != 202:
        tally.jobs["refused"] = tally.jobs.get("refused", 0) + 1
        return None
    job_id = response.json()["id"]
    tally.jobs["submitted"] = tally.jobs.get("submitted", 0) + 1
    started = time.monotonic()
    canceled = False
    status = "queued"
    while time.monotonic() < until + 120:
        if not long_poll:
            await asyncio.sleep(poll_s)
        if cancel_after is not None and not canceled and time.monotonic() - started > cancel_after:
            await call(tally, client, "POST", f"/v1/jobs/{job_id}/cancel")
            canceled = True
        got = await call(tally, client, "GET", f"/v1/jobs/{job_id}", params={"wait_s": 30} if long_poll else None)
        if got is None or got.status_code != 200:
            continue
        status = got.json()["status"]
        if status in FINAL:
            break
    tally.jobs[status] = tally.jobs.get(status, 0) + 1
    return job_id


async def trainer(base: str, dataset_id: str, until: float, tally: Tally, long_poll: bool = False) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        body = {"dataset_id": dataset_id, "solver": "dcd", "params": {"C": 1.0}}
        while time.monotonic() < until:
            await run_job(client, tally, body, until, long_poll=long_poll)


async def uploader(base: str, content: bytes, until: float, tally: Tally) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=120) as client:
        while time.monotonic() < until:
            response = await call(
                tally,
                client,
                "POST",
                "/v1/datasets",
                files={"file": ("upload.svm", content, "application/octet-stream")},
            )
            if response is not None and response.status_code == 201:
                await call(tally, client, "DELETE", f"/v1/datasets/{response.json()['id']}")


async def all_solvers_trainer(base: str, index: int, until: float, tally: Tally) -> None:
    """Upload a small data set of its own, then train every solver on it in turn, polling each job."""
    content = to_svmlight(*sparse_problem(300, 10, 4, seed=100 + index))
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        dataset_id = None
        while dataset_id is None and time.monotonic() < until:
            response = await call(
                tally,
                client,
                "POST",
                "/v1/datasets",
                files={"file": (f"train{index}.svm", content, "application/octet-stream")},
            )
            if response is not None and response.status_code == 201:
                dataset_id = response.json()["id"]
        names = list(SOLVERS)
        turn = index
        while time.monotonic() < until:
            solver = names[turn % len(names)]
            turn += 1
            params = dict(SOLVERS[solver], retries=3)
            await run_job(client, tally, {"dataset_id": dataset_id, "solver": solver, "params": params}, until)


async def canceler(base: str, dataset_id: str, until: float, tally: Tally) -> None:
    """Start a long job, cancel it after a moment, wait for its end; again."""
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        while time.monotonic() < until:
            body = {"dataset_id": dataset_id, "solver": "dcd", "params": dict(LONG, retries=3)}
            await run_job(client, tally, body, until, cancel_after=random.uniform(0.3, 1.5))


async def poller(base: str, until: float, tally: Tally) -> None:
    """Read lists, jobs and traces, as dashboards do."""
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        while time.monotonic() < until:
            response = await call(tally, client, "GET", "/v1/jobs", params={"limit": 20})
            if response is not None and response.status_code == 200:
                for job in response.json()["items"][:3]:
                    await call(tally, client, "GET", f"/v1/jobs/{job['id']}/trace")
            await call(tally, client, "GET", "/v1/datasets", params={"limit": 20})
            await call(tally, client, "GET", "/v1/models", params={"limit": 20})
            await asyncio.sleep(0.1)


def client_process(role: str, count: int, base: str, setup: dict, seconds: float, start_at: float, out) -> None:
    """Run ``count`` clients of one role in this process (asyncio) from ``start_at`` (wall clock) for
    ``seconds``; put (role, the Tally as a dict) on ``out``. Roles: predict, train (dcd on
    ``setup["dataset_id"]``), train_all (every solver on a data set of its own), cancel, upload, poll."""
    tally = Tally()

    def make(i: int, until: float):
        if role == "predict":
            if setup.get("predict_client") == "lean":
                rate = setup.get("predict_rate") or 0.0  # requests a second over the role's clients; 0: unpaced
                interval = count / rate if rate else 0.0
                return lean_predictor(base, setup["model_id"], setup["row"], until, tally, interval)
            return predictor(base, setup["model_id"], setup["row"], until, tally)
        if role == "train":
            return trainer(base, setup["dataset_id"], until, tally, long_poll=bool(setup.get("long_poll")))
        if role == "train_all":
            return all_solvers_trainer(base, setup.get("offset", 0) + i, until, tally)
        if role == "cancel":
            return canceler(base, setup["long_dataset_id"], until, tally)
        if role == "upload":
            return uploader(base, setup["content"], until, tally)
        if role == "poll":
            return poller(base, until, tally)
        raise ValueError(f"unknown client role {role!r}")

    if role == "predict" and setup.get("predictor_nice") is not None:
        # a diagnostic (bench_load --predictor-nice): the predicting clients in a session of their own, whose
        # niceness orders it against the service's sessions (Linux autogroups; below 0 needs the privilege)
        os.setsid()
        with open("/proc/self/autogroup", "w") as autogroup:
            autogroup.write(str(setup["predictor_nice"]))

    async def main() -> None:
        await asyncio.sleep(max(0.0, start_at - time.time()))
        until = time.monotonic() + seconds
        await asyncio.gather(*(make(i, until) for i in range(count)))

    asyncio.run(main())
    used = resource.getrusage(resource.RUSAGE_SELF)
    out.put((role, {**tally.as_dict(), "cpu_s": used.ru_utime + used.ru_stime}))

"""A soak run: many clients doing everything at once against `hinge serve` while a chaos loop breaks it.

``soak(run, ...)`` loads a running `hinge serve` (tests/serve_harness.py) from client processes
(tests/load_clients.py): predictors (one row, in a loop), trainers (every solver in turn on their own
small data set, polling each job to its end), cancelers (a long job, canceled after a moment),
uploaders (upload then delete) and pollers (lists and traces). Meanwhile a chaos thread kill -9s a
random worker every ``kill_every_s`` (the supervisor starts another; the job is retried elsewhere)
and, once, at ``redis_restart_at_s``, kill -9s the embedded Redis (the supervisor restarts it from its
append-only file). Afterwards every job must reach a final state.

The report: jobs submitted / succeeded / failed by design (canceled by their client, or `worker_lost`
when the chaos used up a job's retries) / lost (not finished in the end, or failed otherwise: must be
0); predict latency; 5xx answers and transport errors, split into those inside the Redis restart
window (from the kill until the API answered again, plus the API's own Redis retry time) and
outside it (must be 0).
"""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import threading
import time

import httpx

from tests.helpers import sparse_problem, to_svmlight
from tests.load_clients import FINAL, client_process

API_REDIS_RETRY_S = 5.0
"""The API waits this long for a restarting Redis before it answers 503 (service/api/app.py)."""


class Chaos(threading.Thread):
    """Kills a random worker every ``kill_every_s`` and Redis once; records when and what."""

    def __init__(
        self,
        run,
        base: str,
        start_at: float,
        seconds: float,
        kill_every_s: float | None,
        redis_restart_at_s: float | None,
        seed: int = 0,
    ):
        super().__init__(name="chaos", daemon=True)
        self.run_ = run
        self.base = base
        self.start_at = start_at
        self.seconds = seconds
        self.kill_every_s = kill_every_s
        self.redis_restart_at_s = redis_restart_at_s
        self.random = random.Random(seed)
        self.events: list[dict] = []
        self.redis_window: tuple[float, float] | None = None

    def run(self) -> None:
        time.sleep(max(0.0, self.start_at - time.time()))
        begin = time.time()
        next_kill = begin + self.kill_every_s if self.kill_every_s else float("inf")
        redis_at = begin + self.redis_restart_at_s if self.redis_restart_at_s is not None else float("inf")
        while time.time() < begin + self.seconds:
            now = time.time()
            if now >= redis_at:
                redis_at = float("inf")
                self._restart_redis()
            elif now >= next_kill:
                next_kill += self.kill_every_s
                self._kill_worker()
            time.sleep(0.05)

    def _pids(self, role: str) -> list[int]:
        return [pid for pid, name in self.run_.snapshot().items() if name == role]

    def _kill_worker(self) -> None:
        workers = self._pids("worker")
        if not workers:
            return
        pid = self.random.choice(workers)
        os.kill(pid, signal.SIGKILL)
        self.events.append({"at": time.time(), "what": f"kill -9 worker {pid}"})

    def _restart_redis(self) -> None:
        pids = self._pids("redis")
        if not pids:
            return
        killed_at = time.time()
        os.kill(pids[0], signal.SIGKILL)
        self.events.append({"at": killed_at, "what": f"kill -9 redis {pids[0]} (the supervisor restarts it)"})
        end = killed_at + 120
        while time.time() < end:
            try:
                if httpx.get(self.base + "/v1/datasets", params={"limit": 1}, timeout=10).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        self.redis_window = (killed_at, time.time())
        self.events.append({"at": self.redis_window[1], "what": "API answers again after the Redis restart"})


def soak(
    run,
    *,
    seconds: float,
    clients: dict[str, int],
    kill_every_s: float | None,
    redis_restart_at_s: float | None,
    settle_s: float = 180.0,
) -> dict:
    """Load the running service for ``seconds`` with ``clients`` (role -> count) under chaos; the report."""
    base = run.base_url
    setup: dict = {"offset": 0}
    with httpx.Client(base_url=base, timeout=120) as http:
        small = http.post(
            "/v1/datasets", files={"file": ("setup.svm", to_svmlight(*sparse_problem(300, 10, 4, seed=1)))}
        ).json()
        long_set = http.post(
            "/v1/datasets",
            files={"file": ("long.svm", to_svmlight(*sparse_problem(3000, 200, 10, seed=7, random_labels=True)))},
        ).json()
        job = http.post("/v1/jobs", json={"dataset_id": small["id"], "solver": "dcd"}).json()
        while (state := http.get(f"/v1/jobs/{job['id']}").json())["status"] not in FINAL:
            time.sleep(0.05)
        setup_jobs = {job["id"]}
        row = [0.5] * small["n_features"]
        setup.update(
            model_id=state["model_id"],
            row=row,
            long_dataset_id=long_set["id"],
            content=to_svmlight(*sparse_problem(200, 10, 4, seed=2)),
        )
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    start_at = time.time() + 3.0
    procs = [
        ctx.Process(target=client_process, args=(role, n, base, setup, seconds, start_at, out))
        for role, n in clients.items()
        if n
    ]
    chaos = Chaos(run, base, start_at, seconds, kill_every_s, redis_restart_at_s)
    for proc in procs:
        proc.start()
    chaos.start()
    tallies = dict(out.get(timeout=seconds + 900) for _ in procs)
    for proc in procs:
        proc.join(60)
    chaos.join(180)

    # Every job must end: wait for the last ones, then audit them all.
    jobs = _all_jobs(base)
    end = time.monotonic() + settle_s
    while any(j["status"] not in FINAL for j in jobs) and time.monotonic() < end:
        time.sleep(1.0)
        jobs = _all_jobs(base)
    jobs = [j for j in jobs if j["id"] not in setup_jobs]
    by_status: dict[str, int] = {}
    for j in jobs:
        key = j["status"] if j["status"] != "failed" else f"failed:{(j.get('error') or {}).get('code')}"
        by_status[key] = by_status.get(key, 0) + 1
    lost = [
        j["id"]
        for j in jobs
        if j["status"] not in FINAL or (j["status"] == "failed" and (j.get("error") or {}).get("code") != "worker_lost")
    ]
    by_design = by_status.get("canceled", 0) + by_status.get("failed:worker_lost", 0)

    window = chaos.redis_window
    inside, outside = 0, []
    for tally in tallies.values():
        for at in tally["server_errors_at"]:
            if window and window[0] <= at <= window[1] + API_REDIS_RETRY_S:
                inside += 1
            else:
                outside.append(at)
    predict_ms = tallies.get("predict", {}).get("predict_ms", [])
    statuses: dict[str, int] = {}
    for tally in tallies.values():
        for key, value in tally["status"].items():
            statuses[key] = statuses.get(key, 0) + value
    return {
        "seconds": seconds,
        "clients": clients,
        "requests": sum(t["requests"] for t in tallies.values()),
        "statuses": statuses,
        "jobs": {
            "submitted": len(jobs),
            "succeeded": by_status.get("succeeded", 0),
            "failed_by_design": by_design,
            "lost": len(lost),
            "by_status": by_status,
            "lost_ids": lost[:20],
        },
        "predict_ms": predict_ms,
        "server_errors": {"inside_redis_window": inside, "outside": len(outside)},
        "redis_window_s": (window[1] - window[0]) if window else None,
        "chaos": chaos.events,
        "errors": [e for t in tallies.values() for e in t["errors"]][:30],
        "outside_errors_at": outside[:20],
    }


def _all_jobs(base: str) -> list[dict]:
    out: list[dict] = []
    with httpx.Client(base_url=base, timeout=60) as http:
        while True:
            page = http.get("/v1/jobs", params={"offset": len(out), "limit": 1000}).json()
            out.extend(page["items"])
            if len(out) >= page["total"] or not page["items"]:
                return out

"""A whole service in processes of its own, for fault injection: Redis, API and workers that tests kill.

Unlike the session-wide ``service`` fixture (whose Redis must stay up for every other test), a
Cluster owns its Redis (a real redis-server with append-only persistence in its own directory, on a
fixed port so it can be killed and restarted in place), its API and its workers, all started with
short heartbeat intervals so a lost worker is noticed in about a second.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import redis

from service.embedded_redis import EmbeddedRedis, free_port
from tests.conftest import ROOT, _terminate, start_api, wait_ready
from tests.helpers import wait_for

FAST = {
    "HINGE_HEARTBEAT_S": "0.3",
    "HINGE_WORKER_LEASE_S": "2",
    "HINGE_REAP_INTERVAL_S": "0.3",
    "HINGE_DEQUEUE_POLL_S": "0.5",
    "HINGE_REDIS_RETRY_S": "30",
    "HINGE_TRACE_FLUSH_S": "0.1",
    "HINGE_PRELOAD_KERNELS": "false",  # a solver's kernels load with its first job (README: settings)
}


def descendants(pid: int) -> set[int]:
    """Every process below ``pid`` (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def alive(pid: int) -> bool:
    """The process exists and is not a zombie."""
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _dump_value(client: redis.Redis, key: bytes):
    """A comparable dump of one key's value. The service may replace a key between TYPE and the read (a
    hash written anew, a key deleted and set again): then read again, by its type at that moment."""
    for _attempt in range(5):
        kind = client.type(key)
        try:
            if kind == b"hash":
                return json.dumps(
                    sorted((k.decode(), v.decode(errors="replace")) for k, v in client.hgetall(key).items())
                )
            if kind == b"list":
                return json.dumps([v.decode(errors="replace") for v in client.lrange(key, 0, -1)])
            if kind == b"zset":
                return json.dumps(sorted(m.decode() for m in client.zrange(key, 0, -1)))
            if kind == b"set":
                return json.dumps(sorted(m.decode() for m in client.smembers(key)))
            return client.get(key)
        except redis.exceptions.ResponseError as exc:
            if "WRONGTYPE" not in str(exc):
                raise
    raise AssertionError(f"{key!r} kept changing its type while being read")


class Cluster:
    """Redis + API + workers under one temporary directory."""

    def __init__(self, root: Path, env_extra: dict | None = None, redis_maxmemory: int = 0):
        self.root = Path(root)
        self.redis = EmbeddedRedis(self.root / "redis", port=free_port(), maxmemory=redis_maxmemory)
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        env = dict(os.environ)
        env.pop("HINGE_API_KEYS", None)
        env.update(FAST)
        env.update(
            {
                "REDIS_URL": self.redis.url,
                "HINGE_DATA_DIR": str(self.root / "data"),
                "NUMBA_THREADING_LAYER": "workqueue",
                "HINGE_LOG_LEVEL": "INFO",
                "PYTHONPATH": str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""),
            }
        )
        env.update(env_extra or {})
        self.env = env
        self.api: subprocess.Popen | None = None
        self.workers: list[subprocess.Popen] = []
        self.logs = self.root / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)

    # -- processes ------------------------------------------------------------------------------

    def start(self, workers: int = 2, execution: str = "inline") -> Cluster:
        self.redis.start()
        self.start_api()
        for _ in range(workers):
            self.start_worker(execution)
        self.wait_workers(workers)
        return self

    def start_api(self) -> None:
        self.api = start_api(self.env, self.port)
        wait_ready(self.base_url, self.api, path="/healthz", timeout=120)

    def start_worker(
        self, execution: str = "inline", env: dict | None = None, wrapper: list[str] | None = None
    ) -> subprocess.Popen:
        """Start a worker (``wrapper``: a command line that execs the worker's, given as its arguments)."""
        log = open(self.logs / f"worker-{len(self.workers)}-{time.monotonic_ns()}.log", "wb")
        argv = [*(wrapper or []), sys.executable, "-m", "worker", "--execution", execution]
        proc = subprocess.Popen(
            argv,
            env=dict(self.env, **(env or {})),
            cwd=ROOT,
            start_new_session=True,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        proc.log_path = log.name  # type: ignore[attr-defined]
        self.workers.append(proc)
        return proc

    def wait_workers(self, count: int, timeout: float = 300) -> None:
        wait_for(
            lambda: self.live_workers() >= count,
            timeout=timeout,
            interval=0.2,
            message=f"{count} workers with a heartbeat",
        )

    def live_workers(self) -> int:
        from core.lifecycle import live_worker_count

        try:
            with self.client() as client:
                return live_worker_count(client)
        except redis.exceptions.RedisError:
            return 0

    def worker_running(self, job_id: str) -> subprocess.Popen:
        """The worker process that runs the job now (from the job's `worker` field: host.pid.suffix)."""
        record = self.job_record(job_id)
        pid = int(record["worker"].split(".")[-2])
        for proc in self.workers:
            if proc.pid == pid:
                return proc
        raise AssertionError(f"job {job_id} runs on unknown worker {record['worker']}")

    def kill_worker(self, proc: subprocess.Popen, sig=signal.SIGKILL, group: bool = False) -> None:
        if group:
            os.killpg(proc.pid, sig)
        else:
            os.kill(proc.pid, sig)

    def forget_worker(self, proc: subprocess.Popen, timeout: float = 60) -> int:
        code = proc.wait(timeout)
        self.workers.remove(proc)
        return code

    def stop(self) -> None:
        for proc in list(self.workers):
            _terminate(proc)
        if self.api is not None:
            _terminate(self.api)
        self.redis.stop()

    # -- access ---------------------------------------------------------------------------------------

    def http(self, key: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.base_url, timeout=60, headers=headers)

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.redis.url)

    def run_hinge(self, *args: str) -> subprocess.CompletedProcess:
        """Run the `hinge` command with the cluster's settings (e.g. `hinge store gc`)."""
        return subprocess.run(
            [sys.executable, "-m", "service.cli", *args],
            env=self.env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )

    def dataset_record(self, dataset_id: str) -> dict:
        """A data set's record as stored in Redis."""
        from core.storage import keys

        with self.client() as client:
            raw = client.get(keys.dataset(dataset_id))
        assert raw is not None, f"no record of {dataset_id}"
        return json.loads(raw)

    def job_record(self, job_id: str) -> dict:
        with self.client() as client:
            raw = client.hgetall(f"hinge:job:{job_id}")
        return {k.decode(): v.decode() for k, v in raw.items()}

    def snapshot(self) -> dict[str, bytes]:
        """Every hinge:* key and a dump of its value (to compare before/after a crash)."""
        with self.client() as client:
            out = {}
            for key in client.scan_iter("hinge:*", count=1000):
                if (
                    b":stats:" in key
                    or key.startswith(b"hinge:worker")
                    or key.startswith(b"hinge:fair")
                    or key.startswith(b"hinge:workers")
                ):
                    continue
                value = _dump_value(client, key)
                out[key.decode()] = value
            return out

"""Fixtures: a real Redis on a free port, the API and worker processes (polling helpers: tests/helpers.py).

No fakeredis, no synchronous RQ: the service under test is the one users run, in its own processes.
"""

from __future__ import annotations

import enum
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
import redis

from service.embedded_redis import EmbeddedRedis, free_port
from tests.helpers import READY_TIMEOUT_S, terminate_group, wait_for

ROOT = Path(__file__).resolve().parent.parent

KEYS = {"key-alice": "alice", "key-bob": "bob"}
"""API keys of ``strict_api``: key -> tenant."""


@dataclass
class RunningService:
    """The API and workers started for the tests, and how to reach and steer them."""

    base_url: str
    redis_url: str
    data_dir: Path
    env: dict
    api: subprocess.Popen
    workers: list[subprocess.Popen] = field(default_factory=list)

    def client(self, **kwargs) -> httpx.Client:
        """An HTTP client for the API."""
        return httpx.Client(base_url=self.base_url, timeout=60.0, **kwargs)

    def start_worker(self) -> subprocess.Popen:
        """Start one more worker process."""
        proc = start_worker(self.env)
        self.workers.append(proc)
        return proc

    def wait_workers_idle(self, timeout: float = 300.0) -> None:
        """Wait until every worker started here is registered with RQ, idle, and no queue holds a job
        (earlier tests may leave jobs behind: a test about how work spreads must start from idle workers)."""
        from rq import Queue, Worker

        client = redis.Redis.from_url(self.redis_url)
        deadline = time.monotonic() + timeout
        try:
            while True:
                live = {proc.pid for proc in self.workers if proc.poll() is None}
                workers = [w for w in Worker.all(connection=client) if w.pid in live]  # not killed ones' records
                idle = len(workers) == len(live) and all(w.get_state() == "idle" for w in workers)
                if idle and all(q.count == 0 for q in Queue.all(connection=client)):
                    return
                if time.monotonic() > deadline:
                    queues = {q.name: q.count for q in Queue.all(connection=client) if q.count}
                    registered = {w.pid: w.get_state() for w in Worker.all(connection=client)}
                    cores = {k.decode(): client.hgetall(k) for k in client.scan_iter("hinge:cores:*")}
                    raise AssertionError(
                        f"workers still busy after {timeout} s: live {sorted(live)}, registered {registered}, "
                        f"queues {queues}, core leases {cores}"
                    )
                time.sleep(0.1)
        finally:
            client.close()

    def stop_worker(self, proc: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
        """Stop one worker (and its work horse) and wait until it is gone."""
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        self.workers.remove(proc)

    def live_workers(self) -> int:
        """Workers registered on the queue right now."""
        from rq import Queue, Worker

        conn = redis.Redis.from_url(self.redis_url)
        try:
            return Worker.count(queue=Queue("hinge", connection=conn))
        finally:
            conn.close()


# The suite's Redis (``redis_server``) by database: 0 is the shared ``service``'s; a test that runs a service or a store
# of its own takes a database of its own here, one number each (a test on another's database empties it or leaves
# records that the other cannot read: test_cli_serve's external-Redis test, on the shared one, left a data set whose
# shards were in its own data directory).
@enum.unique  # (a number given twice fails at import)
class Database(enum.IntEnum):
    """The databases of the suite's Redis that tests of their own use."""

    READYZ_WARMING = 3
    COMPILE_WAIT_SMO = 4
    COMPILE_WAIT_FORMULATIONS = 5
    KERNEL_CACHE = 6
    SPLIT_TRAINING = 7
    EXTERNAL_REDIS_SERVE = 8
    TOY_SOLVER = 9
    JOB_WAIT = 12
    CORE_BUDGET = 13


def database_url(redis_url: str, database: int) -> str:
    """The URL of ``database`` of the Redis at ``redis_url`` (the URL's database wins over a client's ``db``)."""
    return redis_url.rsplit("/", 1)[0] + f"/{int(database)}"


def private_service_env(redis_url: str, database: int, data_dir, **extra: str) -> dict:
    """The environment of an API and workers of a test's own, on an emptied Redis database of their own
    (the suite's workers never see its jobs): the suite's settings plus ``extra``."""
    url = database_url(redis_url, database)
    client = redis.Redis.from_url(url)
    client.flushdb()
    client.close()
    return dict(
        os.environ,
        REDIS_URL=url,
        PYTHONPATH=str(ROOT),
        HINGE_LOG_LEVEL="WARNING",
        HINGE_DATA_DIR=str(data_dir),
        NUMBA_THREADING_LAYER="workqueue",
        # a test's own service runs few jobs of few solvers: each worker loads a solver's kernels with its first
        # job instead of all five at its start (1.5 CPU-s a worker; the suite's shared service keeps the default)
        HINGE_PRELOAD_KERNELS="false",
        **extra,
    )


def start_worker(env: dict) -> subprocess.Popen:
    """Start one worker process (``python -m worker``) in its own session."""
    return subprocess.Popen(
        [sys.executable, "-m", "worker", "--log-level", "WARNING"], env=env, cwd=ROOT, start_new_session=True
    )


def start_api(env: dict, port: int) -> subprocess.Popen:
    """Start the API process on ``port``."""
    return subprocess.Popen(
        [sys.executable, "-m", "service.cli", "api", "--port", str(port), "--no-access-log", "--log-level", "warning"],
        env=env,
        cwd=ROOT,
        start_new_session=True,
    )


def wait_ready(base_url: str, proc: subprocess.Popen, path: str = "/readyz", timeout: float = READY_TIMEOUT_S) -> None:
    """Wait until ``path`` answers 200 (fails fast if the process died)."""

    def ready():
        if proc.poll() is not None:
            raise AssertionError(f"process exited with code {proc.returncode} before becoming ready")
        try:
            return httpx.get(base_url + path, timeout=2.0).status_code == 200
        except httpx.HTTPError:
            return False

    wait_for(ready, timeout=timeout, interval=0.2, message=f"{base_url}{path}")


def _terminate(proc: subprocess.Popen) -> None:
    terminate_group(proc, 15)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    """A real redis-server on a free port with its own empty directory, proven empty."""
    server = EmbeddedRedis(tmp_path_factory.mktemp("redis")).start()
    client = redis.Redis.from_url(server.url)
    assert client.dbsize() == 0, "the test Redis must start empty"
    client.close()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def service(redis_server, tmp_path_factory):
    """The API and two workers against the test Redis, ready (kernels warm) before the first test."""
    data_dir = tmp_path_factory.mktemp("hinge-data")
    env = dict(os.environ)
    env.update(
        {
            "REDIS_URL": redis_server.url,
            "HINGE_DATA_DIR": str(data_dir),
            "NUMBA_THREADING_LAYER": "workqueue",
            "HINGE_LOG_LEVEL": "WARNING",
            "PYTHONPATH": str(ROOT) + os.pathsep + env.get("PYTHONPATH", ""),
            # uploads over 4 KiB are parsed while they arrive (the default threshold is 16 MiB)
            "HINGE_FOLLOW_UPLOAD_BYTES": "4096",
        }
    )
    env.pop("HINGE_API_KEYS", None)
    port = free_port()
    api = start_api(env, port)
    running = RunningService(f"http://127.0.0.1:{port}", redis_server.url, data_dir, env, api)
    try:
        for _ in range(2):
            running.start_worker()
        wait_ready(running.base_url, api)
        # the workers take jobs once dcd is warm; on a cold kernel cache the other solvers compile meanwhile:
        # the tests start when every solver is ready, so that no test's timeout includes a compile
        wait_for(
            lambda: httpx.get(running.base_url + "/readyz", timeout=5.0).json().get("solvers_compiling") == [],
            timeout=READY_TIMEOUT_S,
            interval=0.5,
            message="every solver's kernels",
        )
        yield running
    finally:
        for proc in list(running.workers):
            _terminate(proc)
        _terminate(api)


@pytest.fixture()
def http(service):
    """An HTTP client for the running API."""
    with service.client() as client:
        yield client


@pytest.fixture(scope="module")
def strict_api(service):
    """A second API process with API keys (``KEYS``) and small limits, against the test Redis; its base URL."""
    env = dict(service.env)
    env.update(
        {
            "HINGE_API_KEYS": json.dumps(KEYS),
            "HINGE_MAX_UPLOAD_BYTES": "20000",
            "HINGE_MAX_DECOMPRESSED_BYTES": "50000",
            "HINGE_MAX_ROWS": "300",
            "HINGE_MAX_FEATURES": "1000",
            "HINGE_MAX_JSON_BODY_BYTES": "4096",
            "HINGE_MAX_PREDICT_INSTANCES": "5",
            "HINGE_MAX_SECONDS_CEILING": "60",
        }
    )
    port = free_port()
    proc = start_api(env, port)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_ready(base, proc, path="/healthz", timeout=120)
        yield base
    finally:
        _terminate(proc)


@pytest.fixture(scope="module")
def browser():
    """A headless Chromium (skipped where none can be had: tests/browser.py)."""
    from playwright.sync_api import sync_playwright

    from tests.browser import FLAGS, chromium_or_skip

    path = chromium_or_skip()
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=path, headless=True, args=FLAGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """A real S3 server (SeaweedFS) on free ports, for the whole session; tests keep to key prefixes of their own."""
    from tests.s3_server import SeaweedS3

    server = SeaweedS3(tmp_path_factory.mktemp("seaweedfs")).start()
    yield server
    server.stop()


@pytest.fixture(params=["local", "s3"])
def objects(request, tmp_path):
    """An empty object store of each backend: a local directory, and a key prefix of its own on SeaweedFS."""
    from core.storage.objects import LocalDirectoryStore

    if request.param == "local":
        return LocalDirectoryStore(tmp_path / "objects")
    server = request.getfixturevalue("s3_server")
    return server.store(prefix=f"t-{os.urandom(6).hex()}")


# -- kinds of tests: unit, service, browser, docker ----------------------------------------------------------

TEST_KINDS = ("unit", "solver", "service", "browser", "docker")
"""What a test needs (the markers of pyproject.toml): ``unit`` nothing but this process, quickly; ``solver`` trains
solvers against oracles and each other (seconds a test); ``service`` a Redis, an S3 server, processes of the
service or other programs; ``browser`` headless Chromium against a service; ``docker`` a Docker engine. A module
says its kind with ``pytestmark``; a test without one is ``browser`` or ``service`` by its fixtures, else
``unit``. ``./dev test -m unit`` runs the quick ones while editing (under a minute); the full suite is what
``.ci/run`` runs."""

SERVICE_FIXTURES = frozenset({"redis_server", "service", "http", "strict_api", "s3_server", "objects"})
"""Fixtures that start (or need) a server: a test using one is a ``service`` test."""


def pytest_collection_modifyitems(config, items):
    """Mark every test with its kind: its module's or its own marker if it has one, else from its fixtures."""
    for item in items:
        if any(item.get_closest_marker(kind) for kind in TEST_KINDS):
            continue
        fixtures = set(item.fixturenames)
        if "browser" in fixtures:
            item.add_marker(pytest.mark.browser)
        elif fixtures & SERVICE_FIXTURES:
            item.add_marker(pytest.mark.service)
        else:
            item.add_marker(pytest.mark.unit)

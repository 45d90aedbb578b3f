"""`hinge serve`: one command runs embedded Redis, API and workers; Ctrl-C stops all; data survives a restart."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import redis

from service.embedded_redis import free_port
from tests.cluster import alive, descendants
from tests.conftest import ROOT, Database, database_url
from tests.helpers import sparse_problem, stop_serve, to_svmlight, upload, wait_for, wait_http, wait_job

pytestmark = pytest.mark.service  # the kinds of tests: tests/conftest.py, TEST_KINDS


def serve(data_dir: Path, port: int, workers: int, env_extra: dict | None = None) -> subprocess.Popen:
    env = dict(os.environ)
    env.pop("REDIS_URL", None)
    env["HINGE_PRELOAD_KERNELS"] = "false"  # its services live seconds: a solver's kernels load with its first job
    env.update(env_extra or {})
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "service.cli",
            "serve",
            "--port",
            str(port),
            "--workers",
            str(workers),
            "--data-dir",
            str(data_dir),
            "--log-level",
            "warning",
        ],
        env=env,
        cwd=ROOT,
    )


def _command(pid: int) -> str:
    """The command line of a running process ("" once it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def test_serve_runs_everything_stops_cleanly_and_keeps_data(tmp_path):
    data_dir = tmp_path / "data"
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    proc = serve(data_dir, port, workers=1)
    try:
        wait_http(base, "/readyz", proc)
        with httpx.Client(base_url=base, timeout=60) as http:
            dataset = upload(http, to_svmlight(*sparse_problem(200, 8, 3, seed=9))).json()
            job = http.post("/v1/jobs", json={"dataset_id": dataset["id"], "solver": "dcd"}).json()
            model_id = wait_job(http, job["id"])["model_id"]
            before = http.post(f"/v1/models/{model_id}/predict", json={"instances": [[1.0] * 8]}).json()
        names = {
            Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
            for pid in descendants(proc.pid)
            if alive(pid)
        }
        assert any("redis-server" in name for name in names), names
    finally:
        family = stop_serve(proc)
    wait_for(lambda: not any(alive(pid) for pid in family), timeout=30, message="no orphans after Ctrl-C")
    assert (data_dir / "redis").is_dir()

    proc = serve(data_dir, port, workers=1)
    try:
        wait_http(base, "/readyz", proc)
        with httpx.Client(base_url=base, timeout=60) as http:
            assert http.get(f"/v1/datasets/{dataset['id']}").json()["sha256"] == dataset["sha256"]
            assert http.get(f"/v1/jobs/{job['id']}").json()["status"] == "succeeded"
            assert len(http.get(f"/v1/jobs/{job['id']}/trace").json()["points"]) >= 1
            after = http.post(f"/v1/models/{model_id}/predict", json={"instances": [[1.0] * 8]}).json()
            assert after == before
    finally:
        family = stop_serve(proc, signal.SIGTERM)
    wait_for(lambda: not any(alive(pid) for pid in family), timeout=30, message="no orphans after SIGTERM")


def test_serve_without_workers_and_with_external_redis(tmp_path, redis_server):
    """`hinge serve` with REDIS_URL set starts no Redis of its own. On a database of its own of the suite's Redis: on
    the shared service's, the data set it uploads (its shards in this test's data directory) stayed listed there
    after the test, a record whose objects the service cannot read (500 object_missing to a later test's evaluate)."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    url = database_url(redis_server.url, Database.EXTERNAL_REDIS_SERVE)
    proc = serve(tmp_path / "d", port, workers=0, env_extra={"REDIS_URL": url})
    try:
        wait_http(base, "/healthz", proc)
        assert not any(
            Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"/")
            and b"redis-server" in Path(f"/proc/{pid}/cmdline").read_bytes()
            for pid in descendants(proc.pid)
            if alive(pid)
        ), "no embedded Redis with REDIS_URL set"
        with httpx.Client(base_url=base, timeout=60) as http:
            dataset = upload(http, b"1 1:1\n-1 2:1\n").json()
        client = redis.Redis.from_url(url)
        assert client.exists(f"hinge:dataset:{dataset['id']}")
        client.close()
    finally:
        stop_serve(proc)
        client = redis.Redis.from_url(url)
        client.flushdb()
        client.close()


@pytest.mark.parametrize("signal_number", [signal.SIGKILL])
def test_children_die_with_a_killed_supervisor(tmp_path, signal_number):
    port = free_port()
    proc = serve(tmp_path / "d", port, workers=1)
    try:
        wait_http(f"http://127.0.0.1:{port}", "/readyz", proc)
        family = descendants(proc.pid)
        commands = {pid: _command(pid) for pid in family}
    finally:
        os.kill(proc.pid, signal_number)
        proc.wait(30)
    # the family seen before the kill is the real one: Redis, the API and the worker at least
    assert any("redis-server" in command for command in commands.values()), commands
    assert len(family) >= 3, commands
    wait_for(lambda: not any(alive(pid) for pid in family), timeout=30, message="children gone after SIGKILL")
    time.sleep(0.1)

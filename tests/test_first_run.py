"""A first run that talks: `hinge serve` says what it does until it can train, /readyz says `warming` with
what is left, logs are text on a terminal and JSON otherwise, `hinge keys` finds a running serve's Redis."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
import threading
import time
from contextlib import ExitStack, contextmanager

import httpx
import pytest
import redis

from core.schemas.base import ReadinessDetails
from core.solvers import SOLVERS
from service.embedded_redis import free_port
from tests.conftest import (
    ROOT,
    Database,
    _terminate,
    database_url,
    private_service_env,
    start_api,
    start_worker,
    wait_ready,
)
from tests.helpers import assert_error, stop_serve, wait_for, wait_http

pytestmark = pytest.mark.service  # the kinds of tests: tests/conftest.py, TEST_KINDS

LOG_SNIPPET = (
    "import logging; from core.config import get_settings; from core.logs import configure_logging; "
    "configure_logging('INFO', get_settings().log_format); logging.getLogger('hinge.test').info('hello')"
)


def log_line(env_extra: dict, terminal: bool) -> str:
    env = dict(os.environ, PYTHONPATH=str(ROOT), **env_extra)
    if "HINGE_LOG_FORMAT" not in env_extra:
        env.pop("HINGE_LOG_FORMAT", None)
    if not terminal:
        return subprocess.run([sys.executable, "-c", LOG_SNIPPET], env=env, capture_output=True, text=True).stderr
    leader, follower = pty.openpty()
    try:
        subprocess.run(
            [sys.executable, "-c", LOG_SNIPPET], env=env, stderr=follower, stdout=subprocess.DEVNULL, check=True
        )
        return os.read(leader, 4096).decode()
    finally:
        os.close(leader)
        os.close(follower)


def test_logs_are_text_on_a_terminal_and_json_otherwise():
    text = log_line({}, terminal=True)
    assert "hinge.test INFO hello" in text and not text.lstrip().startswith("{")
    record = json.loads(log_line({}, terminal=False))
    assert record["message"] == "hello" and record["level"] == "INFO"
    assert json.loads(log_line({"HINGE_LOG_FORMAT": "json"}, terminal=True))["message"] == "hello"
    assert not log_line({"HINGE_LOG_FORMAT": "text"}, terminal=False).startswith("{")


def test_readyz_says_warming_with_the_solvers_left(redis_server):
    """A worker whose heartbeat says it is compiling: /readyz answers 503 `warming` and names what is left."""
    url = database_url(redis_server.url, Database.READYZ_WARMING)  # no real worker there
    client = redis.Redis.from_url(url)
    client.flushdb()
    env = dict(os.environ, REDIS_URL=url, PYTHONPATH=str(ROOT), HINGE_LOG_LEVEL="WARNING")
    port = free_port()
    api = start_api(env, port)
    try:
        wait_ready(f"http://127.0.0.1:{port}", api, path="/healthz", timeout=120)
        from core.storage import keys

        beat = {
            "pid": 1,
            "host": "h",
            "job": "",
            "ts": time.time(),
            "ready": False,
            "warming": {"done": {"dcd": 12.0}, "left": ["cpa", "smo"], "current": "cpa"},
        }
        client.set(keys.worker_alive("w1"), json.dumps(beat), px=60_000)
        client.sadd(keys.workers(), "w1")
        answer = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=10)
        error = assert_error(answer, 503, "not_ready")  # the one error shape; what readiness found is in its details
        details = error["details"]
        assert set(details) == set(ReadinessDetails.model_fields)  # every documented field, null when not known
        assert (
            details["status"] == "warming"
            and details["solvers_compiling"] == ["cpa", "smo"]
            and details["warming"] == 1
        )
        # the earlier names, kept for one more version
        assert (
            details["kernels_left"] == details["solvers_compiling"]
            and details["kernels_eta_s"] == details["compile_eta_s"]
        )
        assert "compiling solver code" in error["message"] and "cpa, smo left" in error["message"]
        # taking jobs with dcd's C-SVC built, its other formulations compiling: dcd among the solvers compiling,
        # partly, with what of it compiles
        partly = {"done": {"dcd": 12.0}, "left": ["dcd", "smo"], "partly": ["dcd"], "eta_s": 20.0}
        client.set(keys.worker_alive("w1"), json.dumps(dict(beat, ready=True, warming=partly)), px=60_000)
        health = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=10).json()
        assert health["status"] == "ok" and health["solvers_compiling"] == ["dcd", "smo"], health
        assert health["formulations_compiling"] == {"dcd": SOLVERS["dcd"].formulation_names}, health
        client.set(keys.worker_alive("w1"), json.dumps(dict(beat, ready=True, warming=None)), px=60_000)
        health = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=10).json()
        assert health["status"] == "ok" and health["formulations_compiling"] == {}, health
    finally:
        _terminate(api)
        client.flushdb()
        client.close()


def test_serve_says_when_it_is_ready_and_keys_find_its_redis(tmp_path):
    data_dir = tmp_path / "data"
    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("REDIS_URL", None)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "service.cli",
            "serve",
            "--port",
            str(port),
            "--workers",
            "1",
            "--data-dir",
            str(data_dir),
            "--log-level",
            "warning",
        ],
        env=env,
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stderr.readline, "")), daemon=True)
    reader.start()
    base = f"http://127.0.0.1:{port}"
    try:
        ready_line = wait_for(
            lambda: next((l for l in lines if l.startswith("hinge: ready: ")), None),
            timeout=600,
            interval=0.2,
            message="the ready line",
        )
        assert f"API on {base}, 1 worker" in ready_line and f"{base}/ui/" in ready_line
        assert httpx.get(base + "/readyz", timeout=10).json()["status"] == "ok"  # ready means ready
        said = [l for l in lines if l.startswith("hinge: ")]
        assert any("starting the API" in l for l in said)
        if any("compiling the solvers' code" in l for l in said):  # a cold kernel cache: one line per solver
            wait_for(lambda: any("every solver ready" in l for l in lines), timeout=600, message="every solver ready")
            assert sum(bool(re.match(r"hinge:   \w+ compiled \(\d+ s\)$", l)) for l in lines) == 5
        # `hinge keys` as the README types it: no REDIS_URL, the same data directory
        keys_env = dict(env, HINGE_DATA_DIR=str(data_dir))
        created = subprocess.run(
            [sys.executable, "-m", "service.cli", "keys", "create", "--tenant", "acme"],
            env=keys_env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert created.returncode == 0, created.stderr
        key = created.stdout.strip()
        assert key.startswith("hinge_")
        listed = subprocess.run(
            [sys.executable, "-m", "service.cli", "keys", "list"],
            env=keys_env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert "acme" in listed.stdout
        assert httpx.get(base + "/v1/datasets", timeout=10).status_code == 401
        assert (
            httpx.get(base + "/v1/datasets", headers={"Authorization": f"Bearer {key}"}, timeout=10).status_code == 200
        )
        wait_http(base, "/readyz", proc)
    finally:
        if proc.poll() is None:
            stop_serve(proc)
    assert not (data_dir / "serve.json").exists()
    # without a running serve, keys says how to find one
    gone = subprocess.run(
        [sys.executable, "-m", "service.cli", "keys", "list"],
        env=dict(env, HINGE_DATA_DIR=str(data_dir)),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert gone.returncode == 2 and "hinge serve" in gone.stderr


def test_serve_tells_what_compiles_at_least_every_15_s_and_is_ready_once_dcd_is(tmp_path, monkeypatch, capsys):
    """hinge serve's lines while the kernels compile: the estimate once, each solver as it is ready, a line at
    least every 15 s while some compile, "ready" once the workers take jobs (dcd first; the others still
    compiling are named), "every solver ready" at the end, even when the last ones finish between two looks."""
    from service import supervisor as cli

    class Supervisor:
        workers = [object()]
        data_dir = tmp_path
        api_url = "http://127.0.0.1:1"

    readiness = cli.Readiness(Supervisor())
    others = ["cpa", "ocas", "sampled_cuts", "smo"]
    beats = [
        {"w": {"ready": False, "solvers": [], "warming": {"done": {}, "left": ["dcd", *others], "eta_s": 61.0}}},
        {"w": {"ready": True, "solvers": ["dcd"], "warming": {"done": {"dcd": 4.0}, "left": others, "eta_s": 50.0}}},
        {"w": {"ready": True, "solvers": ["dcd"], "warming": {"done": {"dcd": 4.0}, "left": others, "eta_s": 35.0}}},
        {"w": {"ready": True, "solvers": ["dcd", *others]}},
    ]
    monkeypatch.setattr(readiness, "_beats", lambda: beats.pop(0))
    monkeypatch.setattr(readiness, "_api_up", lambda: True)
    readiness.poll()
    readiness.poll()
    readiness.last_line -= cli.Readiness.PROGRESS_EVERY_S + 1  # 16 s without a line
    readiness.poll()
    readiness.poll()
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("hinge: ")]
    assert "about 61 s for all" in said[0] and "dcd first" in said[0]
    assert said[1].startswith("hinge:   dcd compiled (")
    assert said[2].startswith("hinge: ready: ") and "cpa, ocas, sampled_cuts, smo still compiling" in said[2]
    assert said[3].startswith("hinge:   still compiling cpa, ocas, sampled_cuts, smo") and "about 35 s left" in said[3]
    assert [line.split()[1] for line in said[4:8]] == others
    assert said[8].startswith("hinge: every solver ready")
    assert len(said) == 9


def test_serve_names_what_still_compiles_of_a_solver_partly_ready(tmp_path, monkeypatch, capsys):
    """Once dcd's C-SVC is built and its other formulations compile, hinge serve's lines name those (the spec's
    ``formulation_names``), not dcd."""
    from service import supervisor as cli

    class Supervisor:
        workers = [object()]
        data_dir = tmp_path
        api_url = "http://127.0.0.1:1"

    readiness = cli.Readiness(Supervisor())
    warming = {"done": {"dcd": 4.0}, "left": ["dcd", "smo"], "partly": ["dcd"], "eta_s": 30.0}
    beats = [
        {"w": {"ready": True, "solvers": [], "warming": warming}},
        {"w": {"ready": True, "solvers": ["dcd", "smo"]}},
    ]
    monkeypatch.setattr(readiness, "_beats", lambda: beats.pop(0))
    monkeypatch.setattr(readiness, "_api_up", lambda: True)
    readiness.poll()
    readiness.poll()
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("hinge: ")]
    names = SOLVERS["dcd"].formulation_names
    assert any(line.startswith("hinge: ready: ") and f"dcd's {names}, smo still compiling" in line for line in said), (
        said
    )
    assert said[-1].startswith("hinge: every solver ready")


def test_the_printed_estimate_never_moves_by_more_than_2x_between_lines(tmp_path):
    """A loaded first run printed "about 49 s for all", then "about 441 s left", then "about 8 s left": each line's
    estimate now stays within a factor of 2 of the one before, whatever the workers' estimates do."""
    from service import supervisor as cli

    class Supervisor:
        workers = [object()]
        data_dir = tmp_path
        api_url = "http://127.0.0.1:1"

    readiness = cli.Readiness(Supervisor())
    raw = [49.0, 441.0, 300.0, 8.0, 8.0, 8.0, 1.0, 90.0]
    printed = [readiness.steady_eta(estimate) for estimate in raw]
    assert printed[0] == 49.0
    for before, after in zip(printed, printed[1:]):
        assert before / 2 <= after <= before * 2, printed
    assert printed[1] == 98.0 and printed[3] == 98.0 and printed[4] == 49.0  # it follows, by halves and doubles


TINY_ROWS = "".join(f"{1 if i % 2 else -1} 1:{i % 7 / 7:.3f} 2:{i % 3 / 3:.3f}\n" for i in range(60)).encode()
"""A 60-row data set in svmlight form, for the tests whose jobs wait on a unit's compile."""


@contextmanager
def _service_while_a_unit_compiles(redis_url: str, db: int, tmp_path, unit: str):
    """A private API and worker (the suite's workers are not there), the worker started while this test holds
    ``unit``'s compile lock, as a builder compiling it would, and TINY_ROWS uploaded. Yields (base URL, data set id,
    release): ``release()`` lets the unit be built; the processes are stopped at the end."""
    from core.compile_cache import file_lock
    from worker.runtime.warmup import KERNELS

    env = private_service_env(redis_url, db, tmp_path)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    api = start_api(env, port)
    worker = None
    try:
        with ExitStack() as lock:
            assert lock.enter_context(file_lock(KERNELS.unit(unit).lock_path()))
            worker = start_worker(env)
            wait_ready(base, api)
            with httpx.Client(base_url=base, timeout=30) as http:
                dataset = http.post("/v1/datasets", files={"file": ("d.svm", TINY_ROWS)}).json()["id"]
            yield base, dataset, lock.close
    finally:
        if worker is not None:
            _terminate(worker)
        _terminate(api)


def test_a_job_waits_for_its_solvers_kernels_and_says_so(redis_server, tmp_path):
    """A worker takes jobs once dcd is warm; a job whose solver another process is still compiling waits,
    with `progress.phase` `waiting for compilation`, then trains. A cancel while it waits ends it at once.
    (The test holds the smo unit's lock, as a builder compiling smo would.)"""
    smo = {"C": 1.0, "kernel": {"type": "rbf", "gamma": 0.5}}
    with _service_while_a_unit_compiles(redis_server.url, Database.COMPILE_WAIT_SMO, tmp_path, "smo") as (
        base,
        dataset,
        release,
    ):
        with httpx.Client(base_url=base, timeout=30) as http:
            first = http.post("/v1/jobs", json={"dataset_id": dataset, "solver": "smo", "params": smo}).json()["id"]

            def waiting(job_id):
                job = http.get(f"/v1/jobs/{job_id}").json()
                return job if job["progress"]["phase"] == "waiting for compilation" else None

            job = wait_for(lambda: waiting(first), timeout=60, message="the smo job waiting for compilation")
            assert job["status"] == "running" and job["progress"]["compiling"] == "smo"
            assert job["progress"]["kernels"] == "smo"  # the earlier name, kept for one more version
            assert http.post(f"/v1/jobs/{first}/cancel").status_code in (200, 202)
            canceled = wait_for(
                lambda: (j := http.get(f"/v1/jobs/{first}").json())["status"] == "canceled" and j,
                timeout=30,
                message="the waiting job canceled",
            )
            assert canceled["model_id"] is None and canceled["error"]["code"] == "canceled"
            assert "waiting for the solver's code to compile" in canceled["error"]["message"]
            dcd = http.post("/v1/jobs", json={"dataset_id": dataset, "solver": "dcd", "params": {}}).json()["id"]
            second = http.post("/v1/jobs", json={"dataset_id": dataset, "solver": "smo", "params": smo}).json()["id"]
            wait_for(lambda: waiting(second), timeout=60, message="the second smo job waiting")
            ready = http.get("/readyz").json()
            assert ready["status"] == "ok" and "dcd" in ready["solvers_ready"]
            release()  # the lock is released: the job trains
            for job_id in (dcd, second):
                done = wait_for(
                    lambda job_id=job_id: (j := http.get(f"/v1/jobs/{job_id}").json())["status"] == "succeeded" and j,
                    timeout=120,
                    message=f"job {job_id} to succeed",
                )
                assert done["model_id"]


def test_the_api_listens_once_the_upload_parser_is_ready(redis_server, tmp_path):
    """On a machine's first run the parser's kernels compile in the ingest processes: the API says so and starts
    listening only after, so that a first upload is parsed at once (one waited 10.8 s with no word). Here with an
    empty kernel cache of its own."""
    env = private_service_env(
        redis_server.url, Database.KERNEL_CACHE, tmp_path, HINGE_KERNEL_CACHE_DIR=str(tmp_path / "kernels")
    )
    port = free_port()
    api = subprocess.Popen(
        [sys.executable, "-m", "service.cli", "api", "--port", str(port), "--no-access-log", "--log-level", "info"],
        env=env,
        cwd=ROOT,
        start_new_session=True,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(api.stderr), daemon=True)
    reader.start()
    try:
        wait_http(f"http://127.0.0.1:{port}", "/healthz", api, timeout=300)
        rows = b"1 1:0.5 2:1\n-1 1:-0.5\n"
        answer = httpx.post(f"http://127.0.0.1:{port}/v1/datasets", files={"file": ("rows.svm", rows)}, timeout=60)
        assert answer.status_code == 201, answer.text
    finally:
        _terminate(api)
        reader.join(10)
    text = "".join(lines)
    compiling = text.find("compiling the upload parser's code")
    ready = text.find("the upload parser's code is compiled")
    listening = text.find("Uvicorn running on")
    assert 0 <= compiling < ready, text
    assert listening == -1 or ready < listening, text  # no banner before the parser is ready


def test_dcd_c_svc_jobs_run_while_its_other_formulations_compile(redis_server, tmp_path):
    """dcd's C-SVC kernels are a unit of their own, the one a worker waits for before its first job; logistic
    regression, SVR, one-class and L1 are the unit ``dcd_formulations``, built after it: while another process
    compiles that one (the test holds its lock, as a builder would), the worker takes jobs and a hinge job trains; a
    logistic one waits, saying for which unit, and trains once the unit is there."""

    def ended(http, job_id: str) -> dict:
        return wait_for(
            lambda: (j := http.get(f"/v1/jobs/{job_id}").json())["status"] in ("succeeded", "failed") and j,
            timeout=120,
            message=f"job {job_id} to end",
        )

    with _service_while_a_unit_compiles(
        redis_server.url, Database.COMPILE_WAIT_FORMULATIONS, tmp_path, "dcd_formulations"
    ) as (base, dataset, release):
        with httpx.Client(base_url=base, timeout=30) as http:
            hinge = http.post("/v1/jobs", json={"dataset_id": dataset, "solver": "dcd", "params": {}}).json()
            assert ended(http, hinge["id"])["status"] == "succeeded"
            logistic = http.post(
                "/v1/jobs", json={"dataset_id": dataset, "solver": "dcd", "params": {"loss": "logistic"}}
            ).json()["id"]
            job = wait_for(
                lambda: (
                    (j := http.get(f"/v1/jobs/{logistic}").json())["progress"]["phase"] == "waiting for compilation"
                    and j
                ),
                timeout=60,
                message="the logistic job waiting for its kernels",
            )
            assert job["progress"]["compiling"] == "dcd_formulations"
            release()  # the lock is released: the job trains
            done = ended(http, logistic)
            assert done["status"] == "succeeded" and done["model_id"], done

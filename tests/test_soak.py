"""A short soak run in the test suite (issue 9, item 6): clients of every kind at once, a worker killed
twice and Redis once; no job lost, no 5xx outside the Redis restart window. The 5-minute run with 20
clients is tests/benchmarks/bench_soak.py (figures in tests/README.md)."""

from __future__ import annotations

import pytest

from service.embedded_redis import free_port
from tests.serve_harness import ServeRun
from tests.soak import soak

pytestmark = pytest.mark.service  # the kinds of tests: tests/conftest.py, TEST_KINDS


def test_short_soak_under_chaos_loses_nothing(tmp_path):
    run = ServeRun(tmp_path / "data", free_port(), workers=2)
    try:
        run.wait_ready()
        report = soak(
            run,
            seconds=14,  # three kills (4.5, 9, 13.5 s) and Redis's restart (7 s) within it
            clients={"predict": 2, "train_all": 2, "cancel": 1, "upload": 1, "poll": 1},
            kill_every_s=4.5,
            redis_restart_at_s=7,
        )
        run.snapshot()
        run.stop_by("ctrl_c")
        gone = run.wait_gone(timeout=120)
    finally:
        run.close()
    assert len(gone) == len(run.family), "a process outlived the stop"
    assert report["redis_window_s"] is not None, report["chaos"]
    assert sum("kill -9 worker" in e["what"] for e in report["chaos"]) >= 2, report["chaos"]
    jobs = report["jobs"]
    assert jobs["submitted"] > 0 and jobs["succeeded"] > 0, jobs
    assert jobs["lost"] == 0, (jobs, report["errors"])
    assert report["server_errors"]["outside"] == 0, (report["errors"], report["outside_errors_at"], report["chaos"])
    assert report["predict_ms"], "predictions were answered"

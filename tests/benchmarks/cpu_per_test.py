"""A pytest plugin: every test's CPU, system-wide (its services, subprocesses and Redis included), from the busy
jiffies of /proc/stat around the test's whole protocol (setup, call, teardown). Meaningful in a serial run:

    PYTHONPATH=tests/benchmarks .venv/bin/python -m pytest -p cpu_per_test -n 0 -q
    CPU_PER_TEST_OUT=path.json ...                     # default: tests/benchmarks/results/cpu_per_test.json

Writes [[test id, CPU seconds, wall seconds, start (epoch seconds)], ...] in the order the tests ran (where the
suite's CPU goes: the benchmarks README, "suite" row). Under pytest-xdist (``-n 2``) each worker writes its own file
(``cpu_per_test.gw0.json``, ...): the CPU column is then the whole machine's, but the starts and walls give the
suite's timeline (which tests ran while the cores idled, or waited for the kernels' compile)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

_rows: list[tuple[str, float, float, float]] = []
_TICKS = os.sysconf("SC_CLK_TCK")


def _busy_seconds() -> float:
    with open("/proc/stat") as stat:
        values = [int(v) for v in stat.readline().split()[1:]]
    return (sum(values) - values[3] - values[4]) / _TICKS  # all but idle and iowait


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Time one test's protocol."""
    cpu, wall, start = _busy_seconds(), time.monotonic(), time.time()
    yield
    _rows.append((item.nodeid, round(_busy_seconds() - cpu, 2), round(time.monotonic() - wall, 2), round(start, 2)))


def pytest_sessionfinish(session):
    """Write the rows (not under pytest-xdist's controller, which runs no test)."""
    if not _rows:
        return
    default = Path(__file__).resolve().parent / "results" / "cpu_per_test.json"
    out = Path(os.environ.get("CPU_PER_TEST_OUT", default))
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        out = out.with_name(f"{out.stem}.{worker}{out.suffix}")
    out.write_text(json.dumps(_rows, indent=0))

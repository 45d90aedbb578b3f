"""A pytest plugin: the machine's busy CPU seconds (/proc/stat) and the wall seconds around every test, to JSON.

    CPU_PER_TEST_OUT=/tmp/cpu.json .venv/bin/python -m pytest -p no:xdist -p tests.benchmarks.cpu_per_test

Run the suite in one process with nothing else on the machine: a test's figure is then its own, its service's
processes' and its subprocesses' CPU. The file holds [test id, wall seconds, CPU seconds] per test; the per-file
and per-test tables of tests/benchmarks/README.md ("Where the suite's time goes") come from it.
"""

from __future__ import annotations

import json
import os
import time

import pytest

_ROWS: list[tuple[str, float, float]] = []


def _busy_seconds() -> float:
    """CPU seconds the machine has been busy (user, nice, system, irq, softirq, steal), all cores."""
    with open("/proc/stat") as f:
        ticks = [int(value) for value in f.readline().split()[1:]]
    return (ticks[0] + ticks[1] + ticks[2] + ticks[5] + ticks[6] + ticks[7]) / os.sysconf("SC_CLK_TCK")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """Time one test, setup and teardown included."""
    busy, began = _busy_seconds(), time.perf_counter()
    yield
    _ROWS.append((item.nodeid, time.perf_counter() - began, _busy_seconds() - busy))


def pytest_sessionfinish(session):
    """Write the rows (``CPU_PER_TEST_OUT``, default tests/benchmarks/results/cpu_per_test.json)."""
    default = os.path.join(os.path.dirname(__file__), "results", "cpu_per_test.json")
    with open(os.environ.get("CPU_PER_TEST_OUT", default), "w") as f:
        json.dump(_ROWS, f)

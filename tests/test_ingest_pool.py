"""The API's ingest pool stops without leaving named semaphores behind.

uvicorn ends the API by re-raising the SIGTERM it caught, so Python's exit handlers never run: the
pool's queues must release their semaphores in ``IngestPool.close(wait=True)`` itself, or the
resource tracker prints "There appear to be 5 leaked semaphore objects" when `hinge serve` stops.
The hardest case is a pool closed while its processes are still starting (an API stopped right
after it started), when the pool's manager thread still holds the queues.
"""

from __future__ import annotations

import collections
import multiprocessing.resource_tracker as resource_tracker

import pytest

from service.ingest.pool import IngestPool

pytestmark = pytest.mark.service  # the kinds of tests: tests/conftest.py, TEST_KINDS


@pytest.mark.parametrize("ran_a_task", [False, True])
def test_close_releases_every_semaphore_the_pool_made(monkeypatch, ran_a_task):
    counts: collections.Counter = collections.Counter()
    register, unregister = resource_tracker.register, resource_tracker.unregister

    def counting_register(name, rtype):
        counts[rtype, "made"] += 1
        register(name, rtype)

    def counting_unregister(name, rtype):
        counts[rtype, "released"] += 1
        unregister(name, rtype)

    # SemLock looks these up when it is created and finalized, so the patched ones are called.
    monkeypatch.setattr(resource_tracker, "register", counting_register)
    monkeypatch.setattr(resource_tracker, "unregister", counting_unregister)
    pool = IngestPool(1)
    pool.start()
    if ran_a_task:
        from service.ingest import entry

        pool._pool().submit(entry.ping).result(timeout=120)
    pool.close(wait=True, timeout=5.0 if ran_a_task else 0.0)
    assert counts["semaphore", "made"] >= 5  # a call queue (3) and a result queue (2)
    assert counts["semaphore", "released"] == counts["semaphore", "made"], dict(counts)

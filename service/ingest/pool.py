"""The API's pool of spawned ingest processes (kept apart so the API never imports numba)."""

from __future__ import annotations

import asyncio
import functools
import logging
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from core import compile_cache
from service.ingest import entry

log = logging.getLogger("hinge.ingest")

MANAGER_JOIN_S = 2.0
"""How long ``IngestPool.close(wait=True)`` waits for the pool's manager thread once its processes are gone."""


def parser_compiled_before() -> bool:
    """Whether this machine's kernel cache holds the parser's kernels for some version of the code (its markers
    ``built/parser.*.json``; ``core.compile_cache``), read without importing numba."""
    compile_cache.register("service.ingest", Path(entry.__file__).resolve().parent)  # as parse_kernels installs it
    return any((compile_cache.package_cache_dir("service.ingest") / "built").glob("parser.*.json"))


class IngestPool:
    """Runs ``entry.ingest`` in spawned processes; a crashed process is replaced for the next upload."""

    def __init__(self, processes: int):
        self.processes = processes
        self._executor: ProcessPoolExecutor | None = None

    def _pool(self) -> ProcessPoolExecutor:
        if self._executor is None:
            self._executor = ProcessPoolExecutor(
                max_workers=self.processes,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=entry.init_process,
            )
        return self._executor

    def start(self) -> None:
        """Start the processes now, so their warm-up overlaps the API's start-up."""
        self._started = [self._pool().submit(entry.ping) for _ in range(self.processes)]

    async def ready(self, notice_after_s: float = 2.0) -> None:
        """On a machine's first run, wait until an ingest process has compiled the parser's kernels, so that the
        API listens only once an upload can be parsed at once (a first upload used to wait 10.8 s with no word
        while they compiled); says so when it takes a while. Once the machine has compiled them (any version of
        the code), the processes load them in the background as before: a restart does not wait."""
        started = getattr(self, "_started", None)
        if not started or parser_compiled_before():
            return
        began = time.monotonic()
        waiting = [asyncio.wrap_future(future) for future in started]
        done, _ = await asyncio.wait(waiting, timeout=notice_after_s, return_when=asyncio.FIRST_COMPLETED)
        if not done:
            log.info(
                "compiling the upload parser's code (the first run on this machine; cached afterwards): the API "
                "listens once they are ready"
            )
            done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            log.info("the upload parser's code is compiled (%.0f s)", time.monotonic() - began)
        for future in done:
            if future.exception() is not None:  # uploads will say so; predictions need no parser
                log.error("an ingest process could not start: %s", future.exception())

    async def ingest(self, path: str, **options) -> dict:
        """Parse and store one spooled upload; see ``entry.ingest``."""
        loop = asyncio.get_running_loop()
        call = functools.partial(entry.ingest, path, **options)
        try:
            return await loop.run_in_executor(self._pool(), call)
        except BrokenProcessPool:
            log.error("an ingest process died while parsing %s; starting a new pool", path)
            self.close()
            raise

    async def run(self, function, *args, **kwargs):
        """Run another picklable function (e.g. a model file reader) in an ingest process."""
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._pool(), functools.partial(function, *args, **kwargs))
        except BrokenProcessPool:
            log.error(
                "an ingest process died while running %s; starting a new pool", getattr(function, "__name__", function)
            )
            self.close()
            raise

    def close(self, wait: bool = False, timeout: float = 1.0) -> None:
        """Stop the processes (``wait``: until they have exited, at most ``timeout`` seconds, then kill them).

        The API waits when it stops, so that no parser process outlives it; one still loading its
        kernels (an API stopped right after it started) would make it wait seconds: it is killed.
        Waiting also releases the pool's named semaphores before the API exits: uvicorn ends the
        process by re-raising the SIGTERM it caught, so no exit handler runs after this, and a queue
        still held by the pool's manager thread would leave its semaphores for Python's resource
        tracker to report as leaked.
        """
        executor, self._executor = self._executor, None
        if executor is None:
            return
        manager = getattr(executor, "_executor_manager_thread", None)  # None before the first submit
        executor.shutdown(wait=False, cancel_futures=True)
        if not wait:
            return
        end = time.monotonic() + timeout
        for process in multiprocessing.active_children():  # the API's only children: its parsers
            process.join(max(0.0, end - time.monotonic()))
            if process.is_alive():
                process.kill()
                process.join(1.0)
        # The parsers are gone, so the manager thread ends at once (it sees them die) and drops the last
        # references to the queues, whose finalizers unlink their semaphores and tell the resource tracker.
        if manager is not None:
            manager.join(MANAGER_JOIN_S)

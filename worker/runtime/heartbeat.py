"""A worker's heartbeat process: proves the worker is alive, says which job it runs, reaps the dead.

Why a process and not a thread: solver kernels are numba functions that hold the GIL for a whole
pass over the data, so a thread in the worker could not beat while a pass runs. This process is
forked by the worker before it takes jobs (before any kernel has run, so before numba has a thread: a fork
is safe there, and the child has the worker's modules for free instead of the 0.3 CPU-s of a spawned
interpreter's imports) and shares two small pieces of memory with it: the id of
the job running now (written by ``worker.runtime.jobs.train``, also from a forked work horse, without
touching Redis) and a stop flag.

Every ``heartbeat_s`` it writes ``hinge:worker:<id>`` = ``{pid, host, job, ts, ready, solvers}`` with a TTL
of ``worker_lease_s``: ``ready`` once the worker takes jobs, ``solvers`` the solvers whose kernels the
machine's cache holds, and while some are still compiling ``warming`` = ``{done: {unit: seconds}, left:
[solvers], partly: [solvers left whose default formulation is built], eta_s}`` (read from the cache's markers,
``worker.runtime.warmup.kernel_state``; written at once on every change, for /readyz and ``hinge serve``). Every ``reap_interval_s`` it runs a reaper pass (``core.lifecycle``). It
checks its parent every 0.1 s (and gets SIGTERM from the kernel when the parent dies): the moment
the worker is gone it deletes the liveness key, so the reaper sees the loss within one pass, and
exits. SIGTERM while the worker lives (``docker stop``, Ctrl-C to the process group) is ignored: the
worker is checkpointing its job and still needs its heartbeat; the worker stops this process last.
See ``core/lifecycle.py`` for the whole crash-recovery design.
"""

from __future__ import annotations

import ctypes
import json
import logging
import multiprocessing
import os
import signal
import socket
import sys
import time

from core.processes import usable_cores

JOB_ID_BYTES = 128
KERNELS_LOOK_S = 0.5
"""How often the heartbeat reads the kernel cache's markers."""

log = logging.getLogger("hinge.heartbeat")

_handle: Heartbeat | None = None


class Heartbeat:
    """The worker's side: set and clear the current job, stop the process."""

    def __init__(self, worker_id: str, settings, kernel_plan: dict | None = None):
        ctx = multiprocessing.get_context("fork")
        self.worker_id = worker_id
        self.current = ctx.RawArray(ctypes.c_char, JOB_ID_BYTES)
        self.stop_flag = ctx.RawValue(ctypes.c_bool, False)
        self.ready = ctx.RawValue(ctypes.c_bool, False)
        self.accepting = ctx.RawValue(ctypes.c_bool, False)  # its first solver is warm: the worker takes jobs
        self.process = ctx.Process(
            target=run,
            name="hinge-heartbeat",
            args=(
                os.getpid(),
                worker_id,
                settings.model_dump(mode="json"),
                self.current,
                self.stop_flag,
                self.ready,
                self.accepting,
                kernel_plan,
            ),
        )

    def start(self) -> Heartbeat:
        global _handle
        self.process.start()
        _handle = self
        return self

    def wait_ready(self, timeout: float = 60.0) -> bool:
        """Wait for the first beat (a worker takes no job before the reaper can see it alive)."""
        end = time.monotonic() + timeout
        while not self.ready.value:
            if not self.process.is_alive() or time.monotonic() > end:
                return False
            time.sleep(0.02)
        return True

    def set_job(self, job_id: str | None) -> None:
        """Record the job the worker runs now (None: no job)."""
        self.current.value = (job_id or "").encode()[: JOB_ID_BYTES - 1]

    def stop(self, timeout: float = 5.0) -> None:
        """Stop beating (the worker is leaving): the process deletes the liveness key and exits."""
        self.stop_flag.value = True
        self.process.join(timeout)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(1)


class KernelWatch:
    """The heartbeat's reading of the kernel cache's markers (every KERNELS_LOOK_S; nothing without a plan)."""

    def __init__(self, plan: dict | None):
        self.plan = plan
        self.state: dict = {}
        self.next_look = 0.0
        self.cores = usable_cores()
        self.builders = int(os.environ.get("HINGE_LOCAL_WORKERS", "0") or 0) or self.cores
        self.since = time.time()

    def look(self, now: float) -> dict:
        """The state as of the last look (``worker.runtime.warmup.kernel_state``); looks again when it is time."""
        if self.plan is not None and now >= self.next_look:
            from worker.runtime.warmup import kernel_state

            self.state = kernel_state(self.plan, self.cores, self.builders, self.since)
            self.next_look = now + KERNELS_LOOK_S
        return self.state


def current_job(job_id: str | None) -> None:
    """Tell the heartbeat process (if this worker has one) which job runs now."""
    if _handle is not None:
        _handle.set_job(job_id)


def run(
    parent_pid: int, worker_id: str, settings_data: dict, current, stop_flag, ready, accepting, kernel_plan=None
) -> None:
    """Body of the heartbeat process."""
    import redis

    from core.config import Settings
    from core.lifecycle import Reaper
    from core.logs import configure_logging
    from core.processes import die_with_parent
    from core.storage import keys

    die_with_parent()  # SIGTERM when the worker dies; the handler below only wakes the loop
    signal.signal(signal.SIGTERM, lambda *_: None)
    signal.signal(signal.SIGINT, lambda *_: None)
    settings = Settings.model_validate(settings_data)
    configure_logging(os.environ.get("HINGE_LOG_LEVEL", "WARNING"), settings.log_format)
    if settings.redis_url is None:
        raise RuntimeError("REDIS_URL is not set: the heartbeat has no Redis to write to")
    client = redis.Redis.from_url(settings.redis_url, socket_timeout=2.0, socket_connect_timeout=2.0)
    reaper = Reaper(client, settings)
    key = keys.worker_alive(worker_id)
    host = socket.gethostname()
    lease_ms = max(1, int(settings.worker_lease_s * 1000))
    next_beat = 0.0
    next_reap = time.monotonic() + settings.reap_interval_s

    def gone() -> bool:
        return os.getppid() != parent_pid or stop_flag.value

    kernels = KernelWatch(kernel_plan)
    last_said: tuple = ()
    while not gone():
        now = time.monotonic()
        state = kernels.look(now)
        said = (bool(accepting.value), *(tuple(state.get(part, ())) for part in ("ready", "left", "partly", "failed")))
        if now >= next_beat or said != last_said:  # a worker taking jobs, a solver ready: published at once
            beat = {
                "pid": parent_pid,
                "host": host,
                "job": current.value.decode(errors="replace"),
                "ts": time.time(),
                "ready": bool(accepting.value),
            }
            if state:
                beat["solvers"] = state["ready"]
                if state.get("failed"):
                    beat["solvers_failed"] = state["failed"]
                if state["left"]:
                    beat["warming"] = {key: state[key] for key in ("done", "left", "partly", "eta_s")}
            last_said = said
            try:
                with client.pipeline(transaction=False) as pipe:
                    pipe.set(key, json.dumps(beat), px=lease_ms)
                    pipe.sadd(keys.workers(), worker_id)
                    pipe.execute()
                ready.value = True
                next_beat = now + settings.heartbeat_s
            except redis.exceptions.RedisError as exc:
                log.info("heartbeat: Redis unavailable (%s)", exc)
                next_beat = now + min(settings.heartbeat_s, 0.5)
        if now >= next_reap:
            try:
                reaper.pass_once()
            except redis.exceptions.RedisError as exc:
                log.info("reaper: Redis unavailable (%s)", exc)
            except Exception:
                log.exception("reaper pass failed")
            next_reap = now + settings.reap_interval_s
        time.sleep(0.1)
    # The worker is gone (or leaving): say so at once instead of letting the key expire.
    for _ in range(3):
        try:
            client.delete(key)
            client.srem(keys.workers(), worker_id)
            break
        except redis.exceptions.RedisError:
            time.sleep(0.2)
    sys.exit(0)

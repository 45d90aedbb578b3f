"""`hinge worker`: warm dcd's kernels, then take jobs from the tenants' RQ queues, fairly.

The other solvers' kernels are compiled in the background, once per machine (``worker.runtime.warmup``); a job
whose solver is not warm yet waits for it (``progress.phase`` says so). By default a job runs inside the
worker process (RQ's SimpleWorker): the kernels stay loaded and a job starts in about 10 ms. ``--execution fork`` uses RQ's forking
Worker instead (a fresh work horse per job: more isolation, about 50 ms more per job). numba's
default threading layer (GNU OpenMP) is not fork-safe, so the worker selects the 'workqueue'
layer before numba is imported, which keeps both modes and process pools inside jobs working.

What the worker adds to RQ's loop (``HingeWorker``):

* Fair dequeue: before each dequeue it lists the tenants' queues least recently served first,
  leaving out tenants at ``max_running_jobs_per_tenant`` (see ``core/queueing.py``), and
  re-reads that list at least every ``dequeue_poll_s`` while idle.
* A heartbeat process (``worker/runtime/heartbeat.py``) that proves the worker alive and reaps the jobs
  of dead workers (``core/lifecycle.py``).
* SIGTERM reaches the solver: RQ's warm shutdown would wait for the job to end; here it also sets
  ``worker.runtime.progress.INTERRUPT`` (inline) or forwards SIGTERM to the work horse (fork), so the
  solver stops at its next iteration check and the job checkpoints its model or is requeued.
  A repeated SIGTERM is the same request (RQ would make it a cold stop that drops the job).
* A work horse that dies (fork mode) releases its job at once (retry or ``worker_lost``).
* Redis restarts: the worker's client retries commands for ``redis_retry_s``; if RQ's loop still
  gives up (it quits on errors outside its dequeue), the worker starts the loop again.
"""

from __future__ import annotations

import os as _os

# Before numpy is imported: its BLAS keeps a pool of threads that spin for a while after every call
# (OpenBLAS does, on the cores it sees), which took one of two cores from the solver's own threads
# and from the other worker. A worker's parallelism is numba's threads and the subtask processes.
for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    _os.environ.setdefault(_name, "1")

import argparse
import logging
import os
import signal
import socket
import sys
import time
import uuid
from typing import Any

STOP_LOG = logging.getLogger("hinge.worker")
"""The worker's own lines about stopping: RQ's logger (``self.log``) sits below the service's level (core.logs)."""


def make_worker_class(base: type) -> Any:
    """A worker class on top of RQ's SimpleWorker or Worker (see the module docstring)."""

    from rq.worker import WorkerStatus

    from core.config import get_settings
    from core.lifecycle import release_lost_job
    from core.queueing import JobQueue
    from core.schemas.jobs import JobStatus
    from core.storage import cache, keys
    from core.storage.jobs import JobStore
    from worker.runtime import warmup
    from worker.runtime.progress import INTERRUPT
    from worker.runtime.runs import sweep_deleted_copies

    class HingeWorker(base):
        hinge_queue: JobQueue
        sweep_due = 0.0  # time.monotonic() of the next sweep of deleted data sets' copies (the first: at once)

        # -- fair dequeue ------------------------------------------------------------------

        def refresh_queues(self) -> None:
            """Listen on the tenants' queues, least recently served first; the base queue last."""
            settings = get_settings()
            client = self.connection
            tenants = sorted(raw.decode() for raw in client.smembers(keys.fair_tenants(settings.queue_name)))
            served: list = []
            running: list = []
            if tenants:
                with client.pipeline(transaction=False) as pipe:
                    pipe.zmscore(keys.fair_served(settings.queue_name), tenants)
                    for tenant in tenants:
                        pipe.scard(keys.tenant_jobs_in(tenant, "running"))
                    answers = pipe.execute()
                served, running = answers[0], answers[1:]
            cap = settings.max_running_jobs_per_tenant
            order = sorted(
                (score or 0.0, tenant) for tenant, score, n in zip(tenants, served, running) if cap == 0 or n < cap
            )
            queues = [self.hinge_queue.tenant_queue(tenant) for _, tenant in order]
            queues.append(self.hinge_queue.base_queue())
            self.queues = queues
            self._ordered_queues = queues[:]

        def reorder_queues(self, reference_queue) -> None:
            settings = get_settings()
            prefix = keys.tenant_queue_name(settings.queue_name, "")
            if reference_queue.name.startswith(prefix):
                tenant = reference_queue.name[len(prefix) :]
                self.connection.zadd(keys.fair_served(settings.queue_name), {tenant: time.time()})

        def dequeue_job_and_maintain_ttl(self, timeout, max_idle_time=None):
            settings = get_settings()
            poll, preload = settings.dequeue_poll_s, settings.preload_kernels
            while True:
                if preload and len(warmup.loaded_solvers()) < len(warmup.WARM_UP_ORDER):
                    warmup.load_built()  # idle: load what the builders finished, so no job waits for it
                if time.monotonic() >= self.sweep_due:  # idle: the copies of deleted data sets go
                    self.sweep_due = time.monotonic() + cache.SWEEP_S
                    sweep_deleted_copies(self.connection)
                self.refresh_queues()
                if timeout is None:  # burst: one non-blocking look
                    return super().dequeue_job_and_maintain_ttl(None, max_idle_time)
                result = super().dequeue_job_and_maintain_ttl(poll, max_idle_time=poll)
                if result is not None or self._stop_requested:
                    return result

        # -- SIGTERM reaches the solver ----------------------------------------------------------

        def handle_warm_shutdown_request(self) -> None:
            INTERRUPT.set()
            horse = getattr(self, "horse_pid", 0)
            if horse:
                try:
                    os.kill(horse, signal.SIGTERM)  # the horse's handler sets its own INTERRUPT
                except ProcessLookupError:
                    pass
            if self.job_running():
                STOP_LOG.info("worker %s: stop requested; the running solver stops at its next check", self.name)
            else:
                STOP_LOG.info("worker %s: stop requested; no job running", self.name)

        def job_running(self) -> bool:
            """A job runs: in a work horse (fork) or in this process (inline: RQ marks the worker busy meanwhile)."""
            return bool(getattr(self, "horse_pid", 0)) or self.get_state() == WorkerStatus.BUSY

        def request_force_stop(self, signum, frame) -> None:
            # RQ turns a second SIGTERM into a cold stop that drops the running job. A SIGTERM can
            # come twice without anyone meaning "now" (a process manager signalling every process,
            # then hinge serve's supervisor): it stays the same request. SIGINT or SIGKILL force it.
            if signum == signal.SIGTERM:
                if self.job_running():
                    STOP_LOG.info("worker %s: SIGTERM again; still checkpointing the running job", self.name)
                return
            super().request_force_stop(signum, frame)

        # -- a dead work horse (fork mode) releases its job at once ----------------------------------

        def handle_work_horse_killed(self, job, retpid, ret_val, rusage) -> None:
            super().handle_work_horse_killed(job, retpid, ret_val, rusage)
            from worker.runtime import core_budget

            core_budget.release_worker(self.connection, os.environ.get("HINGE_WORKER_ID", ""))  # the horse's cores
            job_id = (job.args or [None])[0]
            if not job_id:
                return
            jobs = JobStore(self.connection)
            record = jobs.get(job_id)
            if (
                record is not None
                and record.status is JobStatus.running
                and record.worker == os.environ.get("HINGE_WORKER_ID")
            ):
                release_lost_job(jobs, self.hinge_queue, record, f"work horse died (wait status {ret_val})")

    return HingeWorker


def _exit_when_orphaned_too_long(grace_s: float, log) -> None:
    """Leave at most ``grace_s`` after the parent (hinge serve's supervisor) died.

    The kernel's SIGTERM then starts the usual checkpoint, but the supervisor's embedded Redis got its
    stop signal at the same moment: a worker retrying Redis commands for ``redis_retry_s`` would
    outlive the service by a minute. After the grace it exits; its running job, if any, is requeued
    by the reaper when the service runs again.
    """
    import threading

    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.2)
        time.sleep(grace_s)
        log.warning("the supervisor is gone and the worker did not stop within %.0f s: leaving now", grace_s)
        logging.shutdown()
        os._exit(1)

    threading.Thread(target=watch, name="hinge-orphan-watch", daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    """Start one worker process."""
    os.environ.setdefault("NUMBA_THREADING_LAYER", "workqueue")
    parser = argparse.ArgumentParser(prog="hinge worker", description="Run one training worker.")
    parser.add_argument("--burst", action="store_true", help="Quit when the queue is empty.")
    parser.add_argument("--name", default=None, help="Worker name (default: host, pid and a random suffix).")
    parser.add_argument(
        "--execution",
        choices=("inline", "fork"),
        default=os.environ.get("HINGE_WORKER_EXECUTION", "inline"),
        help="Run each job inside the worker process (inline, default) or in a forked work horse (fork).",
    )
    parser.add_argument("--die-with-parent", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--log-level", default=os.environ.get("HINGE_LOG_LEVEL", "INFO"))
    args = parser.parse_args(argv)

    from core.config import get_settings
    from core.logs import configure_logging, rq_log_level

    settings = get_settings()
    configure_logging(args.log_level, settings.log_format)
    log = logging.getLogger("hinge.worker")

    if args.die_with_parent:
        from core.processes import die_with_parent

        die_with_parent()
        _exit_when_orphaned_too_long(settings.shutdown_grace_s, log)

    from rq import SimpleWorker, Worker
    from rq.serializers import JSONSerializer

    from core.queueing import JobQueue
    from core.storage.connection import resilient_client
    from worker.runtime import warmup
    from worker.runtime.heartbeat import Heartbeat

    os.environ["HINGE_WORKER_PID"] = str(os.getpid())
    if not settings.redis_url:
        print("hinge worker: REDIS_URL is not set", file=sys.stderr)
        return 2
    name = args.name or f"{socket.gethostname()}.{os.getpid()}.{uuid.uuid4().hex[:6]}"
    os.environ["HINGE_WORKER_ID"] = name
    begin = time.perf_counter()
    warmup.KERNELS.seed()  # an image's kernels, copied into a cache volume that lacks them
    beat = Heartbeat(name, settings, warmup.kernel_plan()).start()  # boots while the kernels warm up
    from core.processes import lower_priority

    lower_priority(settings.batch_nice)  # training is batch work; after the heartbeat started: it keeps priority
    builder = warmup.start_builder()  # compiles what the machine's cache lacks, at the lowest priority
    if builder is not None:
        log.info("compiling the solvers' code this machine lacks in the background: %s first", warmup.FIRST)
    warmup.ensure_first()
    import worker.runtime.jobs  # noqa: F401  (imported once here, so every forked work horse has it loaded)

    log.info("%s compiled and loaded in %.2f s; taking jobs", warmup.FIRST, time.perf_counter() - begin)
    client = resilient_client(settings.redis_url, settings.redis_retry_s)
    worker_class = make_worker_class(SimpleWorker if args.execution == "inline" else Worker)
    if not beat.wait_ready():
        log.error("the heartbeat process did not start (is Redis reachable?)")
        beat.stop()
        return 1
    if settings.preload_kernels:
        warmup.load_built()  # a warm cache: every solver loads in about a second
    beat.accepting.value = True  # from now on the worker counts as ready (/readyz)
    import redis

    from worker.runtime.progress import INTERRUPT

    loops = 0
    try:
        while not INTERRUPT.is_set():
            # RQ's own worker name changes when its loop is restarted (RQ refuses a live name twice);
            # the heartbeat's worker id (`name`, recorded in running jobs) stays.
            rq_name = name if loops == 0 else f"{name}-{loops}"
            loops += 1
            rq_worker = worker_class(
                [JobQueue(client, settings).base_queue()], connection=client, serializer=JSONSerializer, name=rq_name
            )
            rq_worker.hinge_queue = JobQueue(client, settings)
            try:
                rq_worker.work(burst=args.burst, logging_level=rq_log_level(args.log_level), with_scheduler=False)
            except redis.exceptions.RedisError as exc:
                log.warning("worker loop stopped on a Redis error (%s)", exc)
            if args.burst or rq_worker._stop_requested or rq_worker._shutdown_requested_date is not None:
                break
            # RQ's loop quits on a Redis error outside its dequeue (e.g. Redis restarting): go again.
            log.warning("worker loop ended without a stop request; starting it again in 1 s")
            time.sleep(1.0)
    finally:
        beat.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

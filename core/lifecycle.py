"""Crash recovery: worker heartbeats, the reaper, and what happens to a job whose worker is gone.

Design. Every worker process has a small heartbeat process (``worker/runtime/heartbeat.py``) that is not
slowed by the worker's Python (numba kernels hold the GIL for a whole pass over the data, so a
thread in the worker could stay silent for minutes). Every ``heartbeat_s`` it writes the worker's
liveness key ``hinge:worker:<id>`` = ``{pid, host, job, ts}`` with a time-to-live of
``worker_lease_s``; ``job`` is the job the worker is running right now (shared memory between the
worker and its heartbeat process, so it is right even while Redis is unreachable). When the worker
dies the heartbeat process notices within a fraction of a second (its parent changed) and deletes
the key at once; when both die (kill -9 of the process group, a lost machine) the key expires
after ``worker_lease_s``.

The reaper runs in the API (a thread) and in every heartbeat process, every ``reap_interval_s``.
A running job is lost when its worker's liveness key is gone, or when the key says the worker
runs another job (or none) in a heartbeat written after the job started (the job's function
ended without recording an outcome). A lost job goes back to the queue when its ``retries``
allow (``lost`` counts the losses so far), else it fails with error code ``worker_lost``. Every
reaper may find the same job: the status change is a fenced transition (status ``running`` and
the same run number), so exactly one acts. Detection takes about ``reap_interval_s`` after a
kill of the worker alone, at most ``worker_lease_s + reap_interval_s`` (12 s with the defaults)
when the heartbeat process dies too.

Redis restarts. Keys with a TTL keep their absolute expiry time in the append-only file, so after
Redis was down for longer than a lease every liveness key is gone when it comes back. The reaper
therefore does nothing while Redis's uptime is below ``worker_lease_s``: live workers have
rewritten their keys by then.

The reaper also sweeps the enqueue outbox (``core.queueing``): a job accepted by an API that
died before it reached RQ is enqueued. With ``job_ttl_s`` set it deletes the jobs that finished
longer ago than that (record, trace, cancel flag; their models stay).

Where it sits. The API (its reaper thread, /healthz, /metrics), ``hinge serve`` and the workers
(the heartbeat's reaper, a stopping worker's hand-back) all use this module, so it imports only
``core.config``, ``core.queueing`` and ``core.storage``: no FastAPI, nothing of worker/
(``tests/test_import_graph.py`` checks that imports run one way).
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from typing import Any

import redis

from core.config import Settings
from core.queueing import JobQueue
from core.schemas.jobs import JobStatus
from core.storage import keys
from core.storage.connection import text
from core.storage.job_record import JobRecord
from core.storage.jobs import JobStore, utc_now

log = logging.getLogger("hinge.lifecycle")


def solver_readiness(beats: dict[str, dict]) -> dict:
    """What the workers' heartbeats say of the solvers, together: ``ready`` (some worker's machine has their code,
    in the beats' order), ``left`` (still compiling somewhere), ``partly`` (those of ``left`` whose default
    formulation a machine compiling the rest has: dcd's C-SVC while its other formulations compile), ``failed`` (a
    background compile failed and no machine has them), ``eta_s`` (the longest estimate) and ``warming`` (how many
    workers are compiling)."""
    warming = [beat["warming"] for beat in beats.values() if beat.get("warming")]
    left = sorted({name for state in warming for name in state.get("left", [])})
    ready = list(dict.fromkeys(name for beat in beats.values() for name in beat.get("solvers", []) if name not in left))
    partly = [name for name in left if any(name in state.get("partly", []) for state in warming)]
    failed = sorted({name for beat in beats.values() for name in beat.get("solvers_failed", [])} - set(ready))
    eta = max((float(state.get("eta_s") or 0.0) for state in warming), default=0.0)
    return {"ready": ready, "left": left, "partly": partly, "failed": failed, "eta_s": eta, "warming": len(warming)}


def worker_beats(client: redis.Redis) -> dict[str, dict]:
    """The liveness record of every worker whose key exists (and prune the dead from the worker set)."""
    ids = [text(raw) for raw in client.smembers(keys.workers())]
    if not ids:
        return {}
    values = client.mget([keys.worker_alive(i) for i in ids])
    live = {}
    dead = []
    for worker_id, value in zip(ids, values):
        if value is None:
            dead.append(worker_id)
        else:
            try:
                live[worker_id] = json.loads(value)
            except ValueError:
                live[worker_id] = {}
    if dead:
        client.srem(keys.workers(), *dead)
    return live


def live_worker_count(client: redis.Redis, ready_only: bool = True) -> int:
    """Workers whose heartbeat is current (and, by default, that have warmed up and take jobs)."""
    beats = worker_beats(client)
    return sum(1 for beat in beats.values() if beat.get("ready", True) or not ready_only)


def release_lost_job(jobs: JobStore, queue: JobQueue, job: JobRecord, reason: str) -> str | None:
    """Requeue (retries left) or fail (`worker_lost`) a running job whose worker is gone.

    Fenced on the run number seen in ``job``: returns "requeued", "failed", or None when the job
    had already moved on (another reaper or the worker itself got there first).
    """
    job_id = job.id
    run = str(job.attempts)
    lost = job.lost + 1
    retries = job.retries
    if lost <= retries:
        moved = jobs.transition(
            job_id,
            (JobStatus.running,),
            JobStatus.queued,
            fence=("attempts", run),
            delete=("started_at", "worker", "started_ts"),
            lost=lost,
            last_loss={"reason": reason, "at": utc_now()},
        )
        if not moved:
            return None
        jobs.count_event("lost")
        jobs.count_event("retried")
        queue.enqueue(job_id, job.tenant, at_front=True, description=f"retry {lost} of {job_id} ({reason})")
        log.warning(
            "job %s lost (%s); queued again (retry %d of %d)", job_id, reason, lost, retries, extra={"job_id": job_id}
        )
        return "requeued"
    message = f"the worker running this job stopped ({reason}) and the job's retries ({retries}) are used up"
    moved = jobs.transition(
        job_id,
        (JobStatus.running,),
        JobStatus.failed,
        fence=("attempts", run),
        lost=lost,
        finished_at=utc_now(),
        error={"code": "worker_lost", "message": message},
    )
    if moved:
        jobs.count_event("lost")
        log.warning("job %s lost (%s); failed with worker_lost", job_id, reason, extra={"job_id": job_id})
        return "failed"
    return None


def hand_back_job(jobs: JobStore, queue: JobQueue, job: JobRecord, why: str) -> bool:
    """Put a running job back at the front of its queue; its retries are not used up (it was stopped, not lost).

    Fenced on the run number in ``job``: False when the job had already moved on.
    """
    moved = jobs.transition(
        job.id,
        (JobStatus.running,),
        JobStatus.queued,
        fence=("attempts", str(job.attempts)),
        delete=("started_at", "worker", "started_ts"),
    )
    if moved:
        jobs.count_event("requeued_on_shutdown")
        queue.enqueue(
            job.id, job.tenant, at_front=True, description=f"train {job.solver} on {job.dataset_id} (handed back)"
        )
        log.warning("job handed back to the queue: %s", why, extra={"job_id": job.id})
    return moved


def worker_pid(worker_id: str) -> int | None:
    """The process id in a worker id of `hinge worker` (``<host>.<pid>.<suffix>``), or None."""
    parts = worker_id.rsplit(".", 2)
    if len(parts) != 3 or not parts[1].isdigit():
        return None
    return int(parts[1])


def hand_back_jobs_of_workers(client: redis.Redis, settings: Settings, pids: set[int], why: str) -> list[str]:
    """Hand back (see ``hand_back_job``) every running job of the workers with these pids on this host."""
    jobs = JobStore(client)
    queue = JobQueue(client, settings)
    host = socket.gethostname()
    moved = []
    for job_id in jobs.running_ids():
        job = jobs.get(job_id)
        if job is None or job.status is not JobStatus.running:
            continue
        worker_id = job.worker or ""
        if (
            worker_pid(worker_id) in pids
            and worker_id.rsplit(".", 2)[0] == host
            and hand_back_job(jobs, queue, job, why)
        ):
            moved.append(job_id)
    return moved


class Reaper:
    """Finds running jobs whose worker is gone and releases them; sweeps the enqueue outbox."""

    def __init__(self, client: redis.Redis, settings: Settings):
        self.client = client
        self.settings = settings
        self.jobs = JobStore(client)
        self.queue = JobQueue(client, settings)
        self._orphans_seen: dict[str, float] = {}  # job id -> when this reaper first saw no worker would take it

    def redis_uptime(self) -> float:
        """Seconds since the Redis server started."""
        return float(self.client.info("server").get("uptime_in_seconds", 0))

    def pass_once(self) -> dict[str, int]:
        """One look at every running job; returns counts of what was done."""
        done = {"requeued": 0, "failed": 0, "enqueued": 0}
        if self.redis_uptime() < self.settings.worker_lease_s:
            return done  # Redis just came back: live workers have not rewritten their keys yet
        beats = worker_beats(self.client)
        for job_id in self.jobs.running_ids():
            job = self.jobs.get(job_id)
            if job is None or job.status is not JobStatus.running:
                continue
            reason = self._lost_reason(job, beats)
            if reason is None:
                continue
            outcome = release_lost_job(self.jobs, self.queue, job, reason)
            if outcome:
                done[outcome] += 1
        done["rescued"] = self.rescue_dequeued(beats)
        done["enqueued"] = self.queue.sweep_outbox(older_than_s=max(5.0, 2 * self.settings.reap_interval_s))
        if self.settings.job_ttl_s > 0:
            done["expired"] = self.jobs.expire_finished(self.settings.job_ttl_s)
        return done

    def rescue_dequeued(self, beats: dict[str, dict]) -> int:
        """Enqueue again the queued jobs that no worker will ever take (their worker died before starting them).

        Between RQ's dequeue and the job's move to ``running`` a worker holds a job that only RQ
        knows about (in the queue's intermediate list right after the dequeue, then in RQ's started
        registry). A kill -9 of the worker, or of Redis, in that window leaves the job ``queued``
        with an RQ job in no queue (two 5-minute soak runs of issue 9 lost 5 of 2,245 jobs that way). So
        every pass looks at each tenant's queued jobs: one whose current RQ job is neither waiting
        in its queue (or its intermediate list), nor held by a worker with a heartbeat, nor still in
        the enqueue outbox, for longer than a lease, is put back in its queue under a new RQ job id
        (no retry is used: it never ran). Fenced on the job's status and RQ job id.
        """
        from rq.intermediate_queue import IntermediateQueue
        from rq.job import Job as RQJob

        live = list(beats)
        now = time.monotonic()
        outbox = {text(raw) for raw in self.client.zrange(keys.jobs_outbox(), 0, -1)}
        seen: dict[str, float] = {}
        rescued = 0
        for tenant in self.queue.tenants():
            queue = self.queue.tenant_queue(tenant)
            intermediate = IntermediateQueue(queue.key, connection=self.client)
            # waiting in the queue; the intermediate list is not "held": a live worker moves a job on from
            # there within milliseconds, and a job left there longer than a lease is an orphan too
            held = {text(raw) for raw in self.client.lrange(queue.key, 0, -1)}
            stale: dict[str, Any] = {}
            for entry in self.client.zrange(queue.started_job_registry.key, 0, -1):
                rq_job_id = text(entry).rsplit(":", 1)[0]
                try:
                    worker = RQJob.fetch(rq_job_id, connection=self.client, serializer=queue.serializer).worker_name
                except Exception:
                    worker = None
                if worker and any(worker == w or worker.startswith(w + "-") for w in live):
                    held.add(rq_job_id)
                else:
                    stale[rq_job_id] = entry
            queued = [text(raw) for raw in self.client.smembers(keys.tenant_jobs_in(tenant, "queued"))]
            for job_id, (status, rq_stored) in zip(queued, self.jobs.statuses(queued)):
                rq_job_id = rq_stored or ""
                if status != JobStatus.queued.value or job_id in outbox or rq_job_id in held:
                    continue
                first = self._orphans_seen.get(job_id, now)
                seen[job_id] = first
                if now - first <= self.settings.worker_lease_s:
                    continue
                job = self.jobs.get(job_id)
                if job is None or job.status is not JobStatus.queued or (job.rq_job_id or "") != rq_job_id:
                    continue
                self.queue.enqueue(
                    job_id, tenant, at_front=True, description=f"{job_id} again (its worker died before starting it)"
                )
                if rq_job_id in stale:
                    self.client.zrem(queue.started_job_registry.key, stale[rq_job_id])
                intermediate.remove(rq_job_id)
                self.jobs.count_event("rescued")
                seen.pop(job_id, None)
                log.warning(
                    "job %s: no worker held it any more (died before starting it); queued again",
                    job_id,
                    extra={"job_id": job_id},
                )
                rescued += 1
        self._orphans_seen = seen
        return rescued

    def _lost_reason(self, job: JobRecord, beats: dict[str, dict]) -> str | None:
        if not job.worker:
            return None
        beat = beats.get(job.worker)
        if beat is None:
            return "worker heartbeat stopped"
        started = job.started_ts or 0.0
        if beat.get("job") != job.id and float(beat.get("ts", 0)) > started + 1.0:
            return "worker no longer runs the job"
        return None

    def run(self, stop: threading.Event) -> None:
        """Reap every ``reap_interval_s`` until ``stop`` is set; Redis errors are logged and retried."""
        while not stop.wait(self.settings.reap_interval_s):
            try:
                self.pass_once()
            except redis.exceptions.RedisError as exc:
                log.info("reaper: Redis unavailable (%s); trying again", exc)
            except Exception:  # never let the reaper die
                log.exception("reaper pass failed")


def start_reaper_thread(client: redis.Redis, settings: Settings) -> tuple[threading.Thread, threading.Event]:
    """Run a Reaper in a daemon thread; set the returned event to stop it."""
    stop = threading.Event()
    thread = threading.Thread(target=Reaper(client, settings).run, args=(stop,), name="hinge-reaper", daemon=True)
    thread.start()
    return thread, stop

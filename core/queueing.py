"""Putting jobs into RQ: one RQ queue per tenant, so that workers can serve tenants fairly.

Why per-tenant queues. With one FIFO queue, a tenant that submits 1,000 jobs makes every other
tenant wait for all of them. Here each tenant's jobs go to their own RQ queue
(``<queue_name>.tenant.<tenant>``) and a worker, before each dequeue, lists the tenants' queues
least recently served first (a sorted set ``tenant -> when a worker last took one of its jobs``,
shared by all workers), so a tenant with one job waits for at most one job slot to free up,
whatever the others have queued. RQ still does all the queue bookkeeping (job hashes, registries,
BLPOP across the queues); only the order of the queues a worker listens on is ours (see
``worker.runtime.main.HingeWorker``). Tenants at their running-jobs cap are left out of that list.

RQ job ids. RQ carries only our job id (JSON serializer). Each time a job is put into a queue it
gets a fresh RQ job id ``<job id>_r<n>`` recorded in the job as ``rq_job_id``: a worker runs an RQ
job only if it is still the job's current one, so a duplicate (the reaper re-enqueueing a job whose
API died between storing and enqueueing it) is skipped, never run twice.

The outbox. A job record is created together with an entry in the outbox sorted set; the entry
is removed once the RQ job exists. An API killed in between leaves the entry behind and the reaper
(``core.lifecycle``) enqueues it: no accepted job is lost.
"""

from __future__ import annotations

import time

import redis
from rq import Queue
from rq.job import Job as RQJob
from rq.serializers import JSONSerializer

from core.config import Settings
from core.schemas.jobs import JobStatus
from core.storage import keys
from core.storage.connection import text
from core.storage.jobs import JobStore

TRAIN_FUNCTION = "worker.runtime.jobs.train"


class JobQueue:
    """Enqueues training jobs into per-tenant RQ queues and reports queue depth."""

    def __init__(self, client: redis.Redis, settings: Settings):
        self.client = client
        self.settings = settings
        self.base = settings.queue_name

    def queue(self, name: str) -> Queue:
        """The RQ queue of that name (JSON serializer)."""
        return Queue(name, connection=self.client, serializer=JSONSerializer)

    def base_queue(self) -> Queue:
        """The plain queue every worker also listens on (jobs queued before per-tenant queues existed)."""
        return self.queue(self.base)

    def tenant_queue(self, tenant: str) -> Queue:
        """The RQ queue of one tenant's jobs."""
        return self.queue(keys.tenant_queue_name(self.base, tenant))

    def tenants(self) -> list[str]:
        """Tenants that have a queue."""
        return sorted(text(raw) for raw in self.client.smembers(keys.fair_tenants(self.base)))

    def enqueue(self, job_id: str, tenant: str, *, at_front: bool = False, description: str | None = None) -> str:
        """Put the job into its tenant's queue under a fresh RQ job id; returns that id."""
        n = self.client.hincrby(keys.job(job_id), "enqueues", 1)  # JobRecord.enqueues, counted atomically
        rq_job_id = f"{job_id}_r{n}"
        JobStore(self.client).update(job_id, rq_job_id=rq_job_id)
        self.client.sadd(keys.fair_tenants(self.base), tenant)
        self.tenant_queue(tenant).enqueue(
            TRAIN_FUNCTION,
            job_id,
            job_id=rq_job_id,
            job_timeout=self.settings.job_timeout_s,
            result_ttl=3600,
            failure_ttl=7 * 24 * 3600,
            description=description or f"train {job_id}",
            at_front=at_front,
        )
        self.client.zrem(keys.jobs_outbox(), job_id)
        return rq_job_id

    def cancel(self, rq_job_id: str | None) -> None:
        """Remove a queued RQ job (best effort: it may already be taken, the worker then skips it)."""
        if not rq_job_id:
            return
        try:
            RQJob.fetch(rq_job_id, connection=self.client, serializer=JSONSerializer).cancel()
        except Exception:
            pass

    def depth(self) -> dict[str, int]:
        """Jobs waiting in RQ, per tenant (the base queue under the empty name)."""
        names = {"": self.base, **{t: keys.tenant_queue_name(self.base, t) for t in self.tenants()}}
        with self.client.pipeline(transaction=False) as pipe:
            for name in names.values():
                pipe.llen(self.queue(name).key)
            lengths = pipe.execute()
        return {tenant: int(n) for tenant, n in zip(names, lengths)}

    def sweep_outbox(self, older_than_s: float = 10.0) -> int:
        """Enqueue jobs left in the outbox for longer than ``older_than_s`` (their API died); returns how many."""
        jobs = JobStore(self.client)
        done = 0
        for raw in self.client.zrangebyscore(keys.jobs_outbox(), "-inf", time.time() - older_than_s):
            job_id = text(raw)
            job = jobs.get(job_id)
            if job is None or job.status is not JobStatus.queued:
                self.client.zrem(keys.jobs_outbox(), job_id)
                continue
            self.enqueue(job_id, job.tenant, description=f"train {job.solver} on {job.dataset_id}")
            done += 1
        return done

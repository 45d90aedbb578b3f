"""Training jobs: their state (a Redis hash), their convergence trace (a list) and cancel flags.

A job moves queued -> running -> succeeded | failed | canceled, and queued -> canceled; a running
job whose worker is lost (or that a stopping worker hands back) goes back to queued. Every change of
status goes through ``transition``, a Lua script that checks the current status first (and, when
asked, a fencing field such as the run number), so the API, the workers and the reaper never
overwrite each other: a job canceled while queued is never run, and a worker that was declared lost
but comes back cannot overwrite the run that replaced it. What the script did comes back as a
``Transition``.

The same script keeps the bookkeeping that limits, the reaper and the metrics read, in the same
atomic step: the per-tenant sets of queued and running job ids, the global sorted sets of running
and of finished jobs, and a hash counting jobs per status. A job is read as a ``JobRecord``
(``core.storage.job_record``: the one conversion to and from the hash), and every write names
fields of that record. A finished job can be deleted (``delete``, also by the reaper once
``job_ttl_s`` has passed): its record, trace and flags go, its model stays.
"""

from __future__ import annotations

import builtins
import json
import time
from dataclasses import replace
from datetime import UTC, datetime
from enum import IntEnum
from typing import Any, cast

import redis

from core.schemas.jobs import JobStatus
from core.storage import keys
from core.storage.connection import text
from core.storage.job_record import IncompleteJobHash, JobRecord, check_names

FINAL_STATES = (JobStatus.succeeded, JobStatus.failed, JobStatus.canceled)


class Transition(IntEnum):
    """What a transition did: the return codes of the transition script."""

    NO_JOB = -1
    """There is no such job."""
    WRONG_STATE = 0
    """The status is none of the states moved from, or the fence field holds another value: nothing changed."""
    DONE = 1
    """The status and the fields were written."""
    AT_RUNNING_CAP = 2
    """A move to running refused: the tenant has ``running_cap`` running jobs; nothing changed."""


class Deletion(IntEnum):
    """What a delete did: the return codes of the delete script."""

    NO_JOB = -1
    """There is no such job."""
    NOT_FINISHED = 0
    """The job is queued or running: nothing was deleted."""
    DELETED = 1
    """The record, its trace, search rows and cancel flag are gone."""


# KEYS: job hash, running zset, stats hash, tenant's queued set, tenant's running set, outbox, finished zset
# ARGV: job id, fence field ('' for none), fence value, now, running cap (0: none),
#       n_from, from states..., n_del, fields to delete..., field/value pairs (status among them)
# Returns a Transition: -1 (no such job), 0 (status or fence did not match), 1 (done), 2 (refused: running cap).
# A move to a final state publishes the job's id on keys.job_ends_channel() (the API's long polls wait for it).
_TRANSITION = """
local current = redis.call('HGET', KEYS[1], 'status')
if not current then return -1 end
if ARGV[2] ~= '' and redis.call('HGET', KEYS[1], ARGV[2]) ~= ARGV[3] then return 0 end
local n = tonumber(ARGV[6])
local allowed = false
for i = 1, n do
  if current == ARGV[6 + i] then allowed = true end
end
if not allowed then return 0 end
local pos = 7 + n
local new = current
for j = pos + tonumber(ARGV[pos]) + 1, #ARGV, 2 do
  if ARGV[j] == 'status' then new = ARGV[j + 1] end
end
local cap = tonumber(ARGV[5])
if new == 'running' and current ~= 'running' and cap > 0 and redis.call('SCARD', KEYS[5]) >= cap then
  return 2
end
for i = 1, tonumber(ARGV[pos]) do
  redis.call('HDEL', KEYS[1], ARGV[pos + i])
end
for j = pos + tonumber(ARGV[pos]) + 1, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[j], ARGV[j + 1])
end
if new ~= current then
  redis.call('HINCRBY', KEYS[3], current, -1)
  redis.call('HINCRBY', KEYS[3], new, 1)
  if current == 'queued' then redis.call('SREM', KEYS[4], ARGV[1]) end
  if current == 'running' then
    redis.call('SREM', KEYS[5], ARGV[1])
    redis.call('ZREM', KEYS[2], ARGV[1])
  end
  if new == 'queued' then
    redis.call('SADD', KEYS[4], ARGV[1])
    redis.call('ZADD', KEYS[6], ARGV[4], ARGV[1])
  end
  if new == 'running' then
    redis.call('SADD', KEYS[5], ARGV[1])
    redis.call('ZADD', KEYS[2], ARGV[4], ARGV[1])
  end
  if new == 'succeeded' or new == 'failed' or new == 'canceled' then
    redis.call('ZADD', KEYS[7], ARGV[4], ARGV[1])
    redis.call('PUBLISH', '@JOB_ENDS@', ARGV[1])
  end
end
return 1
""".replace("@JOB_ENDS@", keys.job_ends_channel())

# KEYS: job hash, trace, search rows, cancel flag, tenant index, stats hash, finished zset
# ARGV: job id
# Returns a Deletion: -1 (no such job), 0 (not finished: nothing deleted), 1 (deleted; its id is published on
# keys.job_ends_channel(), so that requests waiting for it answer 404 at once).
_DELETE = """
local status = redis.call('HGET', KEYS[1], 'status')
if not status then return -1 end
if status ~= 'succeeded' and status ~= 'failed' and status ~= 'canceled' then return 0 end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
redis.call('ZREM', KEYS[5], ARGV[1])
redis.call('ZREM', KEYS[7], ARGV[1])
redis.call('HINCRBY', KEYS[6], status, -1)
redis.call('PUBLISH', '@JOB_ENDS@', ARGV[1])
return 1
""".replace("@JOB_ENDS@", keys.job_ends_channel())

# KEYS: job hash, tenant index, stats hash, tenant's queued set, outbox
# ARGV: job id, now, queued limit (0: none), field/value pairs
# Returns 1 (created) or 0 (the tenant already has `limit` queued jobs).
_CREATE = """
local limit = tonumber(ARGV[3])
if limit > 0 and redis.call('SCARD', KEYS[4]) >= limit then return 0 end
for j = 4, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[j], ARGV[j + 1])
end
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
redis.call('HINCRBY', KEYS[3], 'queued', 1)
redis.call('SADD', KEYS[4], ARGV[1])
redis.call('ZADD', KEYS[5], ARGV[2], ARGV[1])
return 1
"""


def utc_now() -> str:
    """The current time as an ISO 8601 UTC string with a Z suffix."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class JobStore:
    """Reads and writes job records, traces and cancel flags."""

    def __init__(self, client: redis.Redis):
        self.client = client
        self._transition = client.register_script(_TRANSITION)
        self._create = client.register_script(_CREATE)
        self._delete = client.register_script(_DELETE)

    def create(self, job: JobRecord, max_queued: int = 0) -> bool:
        """Store a new job as queued, index it and put it in the outbox.

        Returns False (and stores nothing) when the tenant already has ``max_queued`` queued jobs
        (0: no limit). The outbox entry is removed once the job is in an RQ queue; the reaper
        enqueues entries left behind by an API that died in between.
        """
        args: list = [job.id, time.time(), int(max_queued)]
        for name, value in replace(job, status=JobStatus.queued).to_hash().items():
            args.extend([name, value])
        created = self._create(
            keys=[
                keys.job(job.id),
                keys.tenant_index(job.tenant, "jobs"),
                keys.job_stats(),
                keys.tenant_jobs_in(job.tenant, "queued"),
                keys.jobs_outbox(),
            ],
            args=args,
        )
        return created == 1

    def count_in(self, tenant: str, status: str) -> int:
        """How many of the tenant's jobs are in ``status`` (`queued` or `running`)."""
        return int(self.client.scard(keys.tenant_jobs_in(tenant, status)))

    def running_ids(self) -> list[str]:
        """Ids of every running job (of all tenants)."""
        return [text(raw) for raw in self.client.zrange(keys.jobs_running(), 0, -1)]

    def stats(self) -> dict[str, float]:
        """Jobs per status and the life-cycle counters (lost, retried, interrupted)."""
        return {text(k): float(v) for k, v in self.client.hgetall(keys.job_stats()).items()}

    def count_event(self, name: str, amount: int = 1) -> None:
        """Add to a life-cycle counter of the stats hash (`lost`, `retried`, `interrupted`)."""
        self.client.hincrby(keys.job_stats(), f"event:{name}", amount)

    def get(self, job_id: str, tenant: str | None = None) -> JobRecord | None:
        """The job's record, or None if missing or (when ``tenant`` is given) another tenant's.

        A hash without the fields every job has (a write that raced a delete) is no job either.
        """
        raw = self.client.hgetall(keys.job(job_id))
        if not raw:
            return None
        try:
            job = JobRecord.from_hash(raw)
        except IncompleteJobHash:
            return None
        if tenant is not None and job.tenant != tenant:
            return None
        return job

    def list(
        self, tenant: str, offset: int = 0, limit: int = 100, status: JobStatus | None = None
    ) -> tuple[builtins.list[JobRecord], int]:
        """A page of the tenant's jobs, newest first (optionally only those in one status), and the total."""
        index = keys.tenant_index(tenant, "jobs")
        if status is None:
            total = self.client.zcard(index)
            if offset >= total:  # also keeps Redis's 64-bit range arguments in range for huge offsets
                return [], total
            ids = [text(i) for i in self.client.zrevrange(index, offset, offset + limit - 1)]
            return [job for job in (self.get(i) for i in ids) if job is not None], total
        matching = []
        for raw_id in self.client.zrevrange(index, 0, -1):
            status_now = self.client.hget(keys.job(text(raw_id)), "status")
            if status_now is not None and text(status_now) == status.value:
                matching.append(text(raw_id))
        page = matching[offset : offset + limit]
        return [job for job in (self.get(i) for i in page) if job is not None], len(matching)

    def statuses(self, job_ids: builtins.list[str]) -> builtins.list[tuple[str | None, str | None]]:
        """(status, rq_job_id) of each job, as stored (None where absent), in one round trip: the reaper's scan, and
        the API's watcher of the jobs that requests wait for (``service/api/job_wait.py``)."""
        with self.client.pipeline(transaction=False) as pipe:
            for job_id in job_ids:
                pipe.hmget(keys.job(job_id), "status", "rq_job_id")
            found = pipe.execute()
        return [(None if s is None else text(s), None if r is None else text(r)) for s, r in found]

    def transition(
        self,
        job_id: str,
        from_states: tuple[JobStatus, ...],
        to_state: JobStatus,
        *,
        fence: tuple[str, str] | None = None,
        delete: tuple[str, ...] = (),
        **fields,
    ) -> bool:
        """Set status to ``to_state`` (and other fields of the record) only if the status is one of ``from_states``.

        ``fence=(field, value)``: only if that field holds that value (as stored text) too (a run
        number, an RQ job id). ``delete``: fields to remove from the record in the same step. A move
        back to ``queued`` also puts the job in the enqueue outbox (the caller enqueues it; the reaper
        does if the caller dies first).
        """
        code = self.transition_code(job_id, from_states, to_state, fence=fence, delete=delete, **fields)
        return code is Transition.DONE

    def transition_code(
        self,
        job_id: str,
        from_states: tuple[JobStatus, ...],
        to_state: JobStatus,
        *,
        fence: tuple[str, str] | None = None,
        delete: tuple[str, ...] = (),
        running_cap: int = 0,
        **fields,
    ) -> Transition:
        """``transition`` saying what it did; ``running_cap`` > 0 refuses a move to running while the tenant
        has that many running jobs (``Transition.AT_RUNNING_CAP``)."""
        raw_tenant = self.client.hget(keys.job(job_id), "tenant")
        if raw_tenant is None:
            return Transition.NO_JOB
        tenant = text(raw_tenant)
        encoded = JobRecord.encode(dict(fields, status=to_state))
        fence_field, fence_value = fence if fence is not None else ("", "")
        check_names([*delete, *([fence_field] if fence_field else [])])
        args: list = [
            job_id,
            fence_field,
            str(fence_value),
            time.time(),
            int(running_cap),
            len(from_states),
            *(JobStatus(state).value for state in from_states),
            len(delete),
            *delete,
        ]
        for name, value in encoded.items():
            args.extend([name, value])
        return Transition(
            int(
                self._transition(
                    keys=[
                        keys.job(job_id),
                        keys.jobs_running(),
                        keys.job_stats(),
                        keys.tenant_jobs_in(tenant, "queued"),
                        keys.tenant_jobs_in(tenant, "running"),
                        keys.jobs_outbox(),
                        keys.jobs_finished(),
                    ],
                    args=args,
                )
            )
        )

    def delete(self, job_id: str) -> Deletion:
        """Delete a finished job: its record, trace, search rows and cancel flag (its model stays)."""
        raw_tenant = self.client.hget(keys.job(job_id), "tenant")
        if raw_tenant is None:
            return Deletion.NO_JOB
        return Deletion(
            self._delete(
                keys=[
                    keys.job(job_id),
                    keys.job_trace(job_id),
                    keys.job_search_rows(job_id),
                    keys.job_cancel(job_id),
                    keys.tenant_index(text(raw_tenant), "jobs"),
                    keys.job_stats(),
                    keys.jobs_finished(),
                ],
                args=[job_id],
            )
        )

    def expire_finished(self, ttl_s: float, now: float | None = None, batch: int = 500) -> int:
        """Delete the jobs that finished more than ``ttl_s`` seconds ago (HINGE_JOB_TTL_S); returns how many."""
        cutoff = (time.time() if now is None else now) - ttl_s
        deleted = 0
        while True:
            ids = [text(raw) for raw in self.client.zrangebyscore(keys.jobs_finished(), "-inf", cutoff, 0, batch)]
            for job_id in ids:
                if self.delete(job_id) is Deletion.DELETED:
                    deleted += 1
                else:  # gone already (or, impossibly, not finished): forget the entry
                    self.client.zrem(keys.jobs_finished(), job_id)
            if len(ids) < batch:
                return deleted

    def update(self, job_id: str, **fields) -> None:
        """Overwrite some fields of a job's record (progress, subtasks, ...), never its status."""
        fields.pop("status", None)
        encoded = JobRecord.encode(fields)
        if encoded:
            self.client.hset(keys.job(job_id), mapping=_fields(encoded))

    def clear(self, job_id: str, *names: str) -> None:
        """Remove fields of a job's record (they read as None), never its status."""
        check_names(names)
        if "status" in names:
            raise TypeError("a job's status changes by a transition only")
        self.client.hdel(keys.job(job_id), *names)

    def append_trace(self, job_id: str, points: builtins.list[dict], progress: dict | None = None) -> None:
        """Append convergence points (and the matching progress) in one round trip."""
        if not points and progress is None:
            return
        with self.client.pipeline(transaction=False) as pipe:
            if points:
                pipe.rpush(keys.job_trace(job_id), *[json.dumps(p) for p in points])
            if progress is not None:
                pipe.hset(keys.job(job_id), mapping=_fields(JobRecord.encode({"progress": progress})))
            pipe.execute()

    def trace(self, job_id: str, start: int = 0, stop: int = -1) -> builtins.list[dict]:
        """The job's convergence points from index ``start`` on."""
        if start >= 2**62:
            return []
        return [json.loads(p) for p in self.client.lrange(keys.job_trace(job_id), start, stop)]

    def trace_length(self, job_id: str) -> int:
        """How many trace points the job has recorded."""
        return self.client.llen(keys.job_trace(job_id))

    def request_cancel(self, job_id: str) -> None:
        """Raise the cancel flag that the running solver polls."""
        self.client.set(keys.job_cancel(job_id), b"1")

    def cancel_requested(self, job_id: str) -> bool:
        """True once a cancel was requested for the job."""
        return bool(self.client.exists(keys.job_cancel(job_id)))


def _fields(encoded: dict[str, str]) -> dict[Any, Any]:
    """Encoded fields as redis-py's ``hset`` is typed to take them (its key type is a union of its own)."""
    return cast(dict[Any, Any], encoded)

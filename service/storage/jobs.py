"""Training jobs: their state (a Redis hash), their convergence trace (a list) and cancel flags.

A job moves queued -> running -> succeeded | failed | canceled, and queued -> canceled. Every
change of status goes through ``transition``, a Lua script that checks the current status first,
so the API and a worker never overwrite each other (a job canceled while queued is never run).
Structured fields (params, progress, error) are JSON strings inside the hash.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone

import redis

from service.storage import keys

FINAL_STATES = ("succeeded", "failed", "canceled")
JSON_FIELDS = ("params", "progress", "error", "search_results", "subtasks")

_TRANSITION = """
local current = redis.call('HGET', KEYS[1], 'status')
if not current then return -1 end
for i = 1, tonumber(ARGV[1]) do
  if current == ARGV[1 + i] then
    local n = tonumber(ARGV[1])
    for j = n + 2, #ARGV, 2 do
      redis.call('HSET', KEYS[1], ARGV[j], ARGV[j + 1])
    end
    return 1
  end
end
return 0
"""


def utc_now() -> str:
    """The current time as an ISO 8601 UTC string with a Z suffix."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class JobStore:
    """Reads and writes job records, traces and cancel flags."""

    def __init__(self, client: redis.Redis):
        self.client = client
        self._transition = client.register_script(_TRANSITION)

    def create(self, job: dict) -> None:
        """Store a new job record (``id``, ``tenant``, ``status`` and the rest) and index it."""
        fields = _encode(job)
        with self.client.pipeline(transaction=True) as pipe:
            pipe.hset(keys.job(job["id"]), mapping=fields)
            pipe.zadd(keys.tenant_index(job["tenant"], "jobs"), {job["id"]: time.time()})
            pipe.execute()

    def get(self, job_id: str, tenant: str | None = None) -> dict | None:
        """The job record, or None if missing or (when ``tenant`` is given) another tenant's."""
        raw = self.client.hgetall(keys.job(job_id))
        if not raw:
            return None
        job = _decode(raw)
        if tenant is not None and job.get("tenant") != tenant:
            return None
        return job

    def list(self, tenant: str, offset: int = 0, limit: int = 100, status: str | None = None) -> tuple[list[dict], int]:
        """A page of the tenant's jobs, newest first (optionally only those in one status), and the total."""
        index = keys.tenant_index(tenant, "jobs")
        if status is None:
            total = self.client.zcard(index)
            ids = [i.decode() for i in self.client.zrevrange(index, offset, offset + limit - 1)]
            return [job for job in (self.get(i) for i in ids) if job is not None], total
        matching = []
        for raw_id in self.client.zrevrange(index, 0, -1):
            status_now = self.client.hget(keys.job(raw_id.decode()), "status")
            if status_now is not None and status_now.decode() == status:
                matching.append(raw_id.decode())
        page = matching[offset : offset + limit]
        return [job for job in (self.get(i) for i in page) if job is not None], len(matching)

    def transition(self, job_id: str, from_states: tuple[str, ...], to_state: str, **fields) -> bool:
        """Set status to ``to_state`` (and other fields) only if the status is one of ``from_states``."""
        encoded = _encode(dict(fields, status=to_state))
        args: list = [len(from_states), *from_states]
        for name, value in encoded.items():
            args.extend([name, value])
        return self._transition(keys=[keys.job(job_id)], args=args) == 1

    def update(self, job_id: str, **fields) -> None:
        """Overwrite some fields of a job (progress, subtasks, ...), never its status."""
        fields.pop("status", None)
        if fields:
            self.client.hset(keys.job(job_id), mapping=_encode(fields))

    def append_trace(self, job_id: str, points: list[dict], progress: dict | None = None) -> None:
        """Append convergence points (and the matching progress) in one round trip."""
        if not points and progress is None:
            return
        with self.client.pipeline(transaction=False) as pipe:
            if points:
                pipe.rpush(keys.job_trace(job_id), *[json.dumps(p) for p in points])
            if progress is not None:
                pipe.hset(keys.job(job_id), "progress", json.dumps(progress))
            pipe.execute()

    def trace(self, job_id: str, start: int = 0, stop: int = -1) -> list[dict]:
        """The job's convergence points from index ``start`` on."""
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


def _encode(fields: dict) -> dict:
    out = {}
    for name, value in fields.items():
        if value is None:
            continue
        if name in JSON_FIELDS:
            out[name] = json.dumps(value)
        elif isinstance(value, bool):
            out[name] = "1" if value else "0"
        else:
            out[name] = str(value)
    return out


def _decode(raw: dict) -> dict:
    job: dict = {}
    for name_raw, value_raw in raw.items():
        name, value = name_raw.decode(), value_raw.decode()
        if name in JSON_FIELDS:
            job[name] = json.loads(value)
        else:
            job[name] = value
    return job

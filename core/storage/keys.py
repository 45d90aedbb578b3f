"""The one module that builds Redis keys. Every key of the service starts with ``hinge:``."""

from __future__ import annotations

import secrets

PREFIX = "hinge"


def new_id(kind: str) -> str:
    """A fresh random id with a readable prefix: ``ds_…``, ``job_…``, ``mdl_…``."""
    return f"{kind}_{secrets.token_hex(10)}"


def dataset(dataset_id: str) -> str:
    """JSON metadata of a data set (its presence is what makes the data set exist)."""
    return f"{PREFIX}:dataset:{dataset_id}"


def model(model_id: str) -> str:
    """JSON metadata of a model."""
    return f"{PREFIX}:model:{model_id}"


def array_chunk(owner_key: str, name: str, index: int) -> str:
    """One chunk of a binary array that belongs to a data set or a model."""
    return f"{owner_key}:array:{name}:{index}"


def job(job_id: str) -> str:
    """Hash with the state of a training job."""
    return f"{PREFIX}:job:{job_id}"


def job_ends_channel() -> str:
    """Pub/sub channel on which every job's end (succeeded, failed, canceled) and deletion is published: its id."""
    return f"{PREFIX}:job-ends"


def job_trace(job_id: str) -> str:
    """List of JSON convergence points of a job, appended while it runs."""
    return f"{PREFIX}:job:{job_id}:trace"


def job_search_rows(job_id: str) -> str:
    """List of JSON fold results of a distributed search, one entry per (setting, fold)."""
    return f"{PREFIX}:job:{job_id}:search_rows"


def job_cancel(job_id: str) -> str:
    """Flag set when a cancel of the job is requested."""
    return f"{PREFIX}:job:{job_id}:cancel"


def tenant_index(tenant: str, kind: str) -> str:
    """Sorted set (score: creation time) of a tenant's data sets, jobs or models."""
    return f"{PREFIX}:tenant:{tenant}:{kind}"


# -- job life cycle bookkeeping (maintained by the transition scripts in core.storage.jobs) -----


def jobs_running() -> str:
    """Sorted set of running job ids (score: start time), scanned by the reaper."""
    return f"{PREFIX}:jobs:running"


def jobs_finished() -> str:
    """Sorted set of finished job ids (score: when they ended), swept for HINGE_JOB_TTL_S."""
    return f"{PREFIX}:jobs:finished"


def jobs_outbox() -> str:
    """Sorted set of queued job ids whose RQ job may not exist yet (score: when they were put there)."""
    return f"{PREFIX}:jobs:outbox"


def tenant_jobs_in(tenant: str, status: str) -> str:
    """Set of a tenant's job ids in one status (`queued` or `running`), for the per-tenant limits."""
    return f"{PREFIX}:tenant:{tenant}:jobs:{status}"


def job_stats() -> str:
    """Hash: status -> number of jobs in it; also `lost`, `retried`, `interrupted` counters."""
    return f"{PREFIX}:stats:jobs"


def solver_stats() -> str:
    """Hash: solver -> total solver seconds (workers add to it after each job)."""
    return f"{PREFIX}:stats:solver_seconds"


def dataset_stats() -> str:
    """Hash: `count` and `bytes` (stored array bytes) of the data sets in Redis."""
    return f"{PREFIX}:stats:datasets"


# -- workers: liveness (heartbeats) and fair queues --------------------------------------------------


def workers() -> str:
    """Set of worker ids that registered a heartbeat (pruned when their heartbeat key is gone)."""
    return f"{PREFIX}:workers"


def worker_alive(worker_id: str) -> str:
    """A worker's heartbeat: JSON {pid, host, job, ts}, with a TTL its heartbeat process refreshes."""
    return f"{PREFIX}:worker:{worker_id}"


def core_leases(machine: str) -> str:
    """Hash worker id -> cores its running job holds on one machine (``worker.runtime.core_budget``)."""
    return f"{PREFIX}:cores:{machine}"


def core_waiters(machine: str) -> str:
    """Hash worker id -> cores wanted, for the jobs on one machine waiting for a free core (``worker.runtime.core_budget``)."""
    return f"{PREFIX}:cores:{machine}:waiting"


def tenant_queue_name(base: str, tenant: str) -> str:
    """Name of the RQ queue holding one tenant's jobs (RQ stores it under `rq:queue:<name>`)."""
    return f"{base}.tenant.{tenant}"


def fair_tenants(base: str) -> str:
    """Set of tenants that have (or had) a queue under the base queue name."""
    return f"{PREFIX}:fair:{base}:tenants"


def fair_served(base: str) -> str:
    """Sorted set tenant -> when a worker last took one of its jobs (least recently served goes first)."""
    return f"{PREFIX}:fair:{base}:served"


# -- API keys ------------------------------------------------------------------------------------------


def api_key(key_id: str) -> str:
    """Hash of one API key: tenant, name, sha256 digest of the secret, created_at, revoked_at."""
    return f"{PREFIX}:apikey:{key_id}"


def api_keys() -> str:
    """Sorted set of every API key id (score: creation time)."""
    return f"{PREFIX}:apikeys"


def api_keys_active() -> str:
    """Set of the ids of API keys not revoked (non-empty: every request needs a key)."""
    return f"{PREFIX}:apikeys:active"


# -- object store keys (core.storage.objects): data sets' shards and large models' arrays ------------------


def dataset_objects(dataset_id: str) -> str:
    """Prefix of every object of one data set (its shards)."""
    return f"datasets/{dataset_id}/"


def dataset_shard(dataset_id: str, sha256: str) -> str:
    """One shard of a data set, named by the SHA-256 of its bytes (content-addressed: immutable)."""
    return f"datasets/{dataset_id}/{sha256}.shard"


def model_objects(model_id: str) -> str:
    """Prefix of every object of one model (its arrays, when the model is too large for Redis)."""
    return f"models/{model_id}/"


def model_array_object(model_id: str, name: str, sha256: str) -> str:
    """One array of a model, named by the SHA-256 of its stored bytes."""
    return f"models/{model_id}/{name}-{sha256}.array"


def object_owner(key: str) -> tuple[str, str] | None:
    """(kind, id) of the data set (``datasets``) or model (``models``) an object key belongs to; None otherwise."""
    parts = key.split("/")
    if len(parts) >= 3 and parts[0] in ("datasets", "models") and parts[1]:
        return parts[0], parts[1]
    return None


def store_gc_turn() -> str:
    """Set (with a time-to-live of one interval) by the API process whose turn it is to collect the object store's
    garbage, so that several API replicas do not all list the store."""
    return f"{PREFIX}:store-gc"

"""Settings: one cached, overridable function reads them from the environment.

Every setting is an environment variable ``HINGE_<NAME>`` (case-insensitive), except the Redis URL,
which is plain ``REDIS_URL`` as in most deployments. Tests and the CLI override by setting the
environment and calling ``get_settings.cache_clear()``.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

MiB = 1024 * 1024
GiB = 1024 * MiB


def model_reserve_fraction(settings: Settings) -> float:
    """The share of maxmemory a model write must leave free: a fifth of the data sets' reserve."""
    return settings.storage_reserve_fraction / 5


REDIS_UNITS = {"k": 1000, "kb": 1024, "m": 1000**2, "mb": 1024**2, "g": 1000**3, "gb": 1024**3}
"""Redis's memory units (redis.conf): 1k = 1000 bytes, 1kb = 1024 bytes, and so on."""


def parse_memory(value: object) -> object:
    """Bytes from an int or a text in Redis's units (`2gb`, `512mb`, `1000000`); anything else is left to
    the field's own validation (which then names the variable and what it expects)."""
    if not isinstance(value, str):
        return value
    text = value.strip().lower()
    for unit in sorted(REDIS_UNITS, key=len, reverse=True):
        number = text[: -len(unit)].strip()
        if text.endswith(unit) and number.isdigit():
            return int(number) * REDIS_UNITS[unit]
    return text


def default_redis_maxmemory() -> int:
    """Half of the machine's memory, in bytes (0 when the platform cannot tell: no limit)."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2)
    except (AttributeError, OSError, ValueError):
        return 0


class Settings(BaseSettings):
    """Configuration of the API, the workers and the embedded Redis."""

    # env_ignore_empty: `HINGE_API_KEYS=` (an empty line in docker/.env, say) means the default, not bad JSON
    model_config = SettingsConfigDict(env_prefix="HINGE_", case_sensitive=False, extra="ignore", env_ignore_empty=True)

    redis_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("REDIS_URL", "HINGE_REDIS_URL"),
        description="Redis to use (redis://host:port/db). Unset: `hinge serve` starts an embedded Redis.",
    )
    data_dir: Path = Field(
        default=Path("hinge-data"),
        description="Where the embedded Redis keeps its append-only file and workers cache data sets.",
    )
    queue_name: str = Field(default="hinge", description="Name of the RQ queue for training jobs.")
    # -- the object store (core/storage/objects.py): data sets' shards and large models
    object_store: Literal["local", "s3"] = Field(
        default="local",
        description="Where data sets (and models over model_object_bytes) are stored: `local`, a directory "
        "(object_store_dir; one machine, nothing to start), or `s3`, a server that speaks the S3 protocol "
        "(SeaweedFS, Ceph RGW, AWS S3, ...; the s3_* settings). Redis keeps only their manifests.",
    )
    object_store_dir: Path | None = Field(
        default=None, description="The local object store's directory (default: `<data_dir>/objects`)."
    )
    s3_endpoint_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("HINGE_S3_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
        description="The S3 server's URL (http://seaweedfs:8333); unset: AWS S3 in s3_region.",
    )
    s3_bucket: str = Field(default="hinge", min_length=3, max_length=63, description="The bucket (it must exist).")
    s3_region: str = Field(
        default="us-east-1",
        validation_alias=AliasChoices("HINGE_S3_REGION", "AWS_REGION", "AWS_DEFAULT_REGION"),
        description="The bucket's region (servers other than AWS take any).",
    )
    s3_prefix: str = Field(
        default="", description="A key prefix for everything Hinge stores in the bucket (to share a bucket)."
    )
    s3_access_key_id: str | None = Field(
        default=None,
        validation_alias=AliasChoices("HINGE_S3_ACCESS_KEY_ID", "AWS_ACCESS_KEY_ID"),
        description="The access key id (also read from AWS_ACCESS_KEY_ID); unset: AWS's usual credential chain.",
    )
    s3_secret_access_key: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("HINGE_S3_SECRET_ACCESS_KEY", "AWS_SECRET_ACCESS_KEY"),
        description="The secret key (also read from AWS_SECRET_ACCESS_KEY); never logged nor shown.",
    )
    shard_bytes: int = Field(
        default=16 * MiB,
        ge=4096,
        description="An uploaded data set is stored as shards of whole rows of about this many bytes of arrays "
        "(before their compact encoding); a worker fetches them once per machine. Shards are encoded and stored "
        "while the rest of the upload is parsed: 16 MiB rather than 64 took a 122 MB TF-IDF upload from 194 to "
        "229 MB/s (its one 64 MiB shard was encoded after the parse).",
    )
    model_object_bytes: int = Field(
        default=8 * MiB,
        ge=0,
        description="A model whose arrays take more than this many bytes keeps them in the object store, not in "
        "Redis (0: every model).",
    )
    store_retry_s: float = Field(
        default=600.0,
        ge=0,
        description="How long a job waits for an object store that does not answer (its progress says so) "
        "before it fails with `store_unavailable`; uploads answer 503 at once instead.",
    )
    store_gc_grace_s: float = Field(
        default=3600.0,
        gt=0,
        description="Objects that no data set or model owns (an upload cut short while the store was away) are "
        "deleted once they are this old.",
    )
    store_gc_interval_s: float = Field(default=600.0, gt=0, description="How often the API looks for such objects.")
    cache_dir: Path | None = Field(
        default=None,
        description="Where a machine's workers (and the API) keep their local copies of data sets, shared by "
        "every process of the machine (default: `<data_dir>/cache`).",
    )

    max_upload_bytes: int = Field(default=2 * GiB, ge=1, description="Largest upload body (compressed, as sent).")
    max_decompressed_bytes: int = Field(
        default=8 * GiB, ge=1, description="Largest text after gunzip (protects against gzip bombs)."
    )
    max_rows: int = Field(default=50_000_000, ge=1, description="Most rows (instances) a data set may have.")
    max_features: int = Field(
        default=100_000_000, ge=1, le=2**31 - 1, description="Largest feature count a data set may have."
    )
    max_nnz: int = Field(default=2_000_000_000, ge=1, description="Most stored (index, value) pairs in a data set.")
    max_json_body_bytes: int = Field(default=64 * MiB, ge=1024, description="Largest JSON request body.")
    max_predict_body_bytes: int = Field(
        default=16 * MiB,
        ge=1024,
        description="Largest predict request body (parsed rows take about 15 times their JSON size in memory).",
    )
    max_predict_instances: int = Field(default=100_000, ge=1, description="Most rows in one predict request.")
    max_seconds_ceiling: float = Field(
        default=7 * 24 * 3600.0, gt=0, description="Largest `max_seconds` a training request may ask for."
    )
    chunk_bytes: int = Field(
        default=64 * MiB, ge=1024, description="Arrays are stored in Redis in values of at most this many bytes."
    )
    job_timeout_s: int = Field(
        default=8 * 24 * 3600, ge=60, description="RQ's hard job timeout (solvers stop themselves at max_seconds)."
    )
    job_ttl_s: int = Field(
        default=0,
        ge=0,
        description="Seconds a finished job (record and trace) is kept after it ended; 0 keeps it until deleted. "
        "Models stay.",
    )
    ingest_processes: int = Field(default=1, ge=1, description="Parser processes serving uploads in the API.")
    gzip_inflater: Literal["isal", "zlib-ng", "zlib"] = Field(
        default="isal",
        description="What inflates gzip uploads: isal (ISA-L, the fastest), zlib-ng (needs the zlib-ng package) or "
        "zlib (Python's own).",
    )
    follow_upload_bytes: int = Field(
        default=16 * MiB,
        ge=0,
        description="Uploads whose Content-Length is at least this are parsed while they arrive (an ingest process "
        "follows the spooled file); smaller ones, and bodies without a length, are parsed once received.",
    )
    model_cache_size: int = Field(default=64, ge=1, description="Models kept in memory by the API for predict.")
    worker_cores: int | None = Field(
        default=None,
        ge=1,
        description=(
            "Cores one worker's job may use at most (threads of a solver, processes of its subtasks). Null: every core "
            "the worker process may run on, as the core budget allows."
        ),
    )
    core_budget: bool = Field(
        default=True,
        description=(
            "Jobs lease their cores from a budget of the machine's cores kept in Redis (`worker.runtime.core_budget`): a lone "
            "job uses every core it can, jobs side by side share them, and processes x threads never exceed the "
            "cores. Off: each job uses `worker_cores` (or every core) whatever else runs."
        ),
    )
    dask_scheduler: str | None = Field(
        default=None,
        description="Address of the Dask scheduler (`tcp://host:8786`) whose workers hold the rows of trainings split "
        "over nodes (`params.distributed`, ocas); unset: such jobs are refused.",
    )
    node_timeout: float = Field(
        default=60.0,
        gt=0,
        description="Seconds a node of a split training may take to answer a call beyond 10 times its slowest answer so "
        "far; past that it counts as lost (a hung machine or process), as a node that died does at once: the job "
        "regroups on the nodes left or ends with its best model (`params.distributed.on_node_lost`).",
    )
    job_memory: int = Field(
        default=0,
        ge=0,
        description=(
            "Memory a job may use on its worker's machine, in bytes or Redis's units (`8gb`); 0: the worker's memory "
            "limit (its cgroup's) or else the machine's memory. A data set that does not fit in 70% of what the worker "
            "process leaves of it trains out of core with ocas and cpa (read from the cache's files in passes); "
            "the other solvers fail such a job with `data_exceeds_memory`."
        ),
    )
    worker_cache_bytes: int = Field(
        default=4 * GiB,
        ge=0,
        description="Disk the machine's data set cache may use (cache_dir; least recently used data sets go first).",
    )
    api_keys: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "API keys as a JSON object {key: tenant}. Empty: no authentication, everything belongs to the "
            "tenant 'public'."
        ),
    )
    trace_flush_s: float = Field(
        default=0.2, gt=0, description="How often a running job pushes new trace points and progress to Redis."
    )
    cancel_poll_s: float = Field(
        default=0.1, gt=0, description="How often a running solver looks for a cancel request in Redis."
    )
    # -- line limit, per-tenant fairness, crash recovery (worker/runtime/heartbeat.py, core/lifecycle.py), Redis restarts
    max_line_bytes: int = Field(
        default=256 * MiB,
        ge=1024,
        description="Longest line of an uploaded text file (the parser never holds more of one line).",
    )
    max_queued_jobs_per_tenant: int = Field(
        default=1000, ge=0, description="Most queued jobs one tenant may have; more submissions get 429 (0: no limit)."
    )
    max_running_jobs_per_tenant: int = Field(
        default=0, ge=0, description="Most jobs of one tenant that run at once; the others wait queued (0: no limit)."
    )
    heartbeat_s: float = Field(
        default=2.0, gt=0, description="How often a worker's heartbeat process refreshes its liveness key."
    )
    worker_lease_s: float = Field(
        default=10.0, gt=0, description="Time-to-live of a worker's liveness key: a worker silent this long is dead."
    )
    reap_interval_s: float = Field(
        default=2.0,
        gt=0,
        description="How often the reaper (in the API and in every worker) looks for jobs of dead workers.",
    )
    shutdown_policy: Literal["checkpoint", "requeue"] = Field(
        default="checkpoint",
        description="On SIGTERM a worker stops its running solver and stores the best model (`checkpoint`, "
        "stop_reason `interrupted`) or puts the job back in the queue (`requeue`).",
    )
    preload_kernels: bool = Field(
        default=True,
        description="A worker loads every solver's compiled kernels before its first job and while idle (about 1.5 "
        "CPU-s and 100 MB once, on 2 cores); false loads a solver's kernels with its first job (which then starts up "
        "to a second later): for short-lived workers, or many on a small machine, that train few solvers.",
    )
    dequeue_poll_s: float = Field(
        default=1.0, gt=0, description="An idle worker re-reads the list of tenant queues at least this often."
    )
    redis_retry_s: float = Field(
        default=60.0, ge=0, description="How long workers and the API retry a Redis command while Redis restarts."
    )
    redis_appendfsync: Literal["always", "everysec"] = Field(
        default="always", description="fsync policy of the embedded Redis's append-only file (see README, Operations)."
    )
    # -- stopping in order, slow or lying clients, full memory and disks
    shutdown_grace_s: float = Field(
        default=6.0,
        gt=0,
        description="hinge serve: how long workers get to checkpoint their running jobs and exit when the service "
        "stops; a worker still running then is killed and its job goes back to the queue.",
    )
    redis_maxmemory: int = Field(
        default_factory=default_redis_maxmemory,
        ge=0,
        description="maxmemory of the embedded Redis in bytes, or in Redis's units (`2gb`, `512mb`; policy "
        "noeviction: a write past it is refused, never an old key evicted); default half the machine's memory; "
        "0: no limit.",
    )
    storage_reserve_fraction: float = Field(
        default=0.1,
        ge=0,
        lt=1,
        description="Share of Redis's maxmemory that an upload must leave free (else 507 storage_full). Models may "
        "use it (they are work already done) down to a fifth of it, which stays for job records, traces and status "
        "changes, so a full store keeps running jobs and serving predictions.",
    )
    batch_nice: int = Field(
        default=10,
        ge=0,
        le=19,
        description="Niceness added to the processes that do batch work (workers, the API's parser processes), so "
        "that requests are answered first when they compete for the cores; 0: same priority as the API.",
    )
    body_timeout_s: float = Field(
        default=20.0,
        gt=0,
        description="A request body must start arriving, and keep arriving, within this many seconds (408).",
    )
    body_min_rate: float = Field(
        default=500.0,
        ge=0,
        description="After the first body_timeout_s, a request body must keep an average of at least this many "
        "bytes per second (408): a client sending 1 byte/s cannot hold a connection for hours. 0: no rate.",
    )
    log_format: Literal["auto", "json", "text"] = Field(
        default="auto",
        description="Log lines as plain text (`text`), JSON objects (`json`), or `auto`: text when stderr is a "
        "terminal, JSON otherwise (a log collector reads JSON; a person reads text).",
    )

    @field_validator("redis_maxmemory", "job_memory", mode="before")
    @classmethod
    def _memory_units(cls, value: object) -> object:
        return parse_memory(value)

    @field_validator("gzip_inflater")
    @classmethod
    def _inflater_installed(cls, value: str) -> str:
        """An inflater whose package is missing is refused when the settings are read (the service does not
        start), not by a 500 on every gzip upload."""
        package = {"isal": "isal", "zlib-ng": "zlib_ng", "zlib": "zlib"}[value]
        if importlib.util.find_spec(package) is None:
            raise ValueError(f"HINGE_GZIP_INFLATER={value} needs the {value} package: pip install {value}")
        return value


def cache_root(settings: Settings) -> Path:
    """The machine's data set cache (``cache_dir``, or ``<data_dir>/cache``)."""
    return settings.cache_dir or settings.data_dir / "cache"


@functools.lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, read once from the environment (``get_settings.cache_clear()`` re-reads)."""
    return Settings()

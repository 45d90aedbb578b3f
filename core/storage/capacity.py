"""Room in Redis for data sets and models, checked before they are written.

Redis runs with a ``maxmemory`` and the ``noeviction`` policy (the embedded one: HINGE_REDIS_MAXMEMORY;
docker/compose.yaml: its command line), so a write past the limit is refused with an OOM error
instead of an old key being evicted or the machine swapping. Large writes (a data set, a model) are
checked first: one that would leave less than ``reserve_fraction`` of maxmemory free is refused
with ``StorageFull`` (answered 507 ``storage_full``) before a byte is written. The reserve keeps room
for the small writes that keep the service working while it is full: job records and their status
changes, traces, heartbeats. A large write that still hits the limit (two arriving at once) is
undone by the store and refused the same way. Against a Redis without maxmemory nothing is checked.
"""

from __future__ import annotations

import redis

OVERHEAD_FACTOR = 1.05
"""Redis's own bookkeeping on top of the raw bytes of large string values (the chunks)."""
OVERHEAD_BYTES = 64 * 1024
"""Fixed allowance per write: metadata, index entries, the append-only file's buffer."""


class StorageFull(Exception):
    """Storing this would fill Redis: nothing of it is stored."""

    def __init__(self, what: str, needed: int, available: int, maxmemory: int):
        self.what = what
        self.needed = int(needed)
        self.available = int(max(0, available))
        self.maxmemory = int(maxmemory)
        if maxmemory:
            message = (
                f"storage is full: the {what} needs about {self.needed} bytes but only {self.available} bytes of "
                f"Redis's maxmemory ({self.maxmemory} bytes) are free for data sets and models; delete data sets, "
                "models or jobs, or raise the limit (HINGE_REDIS_MAXMEMORY)"
            )
        else:
            message = f"storage is full: Redis refused to store the {what} (out of memory)"
        super().__init__(message)

    def details(self) -> dict:
        """The figures, for the error's ``details``."""
        return {"needed_bytes": self.needed, "available_bytes": self.available, "maxmemory": self.maxmemory}


def is_out_of_memory(exc: BaseException) -> bool:
    """Whether a Redis error is its refusal to grow past maxmemory (also when raised inside a script)."""
    if isinstance(exc, redis.exceptions.OutOfMemoryError):
        return True
    return isinstance(exc, redis.exceptions.ResponseError) and "OOM command not allowed" in str(exc)


def memory(client: redis.Redis) -> tuple[int, int]:
    """(used_memory, maxmemory) of the server in bytes; maxmemory 0 means no limit."""
    info = client.info("memory")
    return int(info.get("used_memory", 0)), int(info.get("maxmemory", 0))


def ensure_room(client: redis.Redis, nbytes: int, reserve_fraction: float, what: str) -> None:
    """Raise StorageFull unless ``nbytes`` more fit below maxmemory minus the reserve."""
    used, maxmemory = memory(client)
    if maxmemory <= 0:
        return
    needed = int(nbytes * OVERHEAD_FACTOR) + OVERHEAD_BYTES
    available = int(maxmemory * (1.0 - reserve_fraction)) - used
    if needed > available:
        raise StorageFull(what, needed, available, maxmemory)

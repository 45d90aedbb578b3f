"""When Redis compacts its append-only file: after the service's large writes, not during them.

An append-only file grows with every write; Redis compacts it by a rewrite in a forked child. In
Redis 6 (the embedded server's version) every write that arrives while the child runs is also kept
in a buffer in the server's memory until the child is done: an automatic rewrite that starts in the
middle of a 1 GB upload (at 64 MB, 128 MB, ... of file) holds hundreds of MB of that upload twice.
So `hinge serve` starts Redis with automatic rewrites off, and the record store asks for a rewrite
right after a data set or model is stored or deleted, when the file has doubled since the last
rewrite (Redis's own default rule: 100% growth, at least 64 MB). With an external Redis whose
automatic rewrites are on, the same rule has already fired and this does nothing.
"""

from __future__ import annotations

import redis

MIN_REWRITE_BYTES = 64 * 1024 * 1024


def compact_if_due(client: redis.Redis, min_bytes: int = MIN_REWRITE_BYTES) -> bool:
    """Start BGREWRITEAOF when the file is at least twice its size after the last rewrite; True if started."""
    try:
        info = client.info("persistence")
        if not info.get("aof_enabled") or info.get("aof_rewrite_in_progress") or info.get("aof_rewrite_scheduled"):
            return False
        current = int(info.get("aof_current_size", 0))
        base = int(info.get("aof_base_size", 0))
        if current < max(min_bytes, 2 * base):
            return False
        client.bgrewriteaof()
        return True
    except redis.exceptions.ResponseError:  # INFO or BGREWRITEAOF not allowed (managed Redis), or already running
        return False

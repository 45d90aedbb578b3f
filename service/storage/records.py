"""Immutable records made of JSON metadata plus binary arrays: data sets and models.

A record appears whole or not at all: its arrays are staged first (with a TTL), then one
MULTI/EXEC transaction makes the chunks permanent, writes the metadata and adds the id to the
tenant's index. Deletion removes all of it in one transaction too. Each record belongs to one
tenant; a look-up with another tenant finds nothing.
"""

from __future__ import annotations

import json
import time
from typing import Callable, Mapping

import numpy as np
import redis

from service.storage import aof, arrays, keys


class RecordStore:
    """Data sets or models: ``kind`` is the tenant-index name, ``key_of`` builds the metadata key."""

    def __init__(self, client: redis.Redis, kind: str, key_of: Callable[[str], str], chunk_bytes: int,
                 stats_key: str | None = None):
        self.client = client
        self.kind = kind
        self.key_of = key_of
        self.chunk_bytes = chunk_bytes
        self.stats_key = stats_key  # hash with `count` and `bytes` of stored records, kept in the same transactions

    def create(self, meta: dict, array_map: Mapping[str, np.ndarray]) -> dict:
        """Store arrays and metadata atomically; ``meta`` must hold ``id`` and ``tenant``. Returns meta."""
        owner = self.key_of(meta["id"])
        manifest: dict = {}
        try:
            manifest = arrays.write_staged(self.client, owner, array_map, self.chunk_bytes)
        except BaseException:
            self._remove(meta["id"], meta["tenant"], manifest)
            raise
        return self.commit(meta, manifest)

    def staging(self, record_id: str, *, background: bool = False) -> arrays.StagedArrays:
        """A writer that stages a new record's arrays piece by piece (then ``commit`` with its manifest)."""
        return arrays.StagedArrays(self.client, self.key_of(record_id), self.chunk_bytes, background=background)

    def commit(self, meta: dict, manifest: Mapping[str, dict]) -> dict:
        """Make staged arrays permanent and store the metadata, in one transaction; returns the record.

        On failure everything staged under the record is removed."""
        owner = self.key_of(meta["id"])
        try:
            record = dict(meta, arrays=dict(manifest))
            with self.client.pipeline(transaction=True) as pipe:
                arrays.persist_commands(pipe, owner, manifest)
                pipe.set(owner, json.dumps(record))
                pipe.zadd(keys.tenant_index(meta["tenant"], self.kind), {meta["id"]: time.time()})
                trailing = 2
                if self.stats_key is not None:
                    pipe.hincrby(self.stats_key, "count", 1)
                    pipe.hincrby(self.stats_key, "bytes", _manifest_bytes(manifest))
                    trailing = 4
                results = pipe.execute()
            if not all(results[: len(results) - trailing]):
                raise RuntimeError(f"staged chunks of {owner} expired before the commit")
        except BaseException:
            self._remove(meta["id"], meta["tenant"], manifest)
            raise
        aof.compact_if_due(self.client)
        return record

    def get(self, record_id: str, tenant: str) -> dict | None:
        """The metadata of a record of this tenant, or None (missing or another tenant's)."""
        raw = self.client.get(self.key_of(record_id))
        if raw is None:
            return None
        record = json.loads(raw)
        if record.get("tenant") != tenant:
            return None
        return record

    def exists(self, record_id: str) -> bool:
        """True while the record's metadata is present."""
        return bool(self.client.exists(self.key_of(record_id)))

    def list(self, tenant: str, offset: int = 0, limit: int = 100) -> tuple[list[dict], int]:
        """A page of the tenant's records, newest first, and the total count."""
        index = keys.tenant_index(tenant, self.kind)
        total = self.client.zcard(index)
        if offset >= total:  # also keeps Redis's 64-bit range arguments in range for huge offsets
            return [], total
        ids = self.client.zrevrange(index, offset, offset + limit - 1)
        if not ids:
            return [], total
        raws = self.client.mget([self.key_of(i.decode()) for i in ids])
        return [json.loads(raw) for raw in raws if raw is not None], total

    def load_arrays(self, record: dict, names=None) -> dict[str, np.ndarray]:
        """The record's binary arrays (all, or the names given)."""
        return arrays.read(self.client, self.key_of(record["id"]), record["arrays"], names)

    def iter_array_chunks(self, record: dict, name: str):
        """The raw bytes of one of the record's arrays, chunk by chunk (KeyError if a chunk is missing)."""
        return arrays.iter_chunks(self.client, self.key_of(record["id"]), name, record["arrays"][name])

    def delete(self, record_id: str, tenant: str) -> bool:
        """Remove a record of this tenant; False when there was none."""
        record = self.get(record_id, tenant)
        if record is None:
            return False
        self._remove(record_id, tenant, record.get("arrays", {}), counted=True)
        aof.compact_if_due(self.client)
        return True

    def _remove(self, record_id: str, tenant: str, manifest: Mapping[str, dict], counted: bool = False) -> None:
        owner = self.key_of(record_id)
        with self.client.pipeline(transaction=True) as pipe:
            if counted and self.stats_key is not None:
                # Only the DEL that actually removes the metadata may decrement (two deletes can race).
                pipe.eval(_UNCOUNT, 2, owner, self.stats_key, _manifest_bytes(manifest))
            pipe.delete(owner)
            pipe.zrem(keys.tenant_index(tenant, self.kind), record_id)
            names = arrays.chunk_keys(owner, manifest)
            if names:
                pipe.delete(*names)
            pipe.execute()


_UNCOUNT = """
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('HINCRBY', KEYS[2], 'count', -1)
  redis.call('HINCRBY', KEYS[2], 'bytes', -tonumber(ARGV[1]))
end
return 1
"""


def _manifest_bytes(manifest: Mapping[str, dict]) -> int:
    total = 0
    for entry in manifest.values():
        count = 1
        for extent in entry["shape"]:
            count *= int(extent)
        total += count * np.dtype(entry["dtype"]).itemsize
    return total


def dataset_store(client: redis.Redis, chunk_bytes: int) -> RecordStore:
    """The store of uploaded data sets (counted in the data-set stats: count and stored bytes)."""
    return RecordStore(client, "datasets", keys.dataset, chunk_bytes, stats_key=keys.dataset_stats())


def model_store(client: redis.Redis, chunk_bytes: int) -> RecordStore:
    """The store of trained models."""
    return RecordStore(client, "models", keys.model, chunk_bytes)

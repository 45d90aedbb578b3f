"""Immutable records made of JSON metadata plus binary arrays: data sets and models.

A record appears whole or not at all: its arrays are staged first (with a TTL), then one
MULTI/EXEC transaction makes the chunks permanent, writes the metadata and adds the id to the
tenant's index. A record that does not fit in Redis is refused before it is written, or undone
when Redis refuses a chunk (``StorageFull``, see ``capacity``). Deletion removes all of it in one transaction too. Each record belongs to one
tenant; a look-up with another tenant finds nothing. The metadata is read and written as a typed
record (``core.storage.documents``: ``DatasetRecord``, ``ModelRecord``), one conversion each way.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Generic, TypeVar

import numpy as np
import redis

from core.storage import aof, arrays, capacity, keys
from core.storage.connection import text
from core.storage.documents import DatasetRecord, ModelRecord

R = TypeVar("R", DatasetRecord, ModelRecord)


class RecordStore(Generic[R]):
    """Data sets or models: ``kind`` is the tenant-index name, ``key_of`` builds the metadata key,
    ``record_type`` reads the metadata."""

    def __init__(
        self,
        client: redis.Redis,
        kind: str,
        key_of: Callable[[str], str],
        record_type: type[R],
        chunk_bytes: int,
        stats_key: str | None = None,
        reserve_fraction: float = 0.0,
    ):
        self.client = client
        self.kind = kind
        self.key_of = key_of
        self.record_type: type[R] = record_type
        self.chunk_bytes = chunk_bytes
        self.stats_key = stats_key  # hash with `count` and `bytes` of stored records, kept in the same transactions
        self.reserve_fraction = reserve_fraction  # share of Redis's maxmemory a create must leave free

    def create(self, meta: R, array_map: Mapping[str, np.ndarray]) -> R:
        """Store arrays and metadata atomically; returns the record as stored (with its arrays' manifest).

        Raises ``StorageFull`` (and stores nothing) when Redis has no room for it (core/storage/capacity.py).
        """
        return self.commit(meta, self.stage(meta.id, meta.tenant, array_map))

    def stage(self, record_id: str, tenant: str, array_map: Mapping[str, np.ndarray]) -> dict:
        """Write a new record's arrays with the staging time-to-live and return their manifest: ``commit`` makes
        them last, ``discard_staged`` removes them (else they expire). Raises ``StorageFull`` as ``create`` does,
        leaving nothing."""
        manifest: dict = {}
        nbytes = sum(int(np.asarray(a).nbytes) for a in array_map.values())
        capacity.ensure_room(self.client, nbytes, self.reserve_fraction, self._what(record_id))
        try:
            manifest = arrays.write_staged(self.client, self.key_of(record_id), array_map, self.chunk_bytes)
        except BaseException as exc:
            self._remove(record_id, tenant, manifest or _names_only(array_map, self.chunk_bytes))
            self._raise_if_full(exc, record_id, nbytes)
            raise
        return manifest

    def discard_staged(self, record_id: str, manifest: Mapping[str, dict]) -> None:
        """Remove arrays that ``stage`` wrote and no ``commit`` made permanent."""
        arrays.discard(self.client, self.key_of(record_id), manifest)

    def staging(self, record_id: str, *, background: bool = False) -> arrays.StagedArrays:
        """A writer that stages a new record's arrays piece by piece (then ``commit`` with its manifest).

        Each chunk is checked for room first (``StorageFull``, as ``create``)."""
        what = self._what(record_id)
        return arrays.StagedArrays(
            self.client,
            self.key_of(record_id),
            self.chunk_bytes,
            background=background,
            before_chunk=lambda nbytes: capacity.ensure_room(self.client, nbytes, self.reserve_fraction, what),
        )

    def commit(self, meta: R, manifest: Mapping[str, dict]) -> R:
        """Make staged arrays permanent and store the metadata, in one transaction; returns the record.

        On failure everything staged under the record is removed."""
        owner = self.key_of(meta.id)
        try:
            record = replace(meta, arrays=dict(manifest))
            with self.client.pipeline(transaction=True) as pipe:
                arrays.persist_commands(pipe, owner, manifest)
                pipe.set(owner, json.dumps(record.to_document()))
                pipe.zadd(keys.tenant_index(meta.tenant, self.kind), {meta.id: time.time()})
                trailing = 2
                if self.stats_key is not None:
                    pipe.hincrby(self.stats_key, "count", 1)
                    pipe.hincrby(self.stats_key, "bytes", _manifest_bytes(manifest))
                    trailing = 4
                results = pipe.execute()
            if not all(results[: len(results) - trailing]):
                raise RuntimeError(f"staged chunks of {owner} expired before the commit")
        except BaseException as exc:
            self._remove(meta.id, meta.tenant, manifest)
            self._raise_if_full(exc, meta.id, _manifest_bytes(manifest))
            raise
        aof.compact_if_due(self.client)
        return record

    def _what(self, record_id: str) -> str:
        return f"{self.kind[:-1].replace('dataset', 'data set')} {record_id}"

    def _raise_if_full(self, exc: BaseException, record_id: str, nbytes: int) -> None:
        """Redis refused a write for want of memory: say so as ``StorageFull`` (the caller removed what was written)."""
        if capacity.is_out_of_memory(exc):
            used, maxmemory = capacity.memory(self.client)
            raise capacity.StorageFull(
                self._what(record_id), nbytes, int(maxmemory * (1 - self.reserve_fraction)) - used, maxmemory
            ) from exc

    def get(self, record_id: str, tenant: str) -> R | None:
        """The record of this tenant, or None (missing or another tenant's)."""
        raw = self.client.get(self.key_of(record_id))
        if raw is None:
            return None
        record = self.record_type.from_document(json.loads(raw))
        if record.tenant != tenant:
            return None
        return record

    def exists(self, record_id: str) -> bool:
        """True while the record's metadata is present."""
        return bool(self.client.exists(self.key_of(record_id)))

    def list(self, tenant: str, offset: int = 0, limit: int = 100) -> tuple[list[R], int]:
        """A page of the tenant's records, newest first, and the total count."""
        index = keys.tenant_index(tenant, self.kind)
        total = self.client.zcard(index)
        if offset >= total:  # also keeps Redis's 64-bit range arguments in range for huge offsets
            return [], total
        ids = self.client.zrevrange(index, offset, offset + limit - 1)
        if not ids:
            return [], total
        raws = self.client.mget([self.key_of(text(i)) for i in ids])
        return [self.record_type.from_document(json.loads(raw)) for raw in raws if raw is not None], total

    def load_arrays(self, record: R, names=None) -> dict[str, np.ndarray]:
        """The record's binary arrays (all, or the names given)."""
        return arrays.read(self.client, self.key_of(record.id), record.arrays, names)

    def iter_array_chunks(self, record: R, name: str):
        """The raw bytes of one of the record's arrays, chunk by chunk (KeyError if a chunk is missing)."""
        return arrays.iter_chunks(self.client, self.key_of(record.id), name, record.arrays[name])

    def delete(self, record_id: str, tenant: str) -> bool:
        """Remove a record of this tenant; False when there was none."""
        record = self.get(record_id, tenant)
        if record is None:
            return False
        self._remove(record_id, tenant, record.arrays, counted=True)
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


def _names_only(array_map: Mapping[str, np.ndarray], chunk_bytes: int) -> dict:
    """The manifest a write of these arrays makes (chunk counts only), to remove its chunks after a failure."""
    return {name: {"chunks": max(1, -(-int(np.asarray(a).nbytes) // chunk_bytes))} for name, a in array_map.items()}


def _manifest_bytes(manifest: Mapping[str, dict]) -> int:
    """Bytes the arrays take in Redis (an array of one repeated element takes none, an encoded one its
    ``stored_bytes``)."""
    total = 0
    for entry in manifest.values():
        if entry.get("fill") is not None:
            continue
        if entry.get("stored_bytes") is not None:
            total += int(entry["stored_bytes"])
            continue
        count = 1
        for extent in entry["shape"]:
            count *= int(extent)
        total += count * np.dtype(entry["dtype"]).itemsize
    return total


def dataset_store(client: redis.Redis, chunk_bytes: int, reserve_fraction: float = 0.0) -> RecordStore[DatasetRecord]:
    """The store of uploaded data sets (counted in the data-set stats: count and stored bytes)."""
    return RecordStore(
        client,
        "datasets",
        keys.dataset,
        DatasetRecord,
        chunk_bytes,
        stats_key=keys.dataset_stats(),
        reserve_fraction=reserve_fraction,
    )


def model_store(client: redis.Redis, chunk_bytes: int, reserve_fraction: float = 0.0) -> RecordStore[ModelRecord]:
    """The store of trained and imported models."""
    return RecordStore(client, "models", keys.model, ModelRecord, chunk_bytes, reserve_fraction=reserve_fraction)

"""Immutable records made of JSON metadata plus binary arrays: data sets and models.

Where the arrays are: a data set uploaded now is a list of shards in the object store
(``core.storage.shards``; the record holds the shard list); a model's arrays are in Redis, or in the
object store when they take more than ``model_object_bytes`` (the manifest entry names the object);
data sets stored before the object store existed keep their arrays in Redis chunks and load as before
(``hinge store migrate`` moves them).

A record appears whole or not at all: its arrays are staged first (Redis chunks with a TTL, or
objects that nothing owns yet), then one MULTI/EXEC transaction makes the chunks permanent, writes the
metadata and adds the id to the tenant's index. Objects of a record that never committed are deleted by
whoever wrote them, or collected later (``core.storage.garbage``). A record that does not fit in Redis is refused before it is written, or undone
when Redis refuses a chunk (``StorageFull``, see ``capacity``). Deletion removes all of it in one transaction too. Each record belongs to one
tenant; a look-up with another tenant finds nothing. The metadata is read and written as a typed
record (``core.storage.documents``: ``DatasetRecord``, ``ModelRecord``), one conversion each way.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, Generic, TypeVar

import numpy as np
import redis

from core.config import Settings, model_reserve_fraction
from core.storage import aof, arrays, capacity, keys, shards
from core.storage.connection import text
from core.storage.documents import DatasetRecord, ModelRecord
from core.storage.objects import ObjectStore, StoreError, object_store

log = logging.getLogger("hinge.storage")

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
        objects: ObjectStore | None = None,
        objects_of: Callable[[str], str] | None = None,
        object_min_bytes: int | None = None,
    ):
        self.client = client
        self.kind = kind
        self.key_of = key_of
        self.record_type: type[R] = record_type
        self.chunk_bytes = chunk_bytes
        self.stats_key = stats_key  # hash with `count` and `bytes` of stored records, kept in the same transactions
        self.reserve_fraction = reserve_fraction  # share of Redis's maxmemory a create must leave free
        self.objects = objects  # the object store (data sets' shards, large models' arrays)
        self.objects_of = objects_of  # a record's key prefix in the object store
        self.object_min_bytes = object_min_bytes  # arrays of a record larger than this go to the object store

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
        if self.objects is not None and self.object_min_bytes is not None and nbytes > self.object_min_bytes:
            return self._stage_objects(record_id, array_map)
        capacity.ensure_room(self.client, nbytes, self.reserve_fraction, self._what(record_id))
        try:
            manifest = arrays.write_staged(self.client, self.key_of(record_id), array_map, self.chunk_bytes)
        except BaseException as exc:
            self._remove(record_id, tenant, manifest or _names_only(array_map, self.chunk_bytes))
            self._raise_if_full(exc, record_id, nbytes)
            raise
        return manifest

    def _stage_objects(self, record_id: str, array_map: Mapping[str, np.ndarray]) -> dict:
        """Write each array as one object (encoded as in Redis: see ``core.storage.arrays``) and return the
        manifest, whose entries name their object and its SHA-256."""
        assert self.objects is not None and self.objects_of is not None
        manifest: dict = {}
        try:
            for name, array in array_map.items():
                flat = arrays.little_endian(array)
                encoded = arrays.nonzero_encoded(flat)
                stored = flat.view(np.uint8) if encoded is None else encoded
                digest = hashlib.sha256(stored.data).hexdigest()
                key = self.objects_of(record_id) + f"{name}-{digest}.array"
                self.objects.put(key, stored.data)
                entry: dict[str, Any] = {"dtype": flat.dtype.str, "shape": list(np.shape(array)), "object": key}
                entry.update(sha256=digest, stored_bytes=int(stored.nbytes))
                if encoded is not None:
                    entry["encoding"] = arrays.NONZERO
                manifest[name] = entry
        except BaseException:
            self.discard_staged(record_id, manifest)
            raise
        return manifest

    def discard_staged(self, record_id: str, manifest: Mapping[str, dict]) -> None:
        """Remove arrays that ``stage`` wrote and no ``commit`` made permanent."""
        arrays.discard(self.client, self.key_of(record_id), in_redis(manifest))
        self._delete_objects([entry["object"] for entry in manifest.values() if "object" in entry])

    def shard_writer(self, record_id: str, shard_bytes: int) -> shards.ShardWriter:
        """A writer that stores a new data set's rows as shards in the object store (then ``commit`` the record
        with its shard list)."""
        if self.objects is None:
            raise RuntimeError(f"the {self.kind} store has no object store")
        return shards.ShardWriter(self.objects, record_id, shard_bytes)

    def _delete_objects(self, names: list[str]) -> None:
        """Delete objects, best effort: what stays (the store is away) is collected later."""
        if not names or self.objects is None:
            return
        try:
            self.objects.delete(names)
        except StoreError as exc:
            log.warning("%d object(s) left for the garbage collection: %s", len(names), exc)

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
        record = replace(meta, arrays=dict(manifest))
        redis_entries = in_redis(manifest)
        document = json.dumps(record.to_document())
        needed = manifest_bytes(redis_entries) + len(document)
        try:
            if (
                not redis_entries
            ):  # arrays in the object store: only the record needs room (``stage`` checked the others)
                self.ensure_room(record.id, len(document))
            with self.client.pipeline(transaction=True) as pipe:
                arrays.persist_commands(pipe, owner, redis_entries)
                pipe.set(owner, document)
                pipe.zadd(keys.tenant_index(meta.tenant, self.kind), {meta.id: time.time()})
                trailing = 2
                if self.stats_key is not None:
                    pipe.hincrby(self.stats_key, "count", 1)
                    pipe.hincrby(self.stats_key, "bytes", manifest_bytes(redis_entries))
                    pipe.hincrby(self.stats_key, "object_bytes", object_bytes(record))
                    trailing = 5
                results = pipe.execute()
            if not all(results[: len(results) - trailing]):
                raise RuntimeError(f"staged chunks of {owner} expired before the commit")
        except BaseException as exc:
            self._remove(meta.id, meta.tenant, manifest)
            self._raise_if_full(exc, meta.id, needed)
            raise
        aof.compact_if_due(self.client)
        return record

    def ensure_room(self, record_id: str, nbytes: int) -> None:
        """Raise ``StorageFull`` unless Redis has room for ``nbytes`` more of this record, its reserve kept."""
        capacity.ensure_room(self.client, nbytes, self.reserve_fraction, self._what(record_id))

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
        """The record's binary arrays (all, or the names given), in memory, wherever they are stored."""
        if isinstance(record, DatasetRecord) and record.shards is not None:
            return shards.assemble(self.require_objects(), record.arrays, shards.shard_entries(record.shards), names)
        out = arrays.read(self.client, self.key_of(record.id), in_redis(record.arrays), names)
        for name, entry in record.arrays.items():
            if "object" in entry and (names is None or name in names):
                out[name] = arrays.decoded_object(self.require_objects().get(entry["object"]), entry)
        return out

    def require_objects(self) -> ObjectStore:
        """The object store (RuntimeError when this store has none)."""
        if self.objects is None:
            raise RuntimeError(f"the {self.kind} store has no object store, and a record needs it")
        return self.objects

    def iter_array_chunks(self, record: R, name: str):
        """The raw bytes of one of the record's arrays in Redis, chunk by chunk (KeyError if a chunk is missing)."""
        return arrays.iter_chunks(self.client, self.key_of(record.id), name, record.arrays[name])

    def delete(self, record_id: str, tenant: str) -> bool:
        """Remove a record of this tenant; False when there was none."""
        record = self.get(record_id, tenant)
        if record is None:
            return False
        self._remove(record_id, tenant, record.arrays, counted=True, released_bytes=object_bytes(record))
        self._delete_objects(object_keys(record))
        aof.compact_if_due(self.client)
        return True

    def _remove(
        self, record_id: str, tenant: str, manifest: Mapping[str, dict], counted: bool = False, released_bytes: int = 0
    ) -> None:
        owner = self.key_of(record_id)
        redis_entries = in_redis(manifest)
        with self.client.pipeline(transaction=True) as pipe:
            if counted and self.stats_key is not None:
                # Only the DEL that actually removes the metadata may decrement (two deletes can race).
                pipe.eval(_UNCOUNT, 2, owner, self.stats_key, -manifest_bytes(redis_entries), -released_bytes)
            pipe.delete(owner)
            pipe.zrem(keys.tenant_index(tenant, self.kind), record_id)
            names = arrays.chunk_keys(owner, redis_entries)
            if names:
                pipe.delete(*names)
            pipe.execute()


_UNCOUNT = """
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('HINCRBY', KEYS[2], 'count', -1)
  redis.call('HINCRBY', KEYS[2], 'bytes', ARGV[1])
  redis.call('HINCRBY', KEYS[2], 'object_bytes', ARGV[2])
end
return 1
"""


def _names_only(array_map: Mapping[str, np.ndarray], chunk_bytes: int) -> dict:
    """The manifest a write of these arrays makes (chunk counts only), to remove its chunks after a failure."""
    return {name: {"chunks": max(1, -(-int(np.asarray(a).nbytes) // chunk_bytes))} for name, a in array_map.items()}


def in_redis(manifest: Mapping[str, dict]) -> dict[str, dict]:
    """The entries of a manifest whose arrays are Redis chunks (not objects, not a data set's shards)."""
    return {name: dict(entry) for name, entry in manifest.items() if "chunks" in entry and "object" not in entry}


def object_keys(record: DatasetRecord | ModelRecord) -> list[str]:
    """Every object a record owns."""
    if isinstance(record, DatasetRecord) and record.shards is not None:
        return sorted({shard["key"] for shard in record.shards})
    return [entry["object"] for entry in record.arrays.values() if "object" in entry]


def object_bytes(record: DatasetRecord | ModelRecord) -> int:
    """Bytes a record takes in the object store."""
    if isinstance(record, DatasetRecord) and record.shards is not None:
        return sum(int(shard["bytes"]) for shard in record.shards)
    return sum(int(entry["stored_bytes"]) for entry in record.arrays.values() if "object" in entry)


def manifest_bytes(manifest: Mapping[str, dict]) -> int:
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


def dataset_store(client: redis.Redis, settings: Settings) -> RecordStore[DatasetRecord]:
    """The store of uploaded data sets (counted in the data-set stats), with the settings' object store."""
    return datasets_in(client, object_store(settings), settings.chunk_bytes, settings.storage_reserve_fraction)


def datasets_in(
    client: redis.Redis, objects: ObjectStore | None, chunk_bytes: int = 64 << 20, reserve_fraction: float = 0.0
) -> RecordStore[DatasetRecord]:
    """The data set store on this Redis and object store (``chunk_bytes`` and ``reserve_fraction``: for the
    arrays of data sets stored in Redis before the object store)."""
    return RecordStore(
        client,
        "datasets",
        keys.dataset,
        DatasetRecord,
        chunk_bytes,
        stats_key=keys.dataset_stats(),
        reserve_fraction=reserve_fraction,
        objects=objects,
        objects_of=keys.dataset_objects,
    )


def model_store(client: redis.Redis, settings: Settings) -> RecordStore[ModelRecord]:
    """The store of trained and imported models (arrays over ``model_object_bytes`` in the object store)."""
    return models_in(
        client,
        object_store(settings),
        settings.chunk_bytes,
        model_reserve_fraction(settings),
        object_min_bytes=settings.model_object_bytes,
    )


def models_in(
    client: redis.Redis,
    objects: ObjectStore | None,
    chunk_bytes: int = 64 << 20,
    reserve_fraction: float = 0.0,
    object_min_bytes: int | None = None,
) -> RecordStore[ModelRecord]:
    """The model store on this Redis and object store (arrays over ``object_min_bytes`` go to the object store;
    None: every model in Redis)."""
    return RecordStore(
        client,
        "models",
        keys.model,
        ModelRecord,
        chunk_bytes,
        reserve_fraction=reserve_fraction,
        objects=objects,
        objects_of=keys.model_objects,
        object_min_bytes=object_min_bytes,
    )

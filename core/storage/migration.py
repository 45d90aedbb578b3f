"""Moving data sets stored in Redis (before the object store) into the object store: ``hinge store migrate``.

Such a data set keeps its arrays as Redis chunks; it still loads as it is (``core.storage.records``), but it
holds Redis's memory. Migrating one writes its rows as shards (``core.storage.shards``, as an upload does),
then replaces its record in one transaction that also deletes its chunks, only if the record did not change
meanwhile (WATCH): a data set deleted during its migration stays deleted, and its new shards are removed.
Ids, names and everything else about the data set stay the same; a job that runs meanwhile reads one copy or
the other, both whole.
"""

from __future__ import annotations

import json
from dataclasses import replace

import redis

from core.storage import arrays, keys
from core.storage.documents import DatasetRecord
from core.storage.records import RecordStore, in_redis, manifest_bytes, object_bytes
from core.storage.shards import ARRAY_NAMES, ShardWriter

PIECES_PER_SHARD = 8
"""Rows are handed to the shard writer in pieces of about an eighth of a shard (it cuts shards between pieces)."""


def legacy_datasets(client: redis.Redis) -> list[tuple[str, str]]:
    """(id, tenant) of every data set whose arrays are in Redis."""
    found = []
    for key in client.scan_iter(match=f"{keys.PREFIX}:dataset:ds_*", count=1000):
        name = key.decode()
        if ":array:" in name:
            continue
        raw = client.get(name)
        if raw is None:
            continue
        document = json.loads(raw)
        if document.get("shards") is None:
            found.append((document["id"], document["tenant"]))
    return found


def migrate_dataset(store: RecordStore[DatasetRecord], record: DatasetRecord, shard_bytes: int) -> bool:
    """Move one data set's arrays from Redis to the object store; False when it changed or went meanwhile."""
    unknown = set(record.arrays) - set(ARRAY_NAMES)
    if unknown:
        raise ValueError(f"data set {record.id} has arrays {sorted(unknown)} that a shard cannot hold")
    whole = store.load_arrays(record)
    writer = ShardWriter(store.require_objects(), record.id, shard_bytes)
    try:
        indptr = whole["indptr"]
        writer.append("indptr", indptr[:1])
        n_rows = int(indptr.size) - 1
        row_bytes = max(1.0, sum(int(a.nbytes) for a in whole.values()) / max(1, n_rows))
        step = max(1, int(shard_bytes / PIECES_PER_SHARD / row_bytes))
        for start in range(0, n_rows, step):
            stop = min(n_rows, start + step)
            first, last = int(indptr[start]), int(indptr[stop])
            writer.append("indptr", indptr[start + 1 : stop + 1])
            writer.append("indices", whole["indices"][first:last])
            writer.append("data", whole["data"][first:last])
            for name in ("y", "qid"):
                if name in whole:
                    writer.append(name, whole[name][start:stop])
        manifest, entries = writer.manifest()
        moved = replace(record, arrays=manifest, shards=[entry.to_document() for entry in entries])
        if not _swap(store, record, moved):
            writer.discard()
            return False
        return True
    except BaseException:
        writer.discard()
        raise
    finally:
        writer.close()


def _swap(store: RecordStore[DatasetRecord], old: DatasetRecord, new: DatasetRecord) -> bool:
    """Replace the record and delete its chunks in one transaction, if the record is still ``old``."""
    owner = store.key_of(old.id)
    chunks = arrays.chunk_keys(owner, in_redis(old.arrays))
    expected = json.dumps(old.to_document())
    with store.client.pipeline(transaction=True) as pipe:
        try:
            pipe.watch(owner)
            current = pipe.get(owner)
            if current is None or json.loads(current) != json.loads(expected):
                pipe.unwatch()
                return False
            pipe.multi()
            pipe.set(owner, json.dumps(new.to_document()))
            for start in range(0, len(chunks), 1000):
                pipe.delete(*chunks[start : start + 1000])
            if store.stats_key is not None:
                pipe.hincrby(store.stats_key, "bytes", -manifest_bytes(in_redis(old.arrays)))
                pipe.hincrby(store.stats_key, "object_bytes", object_bytes(new))
            pipe.execute()
        except redis.exceptions.WatchError:
            return False
    return True

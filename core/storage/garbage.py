"""Objects that no record owns are deleted once they are old enough.

An upload cut short while the object store was away cannot delete the shards it wrote; a model staged
ahead of a job that then died leaves its arrays; a deleted data set whose store did not answer keeps its
shards. Every object's key names its owner (``datasets/<id>/...``, ``models/<id>/...``), so the collection
lists the store and deletes each owner's objects that its record (in Redis) does not list, once the owner's
newest object is older than ``store_gc_grace_s`` (an upload or a model write under way writes newer ones).
The API runs it every ``store_gc_interval_s``, one API process at a time (``keys.store_gc_turn``).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import defaultdict

import redis

from core.config import Settings
from core.storage import keys
from core.storage.documents import DatasetRecord, ModelRecord
from core.storage.objects import ObjectStore, StoreError, object_store
from core.storage.records import object_keys

log = logging.getLogger("hinge.storage")


def _owned(client: redis.Redis, kind: str, owner_id: str) -> set[str] | None:
    """The object keys the owner's record lists; None when there is no record."""
    raw = client.get(keys.dataset(owner_id) if kind == "datasets" else keys.model(owner_id))
    if raw is None:
        return None
    record_type = DatasetRecord if kind == "datasets" else ModelRecord
    return set(object_keys(record_type.from_document(json.loads(raw))))


def collect_garbage(client: redis.Redis, objects: ObjectStore, grace_s: float, now: float | None = None) -> int:
    """Delete the objects no record owns whose owner wrote nothing for ``grace_s``; returns how many."""
    now = time.time() if now is None else now
    found: dict[tuple[str, str], list] = defaultdict(list)
    newest: dict[tuple[str, str], float] = defaultdict(float)
    for prefix in ("datasets/", "models/"):
        for info in objects.list(prefix):
            owner = keys.object_owner(info.key)
            if owner is None:
                continue
            found[owner].append(info.key)
            newest[owner] = max(newest[owner], info.modified)
    doomed: list[str] = []
    for owner, names in found.items():
        if now - newest[owner] < grace_s:
            continue
        owned = _owned(client, *owner)
        doomed.extend(name for name in names if owned is None or name not in owned)
    if doomed:
        objects.delete(doomed)
        log.info("deleted %d object(s) that no data set or model owns", len(doomed))
    return len(doomed)


def start_collector_thread(client: redis.Redis, settings: Settings) -> tuple[threading.Thread, threading.Event]:
    """Collect the object store's garbage every ``store_gc_interval_s`` in a daemon thread (one API process at a
    time); set the returned event to stop it."""
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(settings.store_gc_interval_s):
            try:
                if client.set(keys.store_gc_turn(), b"1", nx=True, ex=max(1, int(settings.store_gc_interval_s))):
                    collect_garbage(client, object_store(settings), settings.store_gc_grace_s)
            except (StoreError, redis.exceptions.RedisError) as exc:
                log.warning("the object store's garbage collection did not run: %s", exc)

    thread = threading.Thread(target=run, name="hinge-store-gc", daemon=True)
    thread.start()
    return thread, stop

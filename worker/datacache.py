"""A worker's local copy of data sets, by id: fetched from Redis once, then memory-mapped from disk.

Data sets never change once stored, so a copy is valid for as long as the data set exists in
Redis (checked on every use). Copies are written to a temporary directory and renamed into place,
so concurrent work horses never see half a copy. The least recently used copies are removed when
the cache grows beyond its byte budget.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from service.storage.records import RecordStore


class DatasetMissing(LookupError):
    """The data set was deleted (or never existed)."""


def load(store: RecordStore, dataset_id: str, tenant: str, cache_dir: Path, budget_bytes: int) -> tuple[dict, dict]:
    """The data set's record and arrays (memory-mapped, read-only), fetching them into the cache if needed."""
    record = store.get(dataset_id, tenant)
    if record is None:
        raise DatasetMissing(dataset_id)
    folder = cache_dir / "datasets" / dataset_id
    if not (folder / "complete").exists():
        _fetch(store, record, folder)
        _evict(cache_dir / "datasets", budget_bytes, keep=folder)
    os.utime(folder / "complete")
    # Copy-on-write maps: writable arrays (the type the kernels were warmed with) that never touch the file.
    arrays = {name: np.load(folder / f"{name}.npy", mmap_mode="c") for name in record["arrays"]}
    return record, arrays


def _fetch(store: RecordStore, record: dict, folder: Path) -> None:
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{record['id']}-"))
    try:
        for name in record["arrays"]:
            array = store.load_arrays(record, names=(name,))[name]
            np.save(staging / f"{name}.npy", array)
            del array
        (staging / "complete").touch()
        try:
            os.rename(staging, folder)
        except OSError:  # another work horse finished first
            if not (folder / "complete").exists():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _evict(root: Path, budget_bytes: int, keep: Path) -> None:
    entries = []
    for folder in root.iterdir():
        marker = folder / "complete"
        if folder.name.startswith(".") or not marker.exists():
            continue
        size = sum(f.stat().st_size for f in folder.iterdir())
        entries.append((marker.stat().st_mtime, size, folder))
    total = sum(size for _, size, _ in entries)
    for _, size, folder in sorted(entries):
        if total <= budget_bytes:
            break
        if folder == keep:
            continue
        shutil.rmtree(folder, ignore_errors=True)
        total -= size


def touch_time() -> float:
    """Current time (exposed for tests)."""
    return time.time()

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
            _fetch_array(store, record, name, staging / f"{name}.npy")
        (staging / "complete").touch()
        try:
            os.rename(staging, folder)
        except OSError:  # another work horse finished first
            if not (folder / "complete").exists():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _fetch_array(store: RecordStore, record: dict, name: str, path: Path) -> None:
    """Write one stored array to an .npy file chunk by chunk (never the whole array in memory)."""
    entry = record["arrays"][name]
    dtype = np.dtype(entry["dtype"])
    shape = tuple(int(n) for n in entry["shape"])
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    written = 0
    with open(path, "wb") as out:
        np.lib.format.write_array_header_2_0(out, {"descr": np.lib.format.dtype_to_descr(dtype),
                                                   "fortran_order": False, "shape": shape})
        for piece in store.iter_array_chunks(record, name):
            out.write(piece)
            written += len(piece)
    if written != expected:
        raise KeyError(f"array {name!r} of data set {record['id']} has {written} bytes, expected {expected}")


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

"""A worker's local copy of data sets, by id: fetched from Redis once, then memory-mapped from disk.

Data sets never change once stored, so a copy is valid for as long as the data set exists in
Redis (checked on every use). Copies are written to a temporary directory and renamed into place,
so concurrent work horses never see half a copy. Before a copy is fetched, the least recently used
copies are removed until it fits in the byte budget (HINGE_WORKER_CACHE_BYTES; the copy in use is
always kept, even alone over the budget). When the disk itself has no room (checked first, and
ENOSPC while writing), every other copy is removed and the fetch tried once more; if it still does
not fit, ``CacheDiskFull`` says how much was needed and how much was free, the job fails with error
code ``worker_disk_full``, nothing half-written stays, and the worker goes on with other jobs.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from core.storage.documents import DatasetRecord
from core.storage.records import RecordStore

DISK_MARGIN_BYTES = 16 * 1024 * 1024
"""Free disk the cache leaves for everything else on it (logs, the spool of uploads)."""


class DatasetMissing(LookupError):
    """The data set was deleted (or never existed)."""


class CacheDiskFull(OSError):
    """The worker's disk has no room for the data set's local copy (after removing every other copy)."""

    def __init__(self, dataset_id: str, needed: int, free: int, folder: Path):
        super().__init__(
            f"the worker's disk is full: data set {dataset_id} needs {needed} bytes in its cache ({folder}) but only "
            f"{free} bytes are free after removing every other cached copy; free disk space on the worker or run "
            "the job on another worker"
        )
        self.needed = needed
        self.free = free


def load(
    store: RecordStore[DatasetRecord], dataset_id: str, tenant: str, cache_dir: Path, budget_bytes: int
) -> tuple[DatasetRecord, dict]:
    """The data set's record and arrays (memory-mapped, read-only), fetching them into the cache if needed."""
    record = store.get(dataset_id, tenant)
    if record is None:
        raise DatasetMissing(dataset_id)
    root = cache_dir / "datasets"
    folder = root / dataset_id
    for attempt in range(2):
        if not (folder / "complete").exists():
            _make_room_and_fetch(store, record, root, folder, budget_bytes)
        try:
            os.utime(folder / "complete")
            # Copy-on-write maps: writable arrays (the type the kernels were warmed with) that never touch the file.
            arrays = {name: np.load(folder / f"{name}.npy", mmap_mode="c") for name in record.arrays}
            return record, arrays
        except FileNotFoundError:  # another worker sharing this cache evicted the copy just now
            if attempt:
                raise
    raise AssertionError("unreachable")


def copy_bytes(record: DatasetRecord) -> int:
    """Bytes the local copy of a data set takes (its arrays as .npy files)."""
    total = 0
    for entry in record.arrays.values():
        count = 1
        for extent in entry["shape"]:
            count *= int(extent)
        total += count * np.dtype(entry["dtype"]).itemsize + 128  # .npy header
    return total


def _make_room_and_fetch(
    store: RecordStore[DatasetRecord], record: DatasetRecord, root: Path, folder: Path, budget_bytes: int
) -> None:
    root.mkdir(parents=True, exist_ok=True)
    needed = copy_bytes(record)
    _evict(root, max(0, budget_bytes - needed), keep=folder)  # least recently used first, within the budget
    if _free_bytes(root) < needed + DISK_MARGIN_BYTES:
        _evict(root, 0, keep=folder)
        free = _free_bytes(root)
        if free < needed + DISK_MARGIN_BYTES:
            raise CacheDiskFull(record.id, needed, max(0, free - DISK_MARGIN_BYTES), root)
    try:
        _fetch(store, record, folder)
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        _evict(root, 0, keep=folder)  # something else filled the disk meanwhile: make all the room there is
        try:
            _fetch(store, record, folder)
        except OSError as again:
            if again.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            raise CacheDiskFull(record.id, needed, max(0, _free_bytes(root) - DISK_MARGIN_BYTES), root) from None


def _free_bytes(path: Path) -> int:
    return shutil.disk_usage(path).free


def _fetch(store: RecordStore[DatasetRecord], record: DatasetRecord, folder: Path) -> None:
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{record.id}-"))
    try:
        for name in record.arrays:
            _fetch_array(store, record, name, staging / f"{name}.npy")
        (staging / "complete").touch()
        try:
            os.rename(staging, folder)
        except OSError:  # another work horse finished first
            if not (folder / "complete").exists():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _fetch_array(store: RecordStore[DatasetRecord], record: DatasetRecord, name: str, path: Path) -> None:
    """Write one stored array to an .npy file chunk by chunk (never the whole array in memory)."""
    entry = record.arrays[name]
    dtype = np.dtype(entry["dtype"])
    shape = tuple(int(n) for n in entry["shape"])
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    written = 0
    with open(path, "wb") as out:
        np.lib.format.write_array_header_2_0(
            out, {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": shape}
        )
        for piece in store.iter_array_chunks(record, name):
            out.write(piece)
            written += len(piece)
    if written != expected:
        raise KeyError(f"array {name!r} of data set {record.id} has {written} bytes, expected {expected}")


def _evict(root: Path, budget_bytes: int, keep: Path) -> None:
    entries = []
    for folder in root.iterdir():
        marker = folder / "complete"
        if folder.name.startswith(".") or not marker.exists():
            continue
        try:
            size = sum(f.stat().st_size for f in folder.iterdir())
            entries.append((marker.stat().st_mtime, size, folder))
        except FileNotFoundError:  # evicted by another worker sharing the cache
            continue
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

"""A machine's local copies of data sets, by id: fetched once, checked, then memory-mapped from disk.

Every process of a machine that trains or evaluates (the workers, the API) reads data sets through this
cache, in one directory (``cache_dir``, by default ``<data_dir>/cache``) that they share. A data set's copy is
a folder of ``.npy`` files, one per array (``indptr``, ``indices``, ``data``, ``y``, ``qid``), which the
solvers see as memory-mapped arrays without a copy; a job on a data set already here moves no data over
the network (it reads the record from Redis, a few hundred bytes).

- **Fetched once per machine.** A process takes the data set's lock (``flock`` on ``.locks/<id>``) before it
  looks at the copy: two workers asking for the same data set at once fetch it once; the second waits and
  uses the copy. A data set in the object store arrives shard by shard (``core.storage.shards``), several
  at a time, each checked against the SHA-256 the manifest gives, decoded straight into its place in the
  files; a data set stored in Redis (before the object store) arrives chunk by chunk. Copies are written
  to a temporary folder renamed into place, so nobody sees half a copy.
- **Checked on every use.** Each shard's part of each file has a CRC-32 (ISA-L's: 15 GB/s here), computed
  when it was written and kept in ``checksums.json``. Before a copy is used every part is checked; a part
  that changed (a disk that lost bits, a file someone wrote into) is fetched again, that shard alone.
- **Bounded.** Before a copy is fetched, the least recently used copies are removed until it fits in
  ``worker_cache_bytes`` (the copy being used is kept even alone over the budget; a copy another process is
  fetching or checking is skipped). When the disk itself has no room (checked first: the files are
  allocated whole before a byte is written, and ENOSPC while writing), every other copy is removed and the
  fetch tried once more; if it still does not fit, ``CacheDiskFull`` says how much was needed and how much
  was free, nothing half-written stays, and the caller goes on with other work.
- **Gone with its data set.** Deleting a data set removes the copy of the machine whose API deleted it at once
  (``forget``; a copy being fetched or checked right then is left to the sweep), and each idle worker removes, at
  most every ``SWEEP_S``, the copies whose data set no longer exists (``sweep``: one pipelined round trip for all
  of them), so that a deleted data set leaves no copy on any machine's disk. A job training on a copy keeps its
  memory maps (the files go with the last of them).
- **Patient with the store.** While the object store does not answer, a fetch is retried for up to
  ``patience_s`` (``on_wait`` is told once, so a job can say it waits); the store's other errors (refused,
  an object missing, a shard that does not match its checksum twice) are raised as they are.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from isal import isal_zlib

from core.storage import shards
from core.storage.documents import DatasetRecord
from core.storage.objects import StoreUnavailable, wait_until
from core.storage.records import RecordStore

SWEEP_S = 60.0
"""How often at most an idle worker looks for copies of deleted data sets (``sweep``)."""
DISK_MARGIN_BYTES = 16 * 1024 * 1024
"""Free disk the cache leaves for everything else on it (logs, the spool of uploads)."""
FETCH_THREADS = 3
"""Shards fetched at once (each up to shard_bytes in memory while it is checked and decoded)."""
CHECKSUMS = "checksums.json"
COMPLETE = "complete"

log = logging.getLogger("hinge.cache")


class DatasetMissing(LookupError):
    """The data set was deleted (or never existed)."""


class CacheDiskFull(OSError):
    """The machine's disk has no room for the data set's local copy (after removing every other copy)."""

    def __init__(self, dataset_id: str, needed: int, free: int, folder: Path):
        super().__init__(
            f"the worker's disk is full: data set {dataset_id} needs {needed} bytes in its cache ({folder}) but only "
            f"{free} bytes are free after removing every other cached copy; free disk space on the worker or run "
            "the job on another worker"
        )
        self.needed = needed
        self.free = free


def load(
    store: RecordStore[DatasetRecord],
    dataset_id: str,
    tenant: str,
    cache_dir: Path,
    budget_bytes: int,
    *,
    patience_s: float = 0.0,
    should_stop: Callable[[], bool] | None = None,
    on_wait: Callable[[StoreUnavailable], None] | None = None,
    report: dict | None = None,
) -> tuple[DatasetRecord, dict]:
    """The data set's record and arrays (memory-mapped, copy-on-write: writable arrays that never touch the
    files), fetching them into the cache if needed and checking them. ``report``, when given, is filled with
    ``seconds``, ``fetched_bytes`` (from the object store or Redis) and ``cached`` (nothing fetched)."""
    started = time.monotonic()
    fetched = [0]
    record = store.get(dataset_id, tenant)
    if record is None:
        raise DatasetMissing(dataset_id)
    root = cache_dir / "datasets"
    folder = root / dataset_id
    root.mkdir(parents=True, exist_ok=True)

    def fetch_and_check() -> None:
        with _locked(root, dataset_id):
            if not (folder / COMPLETE).exists():
                _make_room_and_fetch(store, record, root, folder, budget_bytes)
                fetched[0] += stored_bytes(record)
            fetched[0] += _repair(store, record, folder)
            os.utime(folder / COMPLETE)

    for attempt in range(2):
        wait_until(fetch_and_check, patience_s=patience_s, should_stop=should_stop, on_wait=on_wait)
        try:
            arrays = {name: np.load(folder / f"{name}.npy", mmap_mode="c") for name in record.arrays}
            if report is not None:
                report.update(
                    seconds=round(time.monotonic() - started, 3), fetched_bytes=fetched[0], cached=fetched[0] == 0
                )
            return record, arrays
        except FileNotFoundError:  # evicted by another process between the check and the maps
            if attempt:
                raise
    raise AssertionError("unreachable")


@contextlib.contextmanager
def _locked(root: Path, dataset_id: str, *, wait: bool = True) -> Iterator[bool]:
    """Hold the data set's lock (shared by every process of the machine); yields False when ``wait`` is off
    and another process holds it."""
    locks = root / ".locks"
    locks.mkdir(exist_ok=True)
    with open(locks / dataset_id, "a+b") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def stored_bytes(record: DatasetRecord) -> int:
    """Bytes a fetch of the whole data set moves: its shards, or (stored in Redis) its arrays' chunks."""
    if record.shards is not None:
        return sum(int(shard["bytes"]) for shard in record.shards)
    return sum(
        int(entry.get("stored_bytes", np.prod(entry["shape"], dtype=np.int64) * np.dtype(entry["dtype"]).itemsize))
        for entry in record.arrays.values()
        if entry.get("fill") is None
    )


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
    staging = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{record.id}-"))
    try:
        if record.shards is not None:
            checksums = _fetch_shards(store, record, staging)
        else:
            checksums = {name: [_fetch_array(store, record, name, staging / f"{name}.npy")] for name in record.arrays}
        (staging / CHECKSUMS).write_text(json.dumps(checksums))
        (staging / COMPLETE).touch()
        try:
            os.rename(staging, folder)
        except OSError:
            if not (folder / COMPLETE).exists():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _allocated(path: Path, dtype: np.dtype, shape: tuple[int, ...]) -> np.memmap:
    """A new .npy file of this dtype and shape, its blocks allocated before it is mapped (a full disk is then
    ENOSPC here, not a SIGBUS at the first write through the map)."""
    header = {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": shape}
    with open(path, "wb") as out:
        np.lib.format.write_array_header_2_0(out, header)
        offset = out.tell()
    size = offset + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    handle = os.open(path, os.O_RDWR)
    try:
        if size > offset:
            os.posix_fallocate(handle, 0, size)
    finally:
        os.close(handle)
    return np.memmap(path, dtype=dtype, mode="r+", offset=offset, shape=shape)


def _crc(view: np.ndarray) -> int:
    return int(isal_zlib.crc32(np.ascontiguousarray(view).view(np.uint8)))


def _fetch_shards(store: RecordStore[DatasetRecord], record: DatasetRecord, folder: Path) -> dict[str, list[int]]:
    """Every shard into the .npy files, several at a time; returns the CRC-32 of each shard's part of each file."""
    entries = shards.shard_entries(record.shards)
    targets = {
        name: _allocated(folder / f"{name}.npy", np.dtype(entry["dtype"]), tuple(int(n) for n in entry["shape"]))
        for name, entry in record.arrays.items()
    }
    objects = store.require_objects()

    def one(entry: shards.ShardEntry) -> dict[str, int]:
        shards.place(shards.fetch(objects, entry), entry, targets)
        return {name: _crc(target[slice(*shards.region(name, entry))]) for name, target in targets.items()}

    with ThreadPoolExecutor(FETCH_THREADS) as pool:
        sums = list(pool.map(one, entries))
    for target in targets.values():
        target.flush()
    return {name: [part[name] for part in sums] for name in targets}


def _fetch_array(store: RecordStore[DatasetRecord], record: DatasetRecord, name: str, path: Path) -> int:
    """Write one array stored in Redis to an .npy file chunk by chunk (never the whole array in memory); returns
    the CRC-32 of its elements."""
    entry = record.arrays[name]
    dtype = np.dtype(entry["dtype"])
    shape = tuple(int(n) for n in entry["shape"])
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    written = 0
    crc = 0
    with open(path, "wb") as out:
        np.lib.format.write_array_header_2_0(
            out, {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": shape}
        )
        for piece in store.iter_array_chunks(record, name):
            out.write(piece)
            crc = isal_zlib.crc32(piece, crc)
            written += len(piece)
    if written != expected:
        raise KeyError(f"array {name!r} of data set {record.id} has {written} bytes, expected {expected}")
    return int(crc)


def _repair(store: RecordStore[DatasetRecord], record: DatasetRecord, folder: Path) -> int:
    """Check every part of the copy against its CRC-32 and fetch again what does not match (the caller holds the
    data set's lock); returns the bytes fetched."""
    try:
        sums = json.loads((folder / CHECKSUMS).read_text())
        maps = {name: np.load(folder / f"{name}.npy", mmap_mode="r") for name in record.arrays}
    except (OSError, ValueError):  # a copy without its checksums, or a file that does not parse: fetch it again
        log.warning("data set %s: its cached copy does not read: fetched again", record.id)
        shutil.rmtree(folder, ignore_errors=True)
        _fetch(store, record, folder)
        return stored_bytes(record)
    if record.shards is None:
        if any(_crc(maps[name]) != sums.get(name, [None])[0] for name in record.arrays):
            del maps
            log.warning("data set %s: its cached arrays did not match their checksum: fetched again", record.id)
            shutil.rmtree(folder, ignore_errors=True)
            _fetch(store, record, folder)
            return stored_bytes(record)
        return 0
    entries = shards.shard_entries(record.shards)
    bad = [
        index
        for index, entry in enumerate(entries)
        if any(_crc(maps[name][slice(*shards.region(name, entry))]) != sums[name][index] for name in record.arrays)
    ]
    del maps
    if not bad:
        return 0
    log.warning(
        "data set %s: %d cached shard(s) did not match their checksum (a disk or someone changed them): fetched again",
        record.id,
        len(bad),
    )
    targets = {
        name: np.load(folder / f"{name}.npy", mmap_mode="r+") for name in record.arrays
    }  # written in place: a process that maps the copy reads the repaired bytes
    objects = store.require_objects()
    for index in bad:
        entry = entries[index]
        shards.place(shards.fetch(objects, entry), entry, targets)
        for name, target in targets.items():
            sums[name][index] = _crc(target[slice(*shards.region(name, entry))])
    for target in targets.values():
        target.flush()
    (folder / CHECKSUMS).write_text(json.dumps(sums))
    return sum(entries[index].bytes for index in bad)


_copy_bytes: dict[str, int] = {}
"""Bytes of each complete copy this process has seen, by folder path (a complete copy never changes size: its files
are written whole before it is renamed into place, and a repair rewrites bytes in place), so that choosing what to
evict stats one marker per copy, not every file of every copy: a service that trained on thousands of small data
sets paid that on every fetch."""


def _evict(root: Path, budget_bytes: int, keep: Path) -> None:
    entries = []
    with os.scandir(root) as found:
        for entry in found:
            if entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
                continue
            try:
                used = os.stat(os.path.join(entry.path, COMPLETE)).st_mtime
                size = _copy_bytes.get(entry.path)
                if size is None:
                    with os.scandir(entry.path) as files:
                        size = _copy_bytes[entry.path] = sum(f.stat().st_size for f in files)
            except FileNotFoundError:  # not complete yet, or evicted by another process sharing the cache
                continue
            entries.append((used, size, entry.path))
    prefix = os.path.join(str(root), "")
    seen = {path for _, _, path in entries}
    for gone in [path for path in _copy_bytes if path.startswith(prefix) and path not in seen]:
        del _copy_bytes[gone]
    total = sum(size for _, size, _ in entries)
    for _, size, path in sorted(entries):
        if total <= budget_bytes:
            break
        folder = Path(path)
        if folder == keep:
            continue
        with _locked(root, folder.name, wait=False) as mine:
            if not mine:  # another process fetches or checks it now
                continue
            shutil.rmtree(folder, ignore_errors=True)
            _copy_bytes.pop(path, None)
        total -= size


def forget(cache_dir: Path, dataset_id: str) -> bool:
    """Remove this machine's copy of a deleted data set and its lock file; True when a copy was removed. A copy
    another process fetches or checks right now is left (False) for ``sweep``."""
    root = cache_dir / "datasets"
    if not (root / dataset_id).exists():
        return False
    with _locked(root, dataset_id, wait=False) as mine:
        if not mine:
            return False
        folder = root / dataset_id
        shutil.rmtree(folder, ignore_errors=True)
        _copy_bytes.pop(str(folder), None)
        with contextlib.suppress(FileNotFoundError):  # nobody fetches a data set without a record: no new locker
            (root / ".locks" / dataset_id).unlink()
    return True


def sweep(store: RecordStore[DatasetRecord], cache_dir: Path) -> list[str]:
    """Remove the copies whose data set no longer exists (``forget`` each); returns their ids."""
    root = cache_dir / "datasets"
    try:
        with os.scandir(root) as found:
            ids = [e.name for e in found if not e.name.startswith(".") and e.is_dir(follow_symlinks=False)]
    except FileNotFoundError:
        return []
    if not ids:
        return []
    with store.client.pipeline(transaction=False) as pipe:
        for dataset_id in ids:
            pipe.exists(store.key_of(dataset_id))
        present = pipe.execute()
    return [
        dataset_id
        for dataset_id, there in zip(ids, present, strict=True)
        if not there and forget(cache_dir, dataset_id)
    ]


def touch_time() -> float:
    """Current time (exposed for tests)."""
    return time.time()

"""A data set in the object store: immutable, content-addressed shards of whole rows, and their manifest.

An upload's parser hands its rows to a ``ShardWriter`` (the parser's sink, as ``StagedArrays`` is for Redis).
Every ``shard_bytes`` of arrays (or at the end) the rows buffered so far become one shard: a CSR block with
its labels and query ids, encoded compactly, named by the SHA-256 of its bytes
(``datasets/<id>/<sha256>.shard``) and written to the object store by a background thread while the parse
goes on. The data set's record (in Redis) is committed with the manifest (the shard list, each with its
rows, non-zeros and checksum) only once every shard is stored; an upload that fails deletes what it wrote,
and what it could not delete (the store went away) is collected later (``collect_garbage``).

How a shard's arrays are encoded into its bytes, and read back, is ``core.storage.shard_format``.
"""

from __future__ import annotations

import hashlib
import queue
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

import numpy as np

from core.storage import keys
from core.storage.objects import ObjectStore, StoreError
from core.storage.shard_format import ROW_ARRAYS, DecodedShard, ShardCorrupt, decode_shard, encode_shard

ARRAY_NAMES = ("indptr", "indices", "data", "y", "qid")
"""The arrays of a data set, as the parser produces them (``qid`` only for files with query ids)."""


@dataclass(frozen=True)
class ShardEntry:
    """One shard as the manifest lists it: rows ``[row_start, row_start + rows)`` of the data set."""

    key: str
    sha256: str
    rows: int
    nnz: int
    bytes: int
    row_start: int
    nnz_start: int
    max_row_norm_sq: float | None = None  # the largest |x_i|^2 of its rows (None: written before it was kept)

    def to_document(self) -> dict:
        """The manifest's JSON form."""
        document = {
            "key": self.key,
            "sha256": self.sha256,
            "rows": self.rows,
            "nnz": self.nnz,
            "bytes": self.bytes,
            "row_start": self.row_start,
            "nnz_start": self.nnz_start,
        }
        if self.max_row_norm_sq is not None:
            document["max_row_norm_sq"] = self.max_row_norm_sq
        return document

    @classmethod
    def from_document(cls, document: Mapping) -> ShardEntry:
        """The entry of a stored manifest."""
        return cls(**{name: document[name] for name in cls.__dataclass_fields__ if name in document})


NORM_BLOCK = 1 << 16
"""Non-zeros squared at a time by ``max_row_norm_sq`` (a buffer that stays in the cache)."""


def max_row_norm_sq(indptr: np.ndarray, data: np.ndarray) -> float:
    """The largest squared Euclidean norm of the CSR rows ``(indptr, data)`` (0 for no non-zeros): the scale the
    numerical range of C is judged by (``core.scoring.quality.c_limit``)."""
    indptr = np.asarray(indptr)
    if data.size == 0:
        return 0.0
    largest = 0.0
    squares = np.empty(min(int(data.size), NORM_BLOCK), dtype=np.float64)  # reused: no fresh pages per block
    first = 0
    while first < indptr.size - 1:
        # the rows from ``first`` whose non-zeros fit the block (at least one row, however long)
        last = max(first + 1, int(np.searchsorted(indptr, indptr[first] + NORM_BLOCK, side="right")) - 1)
        last = min(last, indptr.size - 1)
        lo, hi = int(indptr[first]), int(indptr[last])
        if hi > lo:
            block = squares[: hi - lo] if hi - lo <= squares.size else np.empty(hi - lo, dtype=np.float64)
            np.square(data[lo:hi], out=block, dtype=np.float64)
            bounds = indptr[first:last] - lo
            starts = bounds[bounds < np.append(bounds[1:], hi - lo)]  # rows with a non-zero (reduceat needs them)
            largest = max(largest, float(np.add.reduceat(block, starts).max()))
        first = last
    return largest


def shard_entries(documents: list[dict] | None) -> list[ShardEntry]:
    """A record's shard list, typed."""
    return [ShardEntry.from_document(document) for document in documents or []]


# -- writing --------------------------------------------------------------------------------------------------


def _words(values: np.ndarray) -> np.ndarray | None:
    """The elements as unsigned integers of their size (bytes compared: -0.0 is not 0.0), or None."""
    kinds = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
    kind = kinds.get(values.dtype.itemsize)
    return None if kind is None else values.view(kind)


class _Column:
    """One array of the shard being filled. Pieces are copied once, into a buffer that is reused from shard to
    shard (a fresh buffer costs its page faults again); while every element so far is the same bytes (the values
    of binary features) they are only counted, and the shard stores that one element."""

    SPARES = 2

    def __init__(self, dtype: np.dtype):
        self.dtype = np.dtype(dtype)
        self.spares: list[np.ndarray] = []  # buffers the sending threads are done with (list ops are atomic)
        self._start()

    def _start(self) -> None:
        self.buffer: np.ndarray | None = None
        self.size = 0  # elements in the buffer
        self.repeated: np.ndarray | None = None  # the one element every element so far is (until one differs)
        self.held = 0  # elements of the repeated one, not written

    @property
    def count(self) -> int:
        """Elements appended since the shard began."""
        return self.size + self.held

    def append(self, piece: np.ndarray) -> None:
        """The next elements."""
        if piece.size == 0:
            return
        if self.count == 0 and _words(piece) is not None:
            self.repeated = piece[:1].copy()
        if self.repeated is not None:
            words, first = _words(piece), _words(self.repeated)
            assert words is not None and first is not None
            if (words[:64] == first[0]).all() and (words == first[0]).all():  # most pieces that differ, in 64
                self.held += piece.size
                return
            held, self.held, repeated, self.repeated = self.held, 0, self.repeated, None
            self._reserve(held + piece.size)
            assert self.buffer is not None
            self.buffer[self.size : self.size + held] = repeated[0]
            self.size += held
        self._reserve(piece.size)
        assert self.buffer is not None
        self.buffer[self.size : self.size + piece.size] = piece
        self.size += piece.size

    def _reserve(self, more: int) -> None:
        needed = self.size + more
        if self.buffer is not None and needed <= self.buffer.size:
            return
        while self.buffer is None and self.spares:
            spare = self.spares.pop()
            if spare.size >= needed:
                self.buffer = spare
                return
        grown = np.empty(max(needed, 2 * (self.buffer.size if self.buffer is not None else 0), 1 << 16), self.dtype)
        if self.buffer is not None:
            grown[: self.size] = self.buffer[: self.size]
        self.buffer = grown

    def take(self) -> tuple[np.ndarray, np.ndarray | None]:
        """The shard's array (a broadcast of one element when they are all the same) and the buffer to give back
        once it is encoded; the column starts empty."""
        if self.repeated is not None:
            out = np.broadcast_to(self.repeated, (self.held,))
            buffer = self.buffer
            self._start()
            self.buffer = buffer  # untouched: kept for the next shard
            return out, None
        buffer = self.buffer
        out = buffer[: self.size] if buffer is not None else np.empty(0, self.dtype)
        self._start()
        return out, buffer

    def give_back(self, buffer: np.ndarray) -> None:
        """A buffer whose shard is encoded, for a later shard."""
        if len(self.spares) < self.SPARES:
            self.spares.append(buffer)


class ShardWriter:
    """The parser's sink for an upload to the object store (see the module docstring).

    ``append(name, piece)``, ``reset()`` and ``discard()`` as ``core.storage.arrays.StagedArrays``;
    ``manifest()`` returns ``(arrays, shards)``: the arrays' dtypes and shapes, and the shard list. A
    failed write raises from the next call (``StoreError``: the caller discards and says why)."""

    def __init__(
        self,
        store: ObjectStore,
        dataset_id: str,
        shard_bytes: int,
        *,
        senders: int = 2,
        before_shard: Callable[[int], None] | None = None,
    ):
        self.store = store
        self.dataset_id = dataset_id
        self.shard_bytes = int(shard_bytes)
        self.before_shard = before_shard
        self._queue: queue.Queue = queue.Queue(maxsize=1)
        self._lock = threading.Lock()
        self._error: BaseException | None = None
        self._written: dict[int, ShardEntry] = {}
        self._stale: list[str] = []  # keys written for a parse that started over, or after a discard
        self._epoch = 0
        self._threads = [
            threading.Thread(target=self._send_loop, name=f"shard-writer-{i}", daemon=True) for i in range(senders)
        ]
        for thread in self._threads:
            thread.start()
        self._start_empty()

    def _start_empty(self) -> None:
        self._columns: dict[str, _Column] = {}
        self._dtypes: dict[str, str] = {}
        self._buffered = 0  # bytes of the rows held (repeated elements counted)
        self._rows_total = 0  # rows in shards cut so far
        self._nnz_total = 0
        self._shard_index = 0
        self._started = False
        self._epoch += 1  # shards of an earlier epoch (before a reset) are not kept

    def append(self, name: str, piece: np.ndarray) -> None:
        """The next elements of one array (the parser's emit: indptr, indices, data, y[, qid])."""
        self._raise_error()
        if name not in ARRAY_NAMES:
            raise ValueError(f"unknown array {name!r}")
        if name == "indptr":
            if not self._started:  # the parser's first piece: the leading 0
                self._started = True
                self._dtypes["indptr"] = np.dtype(piece.dtype).str
                if piece.size == 1:
                    return
                piece = piece[1:]
            elif self._buffered >= self.shard_bytes:  # the last emit is whole: cut before this one
                self._cut()
        kind = np.dtype(piece.dtype).str
        if self._dtypes.setdefault(name, kind) != kind:
            raise ValueError(f"array {name!r} is {self._dtypes[name]}, got a piece of {kind}")
        column = self._columns.get(name)
        if column is None:
            column = self._columns[name] = _Column(np.dtype(kind))
        column.append(piece)
        self._buffered += int(piece.nbytes)

    def _cut(self) -> None:
        """The buffered rows become the next shard, handed to a sending thread."""
        column = self._columns.get("indptr")
        if column is None or column.count == 0:
            return
        taken = {name: (c, *c.take()) for name, c in self._columns.items()}
        ends = np.asarray(taken["indptr"][1])  # global row ends
        rows = int(ends.size)
        nnz = int(ends[-1]) - self._nnz_total
        local = np.empty(rows + 1, dtype=ends.dtype)
        local[0] = 0
        np.subtract(ends, self._nnz_total, out=local[1:])
        arrays = {
            "indptr": local,
            **{name: taken[name][1] for name in ARRAY_NAMES if name in taken and name != "indptr"},
        }
        returns = [(c, buffer) for c, _, buffer in taken.values() if buffer is not None]
        item = (self._epoch, self._shard_index, arrays, rows, nnz, self._rows_total, self._nnz_total, returns)
        self._shard_index += 1
        self._rows_total += rows
        self._nnz_total += nnz
        self._buffered = 0
        if self.before_shard is not None:
            self.before_shard(sum(int(a.nbytes) for a in arrays.values()))
        self._queue.put(item)

    def _send_loop(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                if self._error is None and item[0] == self._epoch:
                    self._send(*item)
            except BaseException as exc:  # raised in the caller's thread by the next call
                with self._lock:
                    self._error = self._error or exc
            finally:
                self._queue.task_done()

    def _send(self, epoch, index, arrays, rows, nnz, row_start, nnz_start, returns) -> None:
        encoded = encode_shard(arrays, rows, nnz)
        norm_sq = max_row_norm_sq(arrays["indptr"], arrays["data"]) if "data" in arrays else None
        del arrays
        for column, buffer in returns:  # the rows are in ``encoded`` now
            column.give_back(buffer)
        digest = hashlib.sha256(encoded.data).hexdigest()
        key = keys.dataset_shard(self.dataset_id, digest)
        self.store.put(key, encoded.data)
        entry = ShardEntry(key, digest, rows, nnz, int(encoded.nbytes), row_start, nnz_start, norm_sq)
        with self._lock:
            if epoch == self._epoch:
                self._written[index] = entry
            else:  # written for a parse that has started over
                self._stale.append(key)

    def _wait(self) -> None:
        self._queue.join()

    def _raise_error(self) -> None:
        if self._error is not None:
            with self._lock:
                error, self._error = self._error, None
            if error is not None:
                raise error

    def manifest(self) -> tuple[dict[str, dict], list[ShardEntry]]:
        """Write the last shard, wait for every shard, and return the arrays' dtypes and shapes and the shards."""
        self._raise_error()
        self._cut()
        self._wait()
        self._raise_error()
        shards = [self._written[index] for index in range(self._shard_index)]
        rows = sum(shard.rows for shard in shards)
        nnz = sum(shard.nnz for shard in shards)
        counts = {"indptr": rows + 1, "indices": nnz, "data": nnz, "y": rows, "qid": rows}
        arrays = {name: {"dtype": dtype, "shape": [counts[name]]} for name, dtype in self._dtypes.items()}
        return arrays, shards

    def reset(self) -> None:
        """Start over (the parse restarts): what was written so far is deleted."""
        self.discard()
        self._start_empty()

    def written_keys(self) -> list[str]:
        """Keys of every shard written so far (the current parse and abandoned ones)."""
        with self._lock:
            return [entry.key for entry in self._written.values()] + list(self._stale)

    def discard(self) -> None:
        """Delete the shards written so far (best effort: the store may be away; ``collect_garbage`` finishes)."""
        self._epoch += 1  # shards still being sent are then recorded as stale
        self._wait()
        with self._lock:
            self._error = None
        names = self.written_keys()
        with self._lock:
            self._written, self._stale = {}, []
        if names:
            try:
                self.store.delete(names)
            except StoreError:
                pass

    def close(self) -> None:
        """Stop the sending threads (after ``manifest`` or ``discard``)."""
        for _ in self._threads:
            self._queue.put(None)
        for thread in self._threads:
            thread.join()
        self._threads = []


# -- reading a whole data set ---------------------------------------------------------------------------------


def region(name: str, entry: ShardEntry) -> tuple[int, int]:
    """The elements ``[start, stop)`` of the data set's array ``name`` that a shard holds (``indptr``: the row
    ends, so that shards never overlap; the leading 0 is nobody's)."""
    if name == "indptr":
        return entry.row_start + 1, entry.row_start + 1 + entry.rows
    if name in ROW_ARRAYS:
        return entry.row_start, entry.row_start + entry.rows
    return entry.nnz_start, entry.nnz_start + entry.nnz


def place(shard: DecodedShard, entry: ShardEntry, targets: Mapping[str, np.ndarray]) -> None:
    """Write a shard's arrays into the data set's whole arrays (``targets``: name -> the whole array)."""
    if shard.rows != entry.rows or shard.nnz != entry.nnz:
        raise ShardCorrupt(
            f"shard {entry.key} holds {shard.rows} rows and {shard.nnz} non-zeros, the manifest says "
            f"{entry.rows} and {entry.nnz}"
        )
    for name, target in targets.items():
        start, stop = region(name, entry)
        if name == "indptr":
            target[0] = 0
            np.add(shard.array("indptr")[1:], entry.nnz_start, out=target[start:stop], casting="unsafe")
        else:
            shard.into(name, target[start:stop])


def fetch(store: ObjectStore, entry: ShardEntry) -> DecodedShard:
    """One shard from the store, checked against its SHA-256 (fetched a second time when it does not match:
    ``ShardCorrupt`` if it still does not)."""
    try:
        return decode_shard(store.get(entry.key), entry.sha256)
    except ShardCorrupt:
        return decode_shard(store.get(entry.key), entry.sha256)


def assemble(
    store: ObjectStore, arrays: Mapping[str, dict], entries: list[ShardEntry], names=None
) -> dict[str, np.ndarray]:
    """A sharded data set's arrays (all, or those named), in memory."""
    out = {
        name: np.empty(tuple(entry["shape"]), dtype=np.dtype(entry["dtype"]))
        for name, entry in arrays.items()
        if names is None or name in names
    }
    for entry in entries:
        place(fetch(store, entry), entry, out)
    return out


def shard_groups(entries: list[ShardEntry], n_groups: int) -> list[list[ShardEntry]]:
    """The shards cut into ``n_groups`` runs of consecutive shards with about as many non-zeros (+ rows) each
    (fewer groups when there are fewer shards): the parts of a data set held by the nodes of a split training."""
    n_groups = max(1, min(int(n_groups), len(entries)))
    cost = np.cumsum([entry.nnz + entry.rows for entry in entries], dtype=np.float64)
    bounds = [0]
    for g in range(1, n_groups):
        bounds.append(max(bounds[-1] + 1, int(np.searchsorted(cost, cost[-1] * g / n_groups))))
    bounds.append(len(entries))
    return [entries[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True) if b > a]


def load_rows(store: ObjectStore, arrays: Mapping[str, dict], entries: list[ShardEntry]) -> dict[str, np.ndarray]:
    """The rows of consecutive shards ``entries`` as arrays of their own (indptr from 0), in memory: a node's
    part of a data set (``arrays``: the record's description of the whole arrays, for their dtypes)."""
    r0, s0 = entries[0].row_start, entries[0].nnz_start
    rows = sum(entry.rows for entry in entries)
    nnz = sum(entry.nnz for entry in entries)
    sizes = {"indptr": rows + 1, **{name: rows for name in ROW_ARRAYS}}
    out = {name: np.empty(sizes.get(name, nnz), dtype=np.dtype(entry["dtype"])) for name, entry in arrays.items()}
    for entry in entries:
        local = replace(entry, row_start=entry.row_start - r0, nnz_start=entry.nnz_start - s0)
        place(fetch(store, entry), local, out)
    if rows == 0:
        out["indptr"][0] = 0
    return out

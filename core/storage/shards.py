"""A data set in the object store: immutable, content-addressed shards of whole rows, and their manifest.

An upload's parser hands its rows to a ``ShardWriter`` (the parser's sink, as ``StagedArrays`` is for Redis).
Every ``shard_bytes`` of arrays (or at the end) the rows buffered so far become one shard: a CSR block with
its labels and query ids, encoded compactly, named by the SHA-256 of its bytes
(``datasets/<id>/<sha256>.shard``) and written to the object store by a background thread while the parse
goes on. The data set's record (in Redis) is committed with the manifest (the shard list, each with its
rows, non-zeros and checksum) only once every shard is stored; an upload that fails deletes what it wrote,
and what it could not delete (the store went away) is collected later (``collect_garbage``).

A shard's bytes::

    b"HSHARD\\x00\\x01"          magic and format version (8 bytes)
    header length               little-endian uint64
    header                      JSON, padded with spaces to a multiple of 8 bytes
    arrays                      each at an offset that is a multiple of 8

The header says ``rows``, ``nnz`` and, for each array (``indptr``, ``indices``, ``data``, ``y``, and ``qid``
when the file has query ids), its ``dtype`` and element ``count`` as the data set holds it, and how it is
stored (``encoding``): ``raw`` (its bytes), ``narrow`` (unsigned integers of ``width`` bytes: the row
offsets, local to the shard, and column indices that fit), ``gaps`` (column indices as the differences between
neighbours, within a row in 1 or 2 bytes with the rare wider ones escaped to a list, so that one running sum
reads them back: TF-IDF text over 10^6 features has gaps of a few thousand, 2 bytes instead of 4), ``fill`` (one element, repeated: the values of a data set with binary features) or ``table`` (at
most 256 distinct values and one byte per element: the labels). a9a-like text then stores about 1.1 bytes a
non-zero instead of 12, TF-IDF-like text with float32 values about 6 instead of 8.
"""

from __future__ import annotations

import hashlib
import json
import queue
import struct
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from core.storage import keys
from core.storage.objects import Buffer, ObjectStore, StoreError

MAGIC = b"HSHARD\x00\x01"
ALIGN = 8
ARRAY_NAMES = ("indptr", "indices", "data", "y", "qid")
"""The arrays of a data set, as the parser produces them (``qid`` only for files with query ids)."""
ROW_ARRAYS = ("y", "qid")
"""Arrays with one element per row (``indptr`` has one more; ``indices`` and ``data`` one per non-zero)."""
TABLE_MAX = 256


class ShardCorrupt(StoreError):
    """A shard's bytes do not match its checksum, or do not parse."""

    code = "shard_corrupt"


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


def max_row_norm_sq(indptr: np.ndarray, data: np.ndarray) -> float:
    """The largest squared Euclidean norm of the CSR rows ``(indptr, data)`` (0 for no non-zeros): the scale the
    numerical range of C is judged by (``core.scoring.quality.c_limit``)."""
    indptr = np.asarray(indptr)
    if data.size == 0:
        return 0.0
    starts = indptr[:-1][indptr[1:] > indptr[:-1]]  # the rows that have a non-zero (reduceat needs them)
    sums = np.add.reduceat(np.square(data, dtype=np.float64), starts)
    return float(sums.max())


def shard_entries(documents: list[dict] | None) -> list[ShardEntry]:
    """A record's shard list, typed."""
    return [ShardEntry.from_document(document) for document in documents or []]


# -- encoding -------------------------------------------------------------------------------------------------


def _narrowest_unsigned(values: np.ndarray) -> int | None:
    """The fewest bytes (1, 2 or 4) that hold every element of an integer array, if fewer than its own."""
    if values.size == 0 or values.dtype.kind not in "iu":
        return None
    largest = int(values.max())
    if largest >= 1 << 32 or int(values.min()) < 0:
        return None
    for width in (1, 2, 4):
        if width < values.dtype.itemsize and largest < 1 << (8 * width):
            return width
    return None


def _encode(name: str, values: np.ndarray) -> tuple[dict, np.ndarray]:
    """How one array is stored (the header's entry, without its offset) and the bytes stored."""
    if values.ndim == 1 and values.size and values.strides[0] == 0:  # one element repeated (``_Column``)
        one = values[:1].astype(values.dtype.newbyteorder("<"))
        entry = {"dtype": one.dtype.str, "count": int(values.size), "encoding": "fill", "fill": one.tobytes().hex()}
        return entry, np.empty(0, np.uint8)
    flat = np.ascontiguousarray(values).reshape(-1)
    if flat.dtype.byteorder == ">":
        flat = flat.astype(flat.dtype.newbyteorder("<"))
    entry = {"dtype": flat.dtype.str, "count": int(flat.size)}
    if flat.size >= 2 and flat.dtype.itemsize in (4, 8) and flat.dtype.kind == "f":
        words = flat.view(np.uint32 if flat.dtype.itemsize == 4 else np.uint64)
        if np.all(words == words[0]):
            return dict(entry, encoding="fill", fill=flat[:1].tobytes().hex()), np.empty(0, np.uint8)
        if name in ROW_ARRAYS:
            distinct = np.unique(words)
            if distinct.size <= TABLE_MAX and flat.size > 2 * distinct.size:
                codes = np.searchsorted(distinct, words).astype(np.uint8)
                table = distinct.view(flat.dtype)
                stored = np.concatenate([table.view(np.uint8), codes])
                return dict(entry, encoding="table", table_size=int(distinct.size)), stored
    width = _narrowest_unsigned(flat)
    if width is not None:
        return dict(entry, encoding="narrow", width=width), flat.astype(f"<u{width}").view(np.uint8)
    return dict(entry, encoding="raw"), flat.view(np.uint8)


def _row_starts(indptr: np.ndarray) -> np.ndarray:
    """Where each row that has entries starts (positions in ``indices``)."""
    return indptr[:-1][indptr[:-1] < indptr[1:]]


def _gaps(indices: np.ndarray, indptr: np.ndarray) -> tuple[dict, np.ndarray] | None:
    """Column indices as the differences between neighbours, so that their running sum gives them back: within a row
    (its indices increase) a gap in 1 or 2 bytes, a gap too wide for them written as the escape (all bits set) with
    its value in a list at the end; at each row's start the signed difference from the previous row's last index,
    in a list of its own at the front. None when that is no smaller than narrowing alone (indices under 256
    always are)."""
    plain = _narrowest_unsigned(indices) or indices.dtype.itemsize
    if indices.size < 2 or indices.dtype.kind not in "iu" or plain == 1:
        return None
    work = np.dtype(np.int32 if indices.dtype.itemsize <= 4 else np.int64)  # int32 indices: their differences fit
    starts = _row_starts(indptr)
    gaps: np.ndarray = np.empty(indices.size, dtype=work)
    gaps[0] = indices[0]
    np.subtract(indices[1:], indices[:-1], out=gaps[1:], casting="unsafe")
    steps = gaps[starts].copy()  # each row's first index less the previous row's last (the first row's: itself)
    gaps[starts] = 0
    if int(gaps.min()) < 0:  # not increasing within a row: no gap encoding
        return None
    wide_width = 4 if int(gaps.max()) < 1 << 32 else 8
    sizes = {
        width: width * gaps.size + wide_width * int(np.count_nonzero(gaps >= (1 << (8 * width)) - 1))
        for width in (1, 2)
    }
    width = min(sizes, key=lambda w: sizes[w])
    if sizes[width] + work.itemsize * steps.size >= plain * indices.size:
        return None
    escape = (1 << (8 * width)) - 1
    escaped = np.flatnonzero(gaps >= escape)
    wide = gaps[escaped]
    narrow = gaps.astype(f"<u{width}")
    narrow[escaped] = escape
    parts = [steps.astype(work.newbyteorder("<")).view(np.uint8), narrow.view(np.uint8)]
    parts.append(wide.astype(f"<u{wide_width}").view(np.uint8))
    entry = {
        "encoding": "gaps",
        "width": width,
        "steps": int(steps.size),
        "step_dtype": work.newbyteorder("<").str,
        "escapes": int(escaped.size),
        "escape_width": wide_width,
    }
    return entry, np.concatenate(parts)


def encode_shard(arrays: Mapping[str, np.ndarray], rows: int, nnz: int) -> np.ndarray:
    """The bytes of a shard holding these arrays (``indptr`` local: starting at 0)."""
    header: dict = {"rows": int(rows), "nnz": int(nnz), "arrays": {}}
    payloads = []
    offset = 0
    for name, values in arrays.items():
        entry, stored = _encode(name, values)
        gaps = _gaps(values, arrays["indptr"]) if name == "indices" and "indptr" in arrays else None
        if gaps is not None and gaps[1].nbytes < stored.nbytes:
            entry = {"dtype": entry["dtype"], "count": entry["count"], **gaps[0]}
            stored = gaps[1]
        entry["offset"], entry["bytes"] = offset, int(stored.nbytes)
        header["arrays"][name] = entry
        payloads.append((offset, stored))
        offset += -(-stored.nbytes // ALIGN) * ALIGN
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % ALIGN)
    start = len(MAGIC) + 8 + len(text)
    out = np.zeros(start + offset, dtype=np.uint8)
    out[: len(MAGIC)] = np.frombuffer(MAGIC, np.uint8)
    out[len(MAGIC) : len(MAGIC) + 8] = np.frombuffer(struct.pack("<Q", len(text)), np.uint8)
    out[len(MAGIC) + 8 : start] = np.frombuffer(text, np.uint8)
    for position, stored in payloads:
        out[start + position : start + position + stored.nbytes] = stored
    return out


# -- decoding -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DecodedShard:
    """A shard read back: its header and a view of its bytes (arrays are decoded on demand)."""

    rows: int
    nnz: int
    entries: dict[str, dict]
    payload: np.ndarray  # the bytes after the header

    def array(self, name: str) -> np.ndarray:
        """One array in its data set dtype (``indptr`` local to the shard)."""
        entry = self.entries[name]
        dtype = np.dtype(entry["dtype"])
        count = int(entry["count"])
        stored = self.payload[entry["offset"] : entry["offset"] + entry["bytes"]]
        encoding = entry["encoding"]
        if encoding == "raw":
            return stored.view(dtype)[:count]
        if encoding == "narrow":
            return stored.view(f"<u{int(entry['width'])}")[:count].astype(dtype)
        if encoding == "fill":
            return np.broadcast_to(np.frombuffer(bytes.fromhex(entry["fill"]), dtype=dtype), (count,))
        if encoding == "table":
            size = int(entry["table_size"])
            table = stored[: size * dtype.itemsize].view(dtype)
            return table[stored[size * dtype.itemsize : size * dtype.itemsize + count]]
        if encoding == "gaps":
            return np.cumsum(self._differences(name), dtype=dtype)
        raise ShardCorrupt(f"array {name!r} is stored with encoding {encoding!r}, unknown to this version")

    def _differences(self, name: str) -> np.ndarray:
        """A ``gaps`` array's differences between neighbours (see ``_gaps``), whose running sum is the array."""
        entry = self.entries[name]
        count, width = int(entry["count"]), int(entry["width"])
        stored = self.payload[entry["offset"] : entry["offset"] + entry["bytes"]]
        step_dtype = np.dtype(entry["step_dtype"])
        step_bytes = int(entry["steps"]) * step_dtype.itemsize
        steps = stored[:step_bytes].view(step_dtype)
        differences = stored[step_bytes : step_bytes + count * width].view(f"<u{width}").astype(step_dtype)
        if entry["escapes"]:
            wide_start = step_bytes + count * width
            wide_bytes = int(entry["escapes"]) * int(entry["escape_width"])
            wide = stored[wide_start : wide_start + wide_bytes].view(f"<u{int(entry['escape_width'])}")
            escaped = np.flatnonzero(differences == (1 << (8 * width)) - 1)
            if escaped.size != wide.size:
                raise ShardCorrupt(f"array {name!r} has {escaped.size} escapes for {wide.size} wide gaps")
            differences[escaped] = wide
        starts = _row_starts(self.array("indptr"))
        if starts.size != steps.size:
            raise ShardCorrupt(f"array {name!r} has {steps.size} row starts for {starts.size} rows with entries")
        differences[starts] = steps
        return differences

    def into(self, name: str, out: np.ndarray) -> None:
        """Write one array into ``out`` (its length), decoding straight into it."""
        entry = self.entries[name]
        if entry["encoding"] == "gaps":  # the running sum, written where it belongs
            np.cumsum(self._differences(name), dtype=out.dtype, out=out)
            return
        if entry["encoding"] == "fill":
            out[...] = np.frombuffer(bytes.fromhex(entry["fill"]), dtype=np.dtype(entry["dtype"]))[0]
            return
        out[...] = self.array(name)


def decode_shard(data: Buffer, sha256: str | None = None) -> DecodedShard:
    """Parse a shard's bytes, checking them against ``sha256`` first when given (``ShardCorrupt`` if not)."""
    raw = np.frombuffer(data, dtype=np.uint8)
    if sha256 is not None and hashlib.sha256(raw.data).hexdigest() != sha256:
        raise ShardCorrupt(f"a shard's bytes do not match its SHA-256 {sha256[:16]}...")
    if raw.size < len(MAGIC) + 8 or raw[: len(MAGIC)].tobytes() != MAGIC:
        raise ShardCorrupt("not a shard of this format (bad magic)")
    (length,) = struct.unpack("<Q", raw[len(MAGIC) : len(MAGIC) + 8].tobytes())
    start = len(MAGIC) + 8 + int(length)
    try:
        header = json.loads(raw[len(MAGIC) + 8 : start].tobytes())
    except ValueError as exc:
        raise ShardCorrupt(f"a shard's header does not parse: {exc}") from None
    return DecodedShard(int(header["rows"]), int(header["nnz"]), header["arrays"], raw[start:])


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

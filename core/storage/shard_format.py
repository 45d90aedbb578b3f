"""A shard's bytes: how the arrays of a block of rows are encoded into one object, and read back.

The shards themselves (written while an upload is parsed, listed in a manifest, assembled into a data set)
are ``core.storage.shards``.

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
import struct
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from core.storage.objects import Buffer, StoreError

MAGIC = b"HSHARD\x00\x01"
ALIGN = 8
ROW_ARRAYS = ("y", "qid")
"""Arrays with one element per row (``indptr`` has one more; ``indices`` and ``data`` one per non-zero)."""
TABLE_MAX = 256


class ShardCorrupt(StoreError):
    """A shard's bytes do not match its checksum, or do not parse."""

    code = "shard_corrupt"


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
    if values.ndim == 1 and values.size and values.strides[0] == 0:  # one element repeated (``shards._Column``)
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

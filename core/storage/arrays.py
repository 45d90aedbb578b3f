"""Binary numpy arrays in Redis, cut into chunks so that arrays beyond Redis's 512 MB value limit work.

An array is stored as raw little-endian bytes in values of at most ``chunk_bytes`` each; its
manifest ``{"dtype", "shape", "chunks"}`` lives in the owner's JSON metadata. Chunks are written with
a time-to-live first and made permanent by the owner's commit transaction (see ``persist_commands``),
so an upload that dies half-way leaves nothing that lasts.

An array of at least ``FILL_MIN_BYTES`` whose elements are all the same bytes (the values of a data set
with binary features: a9a's are all 1) is not written at all: its manifest says ``"chunks": 0`` and
``"fill"``, the hex of one element, and reading it gives that element repeated. a9a-like text stores 8
bytes a non-zero for 5.2 bytes of text; without the values Redis receives and logs half of that.

An array of 4- or 8-byte elements of at least ``FILL_MIN_BYTES`` whose elements are mostly zero (all
bytes zero: -0.0 is not zero here) is stored as its non-zero elements after a bit mask of where they are,
when that saves at least ``NONZERO_MIN_SAVING`` of its bytes: the manifest says ``"encoding":
"nonzero"`` and ``"stored_bytes"``, and reading it gives the array back bit for bit. A linear model's
weights are such arrays: sector's 105 classes one-vs-rest has 59% zero weights, and its 46 MB of
weights take 19.7 MB this way. Every byte a model takes is received, appended to the append-only file
and synced by Redis before the model is stored: 184 ms for those 46 MB, 67 ms for 19 MB (medians of 8).

An integer array written piece by piece (``StagedArrays``: a data set's column indices, as the parser produces
them) has each chunk whose elements are all in [0, 255] or [0, 65535] stored as 1- or 2-byte unsigned integers:
the manifest says ``"encoding": "narrow"``, ``"chunk_widths"`` (the bytes an element takes in each chunk, in
order) and ``"stored_bytes"``; reading widens them back to the array's dtype, bit for bit. a9a's 123 features
make its int32 indices 1 byte each, so Redis receives and logs a quarter of them.
"""

from __future__ import annotations

import hashlib
import queue
import threading
from collections.abc import Mapping

import numpy as np
import redis

from core.storage import keys

STAGING_TTL_S = 6 * 3600
FILL_MIN_BYTES = 1 << 16
"""Smallest array stored as one repeated element when all its elements are the same bytes (see above)."""
NONZERO_MIN_SAVING = 0.25
"""Least share of an array's bytes the non-zero encoding must save to be used (it costs a pass to encode and
to decode)."""
NONZERO = "nonzero"
"""The manifest's ``encoding`` of an array stored as a bit mask and its non-zero elements (see above)."""
NARROW = "narrow"
"""The manifest's ``encoding`` of an integer array whose chunks hold narrower unsigned integers (see above)."""
READ_FILL_BYTES = 16 << 20
"""Bytes of a repeated element's array that ``iter_chunks`` yields at a time."""


def little_endian(array: np.ndarray) -> np.ndarray:
    """The array's elements, flat and little-endian (a view when they are already)."""
    flat = np.ascontiguousarray(array).reshape(-1)
    return flat.astype(flat.dtype.newbyteorder("<")) if flat.dtype.byteorder == ">" else flat


def _as_words(flat: np.ndarray) -> np.ndarray | None:
    """The elements as unsigned integers of their size (bytes compared, not values: -0.0 is not 0.0), or None."""
    kinds = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
    kind = kinds.get(flat.dtype.itemsize)
    return None if kind is None else flat.view(kind)


def repeated_element(flat: np.ndarray) -> bytes | None:
    """The bytes of the one element a 1-D little-endian array repeats, if it is at least FILL_MIN_BYTES; else None."""
    words = _as_words(flat)
    if words is None or flat.nbytes < FILL_MIN_BYTES or not np.all(words == words[0]):
        return None
    return flat[:1].tobytes()


def nonzero_encoded(flat: np.ndarray) -> np.ndarray | None:
    """The bytes that store a 1-D little-endian array as its non-zero elements (see the module docstring): the
    packed bit mask of the elements that are not all zero bytes (zero-padded to a multiple of 8 bytes), then
    those elements; None when the array is too small, has elements of another size than 4 or 8 bytes, or the
    encoding saves too little."""
    words = _as_words(flat)
    if words is None or flat.dtype.itemsize < 4 or flat.nbytes < FILL_MIN_BYTES:
        return None
    nonzero = words != 0
    n_nonzero = int(np.count_nonzero(nonzero))
    mask_bytes = _mask_bytes(flat.size)
    if mask_bytes + n_nonzero * flat.dtype.itemsize > (1.0 - NONZERO_MIN_SAVING) * flat.nbytes:
        return None
    stored = np.zeros(mask_bytes + n_nonzero * flat.dtype.itemsize, dtype=np.uint8)
    packed = np.packbits(nonzero)
    stored[: packed.size] = packed
    # np.compress, not words[nonzero]: 4.6 ms against 25 ms on sector's 5.8 million weights
    np.compress(nonzero, words, out=stored[mask_bytes:].view(words.dtype))
    return stored


def _mask_bytes(count: int) -> int:
    """Bytes of the bit mask of ``count`` elements, padded to a multiple of 8 (the elements after it are aligned)."""
    return -(-count // 64) * 8


def nonzero_decoded(stored: np.ndarray, dtype: np.dtype, count: int) -> np.ndarray:
    """The array of ``count`` elements that ``nonzero_encoded`` stored as the bytes ``stored``."""
    mask_bytes = _mask_bytes(count)
    positions = np.flatnonzero(np.unpackbits(stored[:mask_bytes], count=count).view(bool))
    values = stored[mask_bytes:].view(dtype)
    if values.size != positions.size:
        raise KeyError(f"{values.size} stored non-zero elements for a mask of {positions.size}")
    out = np.zeros(count, dtype=dtype)
    out[positions] = values  # 7.7 ms against 27 ms for a boolean mask (sector's weights)
    return out


def narrowed_chunk(payload: np.ndarray, dtype: np.dtype, out: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """A chunk's bytes (``payload``, elements of ``dtype``) as 1- or 2-byte unsigned integers when every element
    fits, with the bytes an element takes; the payload itself and the dtype's size otherwise (not integers, a
    negative element, or none narrower). ``out``: bytes to write the narrowed elements into when it is large
    enough (a buffer kept across chunks: a fresh one of tens of MB costs more in page faults than the cast)."""
    if dtype.kind not in "iu" or dtype.itemsize < 2 or payload.size == 0:
        return payload, dtype.itemsize
    values = payload.view(dtype)
    largest = int(values.max())  # first: most chunks that cannot be narrowed fail here, in one pass
    if largest >= 1 << 16 or int(values.min()) < 0:
        return payload, dtype.itemsize
    for width in (1, 2):
        if width < dtype.itemsize and largest < 1 << (8 * width):
            size = values.size * width
            if out is None or out.size < size:
                return values.astype(f"<u{width}").view(np.uint8), width
            np.copyto(out[:size].view(f"<u{width}"), values, casting="unsafe")
            return out[:size], width
    return payload, dtype.itemsize


def _widened(piece: bytes, width: int, dtype: np.dtype) -> np.ndarray:
    """A stored chunk's elements back in ``dtype`` (``width``: the bytes an element takes in the chunk)."""
    if width == dtype.itemsize:
        return np.frombuffer(piece, dtype=dtype)
    return np.frombuffer(piece, dtype=f"<u{width}").astype(dtype)


def _repeat(one: np.ndarray, count: int) -> np.ndarray:
    """``count`` copies of the one-element array ``one``, bit for bit."""
    return np.broadcast_to(one, (count,)).copy()


def _filled(entry: Mapping, count: int) -> np.ndarray:
    """``count`` copies of the manifest's repeated element."""
    return _repeat(np.frombuffer(bytes.fromhex(entry["fill"]), dtype=np.dtype(entry["dtype"])), count)


def write_staged(
    client: redis.Redis, owner_key: str, arrays: Mapping[str, np.ndarray], chunk_bytes: int
) -> dict[str, dict]:
    """Write every array in chunks with a staging TTL; return the manifest to keep in the metadata."""
    manifest: dict[str, dict] = {}
    for name, array in arrays.items():
        flat = little_endian(array)
        element = repeated_element(flat)
        if element is not None:
            manifest[name] = {"dtype": flat.dtype.str, "shape": list(array.shape), "chunks": 0, "fill": element.hex()}
            continue
        encoded = nonzero_encoded(flat)
        raw = (flat.view(np.uint8) if encoded is None else encoded).data
        n_chunks = max(1, -(-raw.nbytes // chunk_bytes))
        for index in range(n_chunks):
            piece = raw[index * chunk_bytes : (index + 1) * chunk_bytes]  # a view: redis-py sends it as it is
            client.set(keys.array_chunk(owner_key, name, index), piece, ex=STAGING_TTL_S)
        manifest[name] = {"dtype": flat.dtype.str, "shape": list(array.shape), "chunks": n_chunks}
        if encoded is not None:
            manifest[name].update(encoding=NONZERO, stored_bytes=int(encoded.nbytes))
    return manifest


class StagedArrays:
    """Arrays written to Redis piece by piece as they are produced (a parser's sink), staged like ``write_staged``.

    ``append(name, piece)`` adds to array ``name``; every ``chunk_bytes`` of it go to Redis as one
    value (with the staging TTL), so the writer holds about one chunk per array. With
    ``background=True`` a thread sends the full chunks (at most one waiting behind the one being
    sent) while the caller goes on producing: with ``appendfsync always`` each SET waits for Redis's
    fsync, which then overlaps the parse. ``manifest()`` writes the last partial chunks, waits for
    the thread and returns the manifest for the owner's commit; ``reset()`` and ``discard()`` delete
    what was written (a parse that starts over, a failed upload). A failed SET is raised by the next
    call.
    """

    def __init__(
        self, client: redis.Redis, owner_key: str, chunk_bytes: int, *, background: bool = False, before_chunk=None
    ):
        self.client = client
        self.before_chunk = before_chunk  # called with each chunk's size before it is written (a room check)
        self.owner_key = owner_key
        self.chunk_bytes = max(8, int(chunk_bytes) // 8 * 8)
        self._state: dict[str, dict] = {}
        self._queue: queue.Queue | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        # the narrowed chunk, reused by the thread that sends (pages are touched only by chunks that are narrowed)
        self._narrow_out = np.empty(self.chunk_bytes // 2, dtype=np.uint8)
        # chunk buffers the sending thread is done with, for the next chunks (a fresh buffer of chunk_bytes costs
        # its page faults again); list.append and list.pop are atomic, the only operations on it
        self._spare: list[np.ndarray] = []
        if background:
            self._queue = queue.Queue(maxsize=1)
            self._thread = threading.Thread(target=self._send_loop, name="staged-arrays", daemon=True)
            self._thread.start()

    def append(self, name: str, piece: np.ndarray) -> None:
        """Add the next elements of array ``name`` (1-D; every piece of an array has the same dtype).

        While every element so far is the same bytes, nothing is written: only counted (the array may end
        as one repeated element, see the module docstring); the first other element writes them out."""
        self._raise_error()
        flat = little_endian(piece)
        state = self._state.get(name)
        if state is None:
            state = self._state[name] = {
                "dtype": flat.dtype.str,
                "count": 0,
                "chunks": 0,
                "buffer": None,
                "fill": 0,
                "repeated": None,  # the element every element so far is (until one differs)
                "held": 0,  # elements of the repeated one not written yet
                "widths": [],  # bytes an element takes in each chunk written (see narrowed_chunk)
                "stored": 0,  # bytes of the chunks written
            }
        elif state["dtype"] != flat.dtype.str:
            raise ValueError(f"array {name!r} is {state['dtype']}, got a piece of {flat.dtype.str}")
        if state["count"] == 0 and flat.size and _as_words(flat) is not None:
            state["repeated"] = flat[:1].copy()
        repeated = state["repeated"]
        if repeated is not None:
            words, element = _as_words(flat), _as_words(repeated)
            assert words is not None and element is not None, "a repeated element has a word size"
            if np.all(words == element[0]):
                state["count"] += flat.size
                state["held"] += flat.size
                return
            self._write_held(name, state)
        state["count"] += flat.size
        self._write(name, state, flat)

    def _write_held(self, name: str, state: dict) -> None:
        """The array is not one repeated element after all: write the elements counted so far."""
        repeated, held = state["repeated"], state["held"]
        state["repeated"], state["held"] = None, 0
        step = max(1, self.chunk_bytes // repeated.itemsize)
        for start in range(0, held, step):
            self._write(name, state, _repeat(repeated, min(step, held - start)))

    def _write(self, name: str, state: dict, flat: np.ndarray) -> None:
        raw = flat.view(np.uint8)
        while raw.size:
            fill = state["fill"]
            take = min(self.chunk_bytes - fill, raw.size)
            if fill == 0 and take == self.chunk_bytes and self._queue is None:
                self._put(name, state, raw[:take])  # a whole chunk straight from the piece
            else:
                if state["buffer"] is None:
                    state["buffer"] = self._new_buffer()
                state["buffer"][fill : fill + take] = raw[:take]
                state["fill"] = fill + take
                if state["fill"] == self.chunk_bytes:
                    self._flush(name, state)
            raw = raw[take:]

    def _new_buffer(self) -> np.ndarray:
        try:
            return self._spare.pop()
        except IndexError:
            return np.empty(self.chunk_bytes, dtype=np.uint8)

    def _flush(self, name: str, state: dict) -> None:
        payload = state["buffer"][: state["fill"]]
        if self._queue is not None:
            state["buffer"] = None  # handed to the thread; the next piece gets a new buffer
        self._put(name, state, payload)
        state["fill"] = 0

    def _put(self, name: str, state: dict, payload: np.ndarray) -> None:
        if self.before_chunk is not None:
            self.before_chunk(int(payload.nbytes))
        key = keys.array_chunk(self.owner_key, name, state["chunks"])
        state["chunks"] += 1
        if self._queue is None:
            self._send(key, payload, state)
        else:
            self._queue.put((key, payload, state))

    def _send(self, key: str, payload: np.ndarray, state: dict) -> None:
        """Narrow one chunk where its elements allow (see ``narrowed_chunk``) and write it."""
        stored, width = narrowed_chunk(payload, np.dtype(state["dtype"]), self._narrow_out)
        self.client.set(key, stored.data, ex=STAGING_TTL_S)
        state["widths"].append(width)
        state["stored"] += int(stored.nbytes)

    def _send_loop(self) -> None:
        assert self._queue is not None
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                if self._error is None:
                    self._send(*item)
            except BaseException as exc:  # raised in the caller's thread by the next call
                self._error = exc
            finally:
                buffer = None if item is None else item[1].base
                if isinstance(buffer, np.ndarray) and buffer.size == self.chunk_bytes and len(self._spare) < 2:
                    self._spare.append(buffer)
                self._queue.task_done()

    def _wait(self) -> None:
        if self._queue is not None:
            self._queue.join()

    def _raise_error(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def manifest(self) -> dict[str, dict]:
        """Write what is left and return ``{name: {"dtype", "shape", "chunks"}}`` (and ``"fill"`` for an array
        of one repeated element, ``"encoding"``, ``"chunk_widths"`` and ``"stored_bytes"`` for one with narrowed
        chunks)."""
        out = {}
        for name, state in self._state.items():
            repeated = state["repeated"]
            if repeated is not None and state["held"] * repeated.itemsize >= FILL_MIN_BYTES:
                fill = repeated.tobytes().hex()
                out[name] = {"dtype": state["dtype"], "shape": [state["count"]], "chunks": 0, "fill": fill}
                continue
            if repeated is not None:
                self._write_held(name, state)
            if state["fill"] or state["chunks"] == 0:
                if state["buffer"] is None:
                    state["buffer"] = np.empty(0, dtype=np.uint8)
                self._flush(name, state)
            state["buffer"] = None
            out[name] = {"dtype": state["dtype"], "shape": [state["count"]], "chunks": state["chunks"]}
        self._wait()
        self._raise_error()
        for name, entry in out.items():  # the chunks' widths are known once every chunk is sent
            widths = self._state[name]["widths"]
            if entry["chunks"] and any(width != np.dtype(entry["dtype"]).itemsize for width in widths):
                entry.update(encoding=NARROW, chunk_widths=list(widths), stored_bytes=self._state[name]["stored"])
        return out

    def reset(self) -> None:
        """Delete everything written so far and start empty."""
        self.discard()
        self._state = {}

    def discard(self) -> None:
        """Delete the chunks written so far (best effort)."""
        self._wait()
        self._error = None
        written = {name: {"chunks": state["chunks"]} for name, state in self._state.items()}
        discard(self.client, self.owner_key, written)
        for state in self._state.values():
            state["chunks"] = 0
            state["widths"], state["stored"] = [], 0
            state["fill"] = 0
            state["buffer"] = None
            state["repeated"], state["held"] = None, 0

    def close(self) -> None:
        """Stop the background thread (after ``manifest`` or ``discard``)."""
        if self._thread is not None and self._queue is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None


def chunk_keys(owner_key: str, manifest: Mapping[str, dict]) -> list[str]:
    """Every Redis key holding a chunk of the arrays in the manifest."""
    return [
        keys.array_chunk(owner_key, name, index)
        for name, entry in manifest.items()
        for index in range(entry.get("chunks", 0))
    ]


def decoded_object(stored, entry: Mapping) -> np.ndarray:
    """An array stored as one object (a large model's: raw bytes, or the non-zero encoding), checked against the
    manifest's SHA-256 (KeyError when it does not match)."""
    raw = np.frombuffer(stored, dtype=np.uint8)
    if hashlib.sha256(raw.data).hexdigest() != entry["sha256"]:
        raise KeyError(f"the object {entry['object']} does not match its SHA-256")
    dtype = np.dtype(entry["dtype"])
    count = int(np.prod(entry["shape"], dtype=np.int64))
    if entry.get("encoding") == NONZERO:
        return nonzero_decoded(raw, dtype, count).reshape(entry["shape"])
    return raw.view(dtype).copy().reshape(entry["shape"])


def read(client: redis.Redis, owner_key: str, manifest: Mapping[str, dict], names=None) -> dict[str, np.ndarray]:
    """Read arrays back (all of them, or those named); raises KeyError if a chunk is missing."""
    out: dict[str, np.ndarray] = {}
    for name, entry in manifest.items():
        if names is not None and name not in names:
            continue
        dtype = np.dtype(entry["dtype"])
        count = int(np.prod(entry["shape"], dtype=np.int64))
        if entry.get("fill") is not None:
            out[name] = _filled(entry, count).reshape(entry["shape"])
            continue
        encoding = _encoding(entry, owner_key, name)
        if encoding == NARROW:
            out[name] = _read_narrow(client, owner_key, name, entry, dtype, count).reshape(entry["shape"])
            continue
        target = np.empty(int(entry["stored_bytes"]) if encoding else count * dtype.itemsize, dtype=np.uint8)
        offset = 0
        for index in range(entry["chunks"]):
            piece = _chunk(client, owner_key, name, index)
            target[offset : offset + len(piece)] = np.frombuffer(piece, dtype=np.uint8)
            offset += len(piece)
        if offset != target.size:
            raise KeyError(f"array {name!r} under {owner_key} has {offset} bytes, expected {target.size}")
        result = nonzero_decoded(target, dtype, count) if encoding else target.view(dtype)
        out[name] = result.reshape(entry["shape"])
    return out


def _chunk(client: redis.Redis, owner_key: str, name: str, index: int) -> bytes:
    """Chunk ``index`` of an array; KeyError if it is missing."""
    piece = client.get(keys.array_chunk(owner_key, name, index))
    if not isinstance(piece, bytes):
        raise KeyError(f"missing chunk {index} of array {name!r} under {owner_key}")
    return piece


def _read_narrow(client: redis.Redis, owner_key: str, name: str, entry: Mapping, dtype: np.dtype, count: int):
    """An array stored with narrowed chunks, widened back to ``dtype``."""
    out = np.empty(count, dtype=dtype)
    offset = 0
    for index, values in enumerate(_narrow_chunks(client, owner_key, name, entry, dtype)):
        if offset + values.size > count:
            raise KeyError(f"array {name!r} under {owner_key} has more than {count} elements (chunk {index})")
        out[offset : offset + values.size] = values
        offset += values.size
    if offset != count:
        raise KeyError(f"array {name!r} under {owner_key} has {offset} elements, expected {count}")
    return out


def _narrow_chunks(client: redis.Redis, owner_key: str, name: str, entry: Mapping, dtype: np.dtype):
    """Yield the chunks of an array stored with narrowed chunks, each widened back to ``dtype``."""
    widths = entry.get("chunk_widths") or []
    if len(widths) != entry["chunks"]:
        raise KeyError(f"array {name!r} under {owner_key} has {len(widths)} chunk widths for {entry['chunks']} chunks")
    for index, width in enumerate(widths):
        piece = _chunk(client, owner_key, name, index)
        if width not in (1, 2, dtype.itemsize) or len(piece) % width:
            raise KeyError(f"chunk {index} of array {name!r} under {owner_key} does not hold {width}-byte elements")
        yield _widened(piece, int(width), dtype)


def _encoding(entry: Mapping, owner_key: str, name: str) -> str | None:
    """The array's encoding (None: raw bytes); KeyError for one this version cannot read."""
    encoding = entry.get("encoding")
    if encoding not in (None, NONZERO, NARROW):
        raise KeyError(
            f"array {name!r} under {owner_key} is stored with encoding {encoding!r}, unknown to this version"
        )
    return encoding


def iter_chunks(client: redis.Redis, owner_key: str, name: str, entry: Mapping):
    """Yield the chunks of one array as bytes, in order; raises KeyError if one is missing. An array of one
    repeated element comes in pieces of READ_FILL_BYTES."""
    if entry.get("fill") is not None:
        count = int(np.prod(entry["shape"], dtype=np.int64))
        step = max(1, READ_FILL_BYTES // np.dtype(entry["dtype"]).itemsize)
        for start in range(0, count, step):
            yield _filled(entry, min(step, count - start)).tobytes()
        return
    encoding = _encoding(entry, owner_key, name)
    if encoding == NARROW:  # chunk by chunk, each widened back
        for values in _narrow_chunks(client, owner_key, name, entry, np.dtype(entry["dtype"])):
            yield values.tobytes()
        return
    if encoding:  # whole, then in pieces (arrays written by write_staged: models)
        whole = read(client, owner_key, {name: dict(entry)})[name].reshape(-1).view(np.uint8)
        for start in range(0, whole.size, READ_FILL_BYTES):
            yield whole[start : start + READ_FILL_BYTES].tobytes()
        return
    for index in range(entry["chunks"]):
        yield _chunk(client, owner_key, name, index)


def persist_commands(pipe, owner_key: str, manifest: Mapping[str, dict]) -> None:
    """Queue PERSIST of every chunk on a transaction pipeline (the commit that makes them last)."""
    for key in chunk_keys(owner_key, manifest):
        pipe.persist(key)


def discard(client: redis.Redis, owner_key: str, manifest: Mapping[str, dict]) -> None:
    """Delete staged or committed chunks (best effort clean-up after a failed write)."""
    names = chunk_keys(owner_key, manifest)
    for start in range(0, len(names), 1000):
        client.delete(*names[start : start + 1000])

"""Where the parser's text comes from: a plain or gzip file read in bounded blocks, or an upload still
being written (``FollowedFile``). See ``service.ingest.parser`` for how the blocks are parsed."""

from __future__ import annotations

import importlib
import json
import queue
import threading
import time
from types import ModuleType

from service.ingest.limits import UploadAborted

GZIP_MAGIC = b"\x1f\x8b"

INFLATERS = {"isal": "isal.isal_zlib", "zlib-ng": "zlib_ng.zlib_ng", "zlib": "zlib"}
"""The gzip inflaters a parse may use, by name: modules with zlib's ``decompressobj`` and ``error``. isal
(Intel's ISA-L) inflates text 2.5-4x faster than zlib per CPU second, zlib-ng about 2-3x
(``tests/benchmarks/bench_upload.py``); zlib-ng is imported only when chosen (an optional package)."""

DEFAULT_INFLATER = "isal"


def inflater_module(name: str) -> ModuleType:
    """The module of the inflater called ``name`` (see ``INFLATERS``); ValueError for an unknown name."""
    try:
        return importlib.import_module(INFLATERS[name])
    except KeyError:
        raise ValueError(f"gzip inflater must be one of {', '.join(INFLATERS)}, got {name!r}") from None


class GzipError(Exception):
    """The compressed stream is broken; converted to UploadParseError where the text stopped."""


class TextLimit(Exception):
    """More text than max_decompressed_bytes; ``prefix`` is the allowed part of the last block."""

    def __init__(self, prefix: bytes):
        super().__init__("max_decompressed_bytes")
        self.prefix = prefix


class PlainSource:
    """The blocks of a plain text file, at most ``chunk`` bytes each and ``budget`` in all (then TextLimit)."""

    def __init__(self, f, chunk: int, budget: int):
        self.f, self.chunk, self.budget, self.total = f, chunk, budget, 0

    def __iter__(self):
        while True:
            block = self.f.read(min(self.chunk, self.budget - self.total + 1))
            if not block:
                return
            self.total += len(block)
            if self.total > self.budget:
                raise TextLimit(block[: len(block) - (self.total - self.budget)])
            yield block


class GzipSource:
    """The inflated blocks of a gzip file (members one after the other), as ``PlainSource`` gives plain text.

    ``inflater``: a module of ``INFLATERS`` (zlib's interface); isal by default."""

    def __init__(self, f, chunk: int, budget: int, inflater: ModuleType | None = None):
        self.f, self.chunk, self.budget, self.total = f, chunk, budget, 0
        self.inflater = inflater if inflater is not None else inflater_module(DEFAULT_INFLATER)

    def _emit(self, out: bytes):
        self.total += len(out)
        if self.total > self.budget:
            raise TextLimit(out[: len(out) - (self.total - self.budget)])
        return out

    def __iter__(self):
        f, chunk, inflater = self.f, self.chunk, self.inflater
        d = inflater.decompressobj(wbits=31)
        pending = b""  # compressed bytes not yet given to d
        while True:
            if d.eof:
                pending = d.unused_data + pending
                while len(pending) < 2:
                    more = f.read(chunk)
                    if not more:
                        break
                    pending += more
                if not pending:
                    return
                if pending[:2] != GZIP_MAGIC:
                    while not pending.strip(b"\0"):  # zero padding after the last member is ignored
                        pending = f.read(chunk)
                        if not pending:
                            return
                    raise GzipError("unexpected bytes after the end of the gzip data")
                d = inflater.decompressobj(wbits=31)
            if not pending:
                pending = f.read(chunk)
                if not pending:
                    # input exhausted before the end-of-stream marker: drain, then complain
                    while True:
                        try:
                            out = d.decompress(b"", min(chunk, self.budget - self.total + 1))
                        except inflater.error as exc:
                            raise GzipError(f"corrupt gzip data ({exc})") from None
                        if not out:
                            break
                        yield self._emit(out)
                    if d.eof:
                        continue
                    raise GzipError("gzip data is truncated (the compressed stream ends before its end marker)")
            try:
                out = d.decompress(pending, min(chunk, self.budget - self.total + 1))
            except inflater.error as exc:
                raise GzipError(f"corrupt gzip data ({exc})") from None
            if not out and not d.eof and d.unconsumed_tail == pending:
                raise GzipError("corrupt gzip data (the decompressor makes no progress)")
            pending = d.unconsumed_tail
            if out:
                yield self._emit(out)


class ReadAhead:
    """The blocks of ``source`` (a ``PlainSource`` or ``GzipSource``), read ``depth`` blocks ahead in a helper thread.

    The helper reads and inflates while the caller parses the block before (the inflaters, file reads and
    the parser's kernel release the GIL), so a gzip upload costs the longer of the two instead of their sum.
    The source's exceptions reach the caller in order, after the blocks it gave before them (so its
    ``total`` is then final). Use it as a context manager: leaving stops the helper, calling ``cancel``
    (``FollowedFile.cancel``) to end a wait for more of the upload, and joins it before the file is closed.
    """

    def __init__(self, source, depth: int = 2, cancel=None):
        self.source = source
        self._cancel = cancel
        self._queue: queue.Queue = queue.Queue(maxsize=max(1, depth))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="upload-read-ahead", daemon=True)

    def __enter__(self) -> ReadAhead:
        self._thread.start()
        return self

    def _put(self, item) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        try:
            for block in self.source:
                if not self._put(("block", block)):
                    return
            self._put(("end", None))
        except BaseException as exc:  # handed to the caller, in order
            self._put(("error", exc))

    def __iter__(self):
        while True:
            kind, value = self._queue.get()
            if kind == "block":
                yield value
            elif kind == "end":
                return
            else:
                raise value

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._cancel is not None:
            self._cancel()
        self._thread.join()


class FollowedFile:
    """A spooled upload that the API is still writing, read as it grows.

    ``read(n)`` returns at least ``min(n, min_piece)`` bytes, or what is left once the upload is
    complete: at the end of what is written so far it waits (polling every ``poll_s``) until more
    arrives or the writer's marker file says the upload is ``complete`` (then the rest is read and the
    end reported) or ``aborted`` (``UploadAborted``). The marker is a JSON file written once, by
    rename, after the spool file was closed. Why a least piece: the parser outruns the network, and
    handed the API's 64 KB writes one by one it spent more on each piece than on its text (a 298 MB
    a9a-like upload: 1.2 s of CPU in the ingest process against 0.6 s).
    """

    growing = True

    def __init__(self, path, marker, poll_s: float = 0.005, min_piece: int = 1 << 20):
        self.path = path
        self.marker = marker
        self.poll_s = poll_s
        self.min_piece = min_piece
        self.f = open(path, "rb")
        self.outcome: dict | None = None
        self.cancelled = False

    def _status(self) -> dict | None:
        try:
            with open(self.marker, "rb") as fh:
                return json.loads(fh.read())
        except FileNotFoundError:
            return None

    def read(self, n: int = -1) -> bytes:
        """Up to n bytes (all that is written when n < 0), at least ``min(n, min_piece)`` until the upload is
        complete; b"" only at the end of a complete upload."""
        least = 1 if n < 0 else min(n, self.min_piece)
        parts: list[bytes] = []
        got = 0
        while True:
            piece = self.f.read(n - got if n >= 0 else -1)
            if piece:
                parts.append(piece)
                got += len(piece)
            if got >= least or self.outcome is not None:
                return b"".join(parts)
            if self.cancelled:
                raise UploadAborted("the parse stopped before the end of the upload")
            status = self._status()
            if status is None:
                time.sleep(self.poll_s)
                continue
            if status.get("status") != "complete":
                raise UploadAborted(status.get("reason", "the upload was abandoned"))
            self.outcome = status  # everything is written now: read on to the real end

    def cancel(self) -> None:
        """Make a ``read`` waiting for more of the upload give up (the parse stopped early, e.g. on an error)."""
        self.cancelled = True

    def seek(self, offset: int) -> int:
        """Move the read position (only used to re-read from the start)."""
        return self.f.seek(offset)

    def close(self) -> None:
        """Close the file."""
        self.f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

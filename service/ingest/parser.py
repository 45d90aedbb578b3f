"""Streaming parser for uploaded data sets: svmlight/libsvm or CSV text, plain or gzip.

Runs only inside the ingest processes (it imports numba through ``parse_kernels``); the API
process spools the upload to a file and hands its path to ``parse_upload``.

How a file is read:

1. The first two bytes decide gzip (1f 8b) or plain text. Gzip is inflated with
   ``zlib.decompressobj`` in bounded steps (never more than one chunk of output per step, never
   more than ``max_decompressed_bytes + 1`` bytes in total), so a gzip bomb stops at the limit.
   Concatenated gzip members are read like ``gzip`` does; zero padding after the last one is
   ignored.
2. The text arrives in chunks of ``_CHUNK_BYTES``. The complete lines of the carried-over text plus
   the new chunk go to a numba kernel (``parse_kernels.svm_chunk`` / ``csv_chunk``) which appends
   rows to growing CSR arrays; the unfinished last line is carried into the next round. A line
   longer than a chunk just makes the carry grow, up to ``max_line_bytes`` (then the upload is
   refused, so a 2 GB line is never held in memory).
3. Numbers the kernel cannot compute exactly (see ``parse_kernels``) are recorded by byte span and
   replaced here with Python's ``float`` before the chunk is dropped, so every value is exactly
   ``float(token)``.
4. After the last chunk: the zero-based question is settled (``"auto"``: zero-based iff some
   index is 0, as scikit-learn decides), the arrays are trimmed and returned.

Errors carry 1-based line and column numbers, the column being the byte offset in the line of the
offending token (counted after a UTF-8 byte-order mark on the first line, if any).

svmlight rules follow ``sklearn.datasets.load_svmlight_file``: ``label [qid:N] idx:val ...
[# comment]``, whitespace is any of space, tab, CR, VT, FF, explicit zeros are kept, a file with
no stored entry at all has ``n_features == 1`` (as scikit-learn). Stricter than scikit-learn:
NaN/inf, qid on some rows only, and number spellings outside ``[+-]?(d+[.d*]|.d+)([eE][+-]?d+)?``
(such as ``1_000``) are errors.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import time
import zlib
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from service.ingest import parse_kernels as K

__all__ = [
    "ArrayCollector",
    "FollowedFile",
    "ParseLimits",
    "ParseSummary",
    "ParsedData",
    "UploadAborted",
    "UploadLimitError",
    "UploadParseError",
    "parse_into",
    "parse_upload",
    "warm_up",
]

_CHUNK_BYTES = 4 << 20  # text handed to one kernel call (tests shrink it)
_SLOW_CAP = 4096  # initial capacity of the slow-token buffer (tests shrink it)
_GZIP_MAGIC = b"\x1f\x8b"
_BOM = b"\xef\xbb\xbf"
_TOKEN_CHARS = 40
_INT64_LIMIT = 1 << 62


@dataclass(frozen=True)
class ParseLimits:
    """Upper bounds on an upload; crossing one raises ``UploadLimitError``."""

    max_decompressed_bytes: int  # bytes of text after gunzip (gzip bombs)
    max_rows: int
    max_features: int  # largest feature count allowed
    max_nnz: int
    max_line_bytes: int = 1 << 62  # longest line: the carried-over unfinished line never grows past it


@dataclass(frozen=True)
class ParsedData:
    """A parsed data set: CSR matrix (zero-based int32 indices), labels, optional query ids."""

    indptr: np.ndarray  # int64, n_rows + 1
    indices: np.ndarray  # int32, zero-based, strictly increasing within a row
    data: np.ndarray  # float64, or float32 (value_dtype); svmlight explicit zeros kept, CSV zeros dropped
    y: np.ndarray  # float64
    qid: np.ndarray | None  # int64 per row, None when the file has no qid
    n_features: int
    zero_based: bool  # how the file's indices were read ("auto" resolved); CSV: False
    feature_names: list[str] | None  # CSV header without the label column; None for svmlight
    text_bytes: int  # decompressed size that was parsed
    compressed: bool  # input was gzip


class UploadParseError(ValueError):
    """The upload is not valid text of its format (HTTP 422); ``line``/``column`` are 1-based."""

    def __init__(self, line: int, column: int, reason: str):
        super().__init__(f"line {line}, column {column}: {reason}" if line > 0 else reason)
        self.line = int(line)
        self.column = int(column)
        self.reason = reason

    def __reduce__(self):
        return (type(self), (self.line, self.column, self.reason))


def _csv_hint(label: bytes, line: int, csv: bool) -> str:
    """How to fix a CSV file sent as svmlight (the default format): its first field holds commas."""
    if csv or b"," not in label:
        return ""
    what = "a CSV header line" if line == 1 and any(c.isalpha() for c in label.decode("latin-1")) else "CSV"
    return f"; this looks like {what}: send format=csv (POST /v1/datasets?format=csv, label_column names the label)"


class UploadLimitError(ValueError):
    """The upload crosses a configured limit (HTTP 413)."""

    def __init__(self, limit: str, value: int, line: int | None = None):
        where = f" (crossed at line {line})" if line is not None else ""
        super().__init__(f"the upload exceeds the limit {limit} = {value}{where}")
        self.limit = limit
        self.value = int(value)
        self.line = line

    def __reduce__(self):
        return (type(self), (self.limit, self.value, self.line))


# ---------------------------------------------------------------------------------------------
# text sources


class _GzipError(Exception):
    """The compressed stream is broken; converted to UploadParseError where the text stopped."""


class _TextLimit(Exception):
    """More text than max_decompressed_bytes; ``prefix`` is the allowed part of the last block."""

    def __init__(self, prefix: bytes):
        super().__init__("max_decompressed_bytes")
        self.prefix = prefix


class _PlainSource:
    def __init__(self, f, chunk: int, budget: int):
        self.f, self.chunk, self.budget, self.total = f, chunk, budget, 0

    def __iter__(self):
        while True:
            block = self.f.read(min(self.chunk, self.budget - self.total + 1))
            if not block:
                return
            self.total += len(block)
            if self.total > self.budget:
                raise _TextLimit(block[: len(block) - (self.total - self.budget)])
            yield block


class _GzipSource:
    def __init__(self, f, chunk: int, budget: int):
        self.f, self.chunk, self.budget, self.total = f, chunk, budget, 0

    def _emit(self, out: bytes):
        self.total += len(out)
        if self.total > self.budget:
            raise _TextLimit(out[: len(out) - (self.total - self.budget)])
        return out

    def __iter__(self):
        f, chunk = self.f, self.chunk
        d = zlib.decompressobj(wbits=31)
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
                if pending[:2] != _GZIP_MAGIC:
                    while not pending.strip(b"\0"):  # zero padding after the last member is ignored
                        pending = f.read(chunk)
                        if not pending:
                            return
                    raise _GzipError("unexpected bytes after the end of the gzip data")
                d = zlib.decompressobj(wbits=31)
            if not pending:
                pending = f.read(chunk)
                if not pending:
                    # input exhausted before the end-of-stream marker: drain, then complain
                    while True:
                        try:
                            out = d.decompress(b"", min(chunk, self.budget - self.total + 1))
                        except zlib.error as exc:
                            raise _GzipError(f"corrupt gzip data ({exc})") from None
                        if not out:
                            break
                        yield self._emit(out)
                    if d.eof:
                        continue
                    raise _GzipError("gzip data is truncated (the compressed stream ends before its end marker)")
            try:
                out = d.decompress(pending, min(chunk, self.budget - self.total + 1))
            except zlib.error as exc:
                raise _GzipError(f"corrupt gzip data ({exc})") from None
            if not out and not d.eof and d.unconsumed_tail == pending:
                raise _GzipError("corrupt gzip data (the decompressor makes no progress)")
            pending = d.unconsumed_tail
            if out:
                yield self._emit(out)


# ---------------------------------------------------------------------------------------------
# messages


def _quote(raw: bytes) -> str:
    text = raw.decode("utf-8", "backslashreplace")
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    if len(text) > _TOKEN_CHARS:
        text = text[:_TOKEN_CHARS] + "..."
    return "'" + text + "'"


def _binary_hint(raw: bytes) -> str:
    try:
        raw.decode("utf-8")
        bad = any(b < 32 and b not in (9, 10, 11, 12, 13) or b == 127 for b in raw)
    except UnicodeDecodeError:
        bad = True
    return " (binary data or text that is not UTF-8: is this the right file?)" if bad else ""


def _short_name(name: str) -> str:
    return repr(name if len(name) <= _TOKEN_CHARS else name[:_TOKEN_CHARS] + "...")


# ---------------------------------------------------------------------------------------------
# the driver


class _Restart(Exception):
    """The text must be parsed again from its start: "widen" (float64 values) or "zero_based"."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class UploadAborted(Exception):
    """The upload being followed was abandoned by its writer (nothing is stored)."""


@dataclass(frozen=True)
class ParseSummary:
    """What a parse produced besides the arrays it handed to its sink."""

    n_rows: int
    nnz: int
    n_features: int
    zero_based: bool  # how the file's indices were read ("auto" resolved); CSV: False
    feature_names: list[str] | None
    text_bytes: int
    compressed: bool
    has_qid: bool
    label_counts: dict  # label value (float) -> rows
    value_dtype: str  # "float32" or "float64": how ``data`` was stored


class ArrayCollector:
    """A sink that keeps the parsed arrays in memory (``parse_upload``); others stream them elsewhere.

    A sink receives ``append(name, array)`` calls for the arrays ``indptr`` (int64, starting with
    0), ``indices`` (int32), ``data`` (float32 or float64), ``y`` (float64) and ``qid`` (int64,
    only when the file has qids), each piece to be consumed at once (the parser reuses its
    buffers), and ``reset()`` when the parse starts over.
    """

    def __init__(self) -> None:
        self.pieces: dict[str, list[np.ndarray]] = {}

    def reset(self) -> None:
        """Forget everything appended so far."""
        self.pieces = {}

    def append(self, name: str, array: np.ndarray) -> None:
        """Keep a copy of the next piece of an array."""
        self.pieces.setdefault(name, []).append(np.array(array, copy=True))

    def arrays(self) -> dict[str, np.ndarray]:
        """The whole arrays."""
        return {name: np.concatenate(parts) for name, parts in self.pieces.items()}


class _Builder:
    """Feeds chunks of text to a kernel; after each chunk hands its rows to the sink and empties its buffers."""

    def __init__(self, fmt: str, mode: int, vmode: int, label_column: str, limits: ParseLimits, sink):
        self.csv = fmt == "csv"
        self.mode = mode
        self.vmode = vmode
        self.label_column = label_column
        self.limits = limits
        self.sink = sink
        self.max_rows = max(0, min(int(limits.max_rows), _INT64_LIMIT))
        self.max_nnz = max(0, min(int(limits.max_nnz), _INT64_LIMIT))
        self.max_features = max(0, min(int(limits.max_features), _INT64_LIMIT))
        st = np.zeros(K.N_STATE, dtype=np.int64)
        st[K.S_HAS_QID] = -1
        st[K.S_MAX_IDX] = -1
        st[K.S_MIN_IDX] = _INT64_LIMIT
        self.st = st
        self.value_dtype = np.float64 if vmode == K.VAL_F64 else np.float32
        self.row_cap = 0
        self.nnz_cap = 0
        self.indptr = np.zeros(1, dtype=np.int64)
        self.y = np.empty(0, dtype=np.float64)
        self.qid = np.empty(0, dtype=np.int64)
        self.indices = np.empty(0, dtype=np.int32)
        self.data = np.empty(0, dtype=self.value_dtype)
        self.slow = np.empty((_SLOW_CAP, 4), dtype=np.int64)
        self.rows_done = 0  # rows handed to the sink
        self.nnz_done = 0
        self.label_counts: dict[float, int] = {}
        self.started = False
        self.base = 0  # where the first line of the current buffer starts (a BOM is skipped)
        self.names: list[str] | None = None
        self.n_cols = 0
        self.label_col = -1
        self.csv_zero_from_slow = False
        sink.append("indptr", np.zeros(1, dtype=np.int64))

    # -- capacity ---------------------------------------------------------------------------

    def _ensure(self, buf: bytearray, pos: int, end: int) -> None:
        """Make room for every row and entry that buf[pos:end] can hold.

        Bounds from the length alone (counting separators would cost a pass over the text): a row
        takes at least 2 bytes (a label digit and a newline), an svmlight entry at least 4 ("i:v" and
        a space before it), a CSV cell at least 2 ("v,"). The arrays come from np.empty: pages that
        are never written cost no memory.
        """
        size = end - pos
        rows = size // 2 + 1
        entries = size // 2 + 1 if self.csv else size // 4 + 1
        need_rows = min(rows, self.max_rows - self.rows_done)
        need_nnz = min(entries, self.max_nnz - self.nnz_done)
        if need_rows > self.row_cap:
            cap = max(need_rows, 1)
            self.indptr = np.zeros(cap + 1, dtype=np.int64)
            self.y = np.empty(cap, dtype=np.float64)
            self.qid = np.empty(cap, dtype=np.int64)
            self.row_cap = cap
        if need_nnz > self.nnz_cap:
            cap = max(need_nnz, 1)
            self.indices = np.empty(cap, dtype=np.int32)
            self.data = np.empty(cap, dtype=self.value_dtype)
            self.nnz_cap = cap

    # -- one buffer of complete lines -------------------------------------------------------

    def feed(self, buf: bytearray, end: int) -> None:
        """Parse the lines in buf[:end] (complete lines, or the last piece of the text) and emit their rows."""
        pos = 0
        if not self.started:
            self.started = True
            if buf.startswith(_BOM):
                pos = len(_BOM)
        self.base = pos
        if self.csv and self.names is None:
            nl = buf.find(b"\n", pos, end)
            stop = end if nl < 0 else nl
            self._header(bytes(buf[pos:stop]), pos)
            pos = end if nl < 0 else nl + 1
            self.st[K.S_LINE] = 1
            self.base = pos
        if pos >= end:
            return
        st = self.st
        st[K.S_POS] = pos
        self._ensure(buf, pos, end)
        arr = np.frombuffer(buf, dtype=np.uint8)
        rows_left = self.max_rows - self.rows_done
        nnz_left = self.max_nnz - self.nnz_done
        while True:
            if self.csv:
                status = K.csv_chunk(
                    arr, end, st, self.indptr, self.indices, self.data, self.y, self.slow,
                    self.n_cols, self.label_col, self.vmode, rows_left, nnz_left,
                )  # fmt: skip
            else:
                status = K.svm_chunk(
                    arr, end, st, self.indptr, self.indices, self.data, self.y, self.qid, self.slow,
                    self.mode, self.vmode, rows_left, self.max_features, nnz_left,
                )  # fmt: skip
            committed = int(st[K.S_NSLOW])
            if status == K.ST_WIDEN:
                raise _Restart("widen")
            if status == K.ST_ZERO_BASED:
                raise _Restart("zero_based")
            self._flush_slow(buf)
            if status == K.ST_DONE:
                del arr
                self._emit()
                return
            if status == K.ST_FULL:
                if committed < self.slow.shape[0] // 2:
                    self.slow = np.empty((2 * self.slow.shape[0], 4), dtype=np.int64)
                continue
            del arr
            self._raise_kernel_error(buf)

    def _emit(self) -> None:
        """Hand the rows parsed from the current buffer to the sink and empty the buffers."""
        st = self.st
        n, z = int(st[K.S_NROWS]), int(st[K.S_NNZ])
        if n == 0:
            return
        indptr, indices, data = self.indptr[: n + 1], self.indices[:z], self.data[:z]
        if self.csv_zero_from_slow:  # a CSV cell whose slow value turned out to be 0: not stored
            keep = data != 0.0
            rows = np.repeat(np.arange(n), np.diff(indptr))
            indptr = np.concatenate(([0], np.cumsum(np.bincount(rows[keep], minlength=n)))).astype(np.int64)
            indices, data = indices[keep], data[keep]
            z = int(indices.size)
            self.csv_zero_from_slow = False
        sink = self.sink
        sink.append("indptr", indptr[1:] + self.nnz_done)
        sink.append("indices", indices)
        sink.append("data", data)
        y = self.y[:n]
        sink.append("y", y)
        if st[K.S_HAS_QID] == 1:
            sink.append("qid", self.qid[:n])
        values, counts = np.unique(y, return_counts=True)
        for value, count in zip(values.tolist(), counts.tolist()):
            self.label_counts[value] = self.label_counts.get(value, 0) + count
        self.rows_done += n
        self.nnz_done += z
        st[K.S_NROWS] = 0
        st[K.S_NNZ] = 0
        self.indptr[0] = 0

    def _flush_slow(self, buf: bytearray) -> None:
        n = int(self.st[K.S_NSLOW])
        if not n:
            return
        self.st[K.S_NSLOW] = 0
        data, y = self.data, self.y
        for slot, start, stop, line in self.slow[:n].tolist():
            value = float(buf[start:stop])
            if not math.isfinite(value):
                raw = bytes(buf[start:stop])
                if self.csv:
                    what = "label" if slot < 0 else "value"
                else:
                    what = "label" if slot < 0 else "feature value"
                column = start - self._line_start(buf, start) + 1
                raise UploadParseError(line, column, f"{what} {_quote(raw)} is not a finite number (overflows float64)")
            if slot < 0:
                y[-slot - 1] = value
                continue
            if self.vmode != K.VAL_F64:
                text = bytes(buf[start:stop])
                single = nearest_float32(text)
                if self.vmode == K.VAL_AUTO and not recoverable_float32(text, single):
                    raise _Restart("widen")
                if math.isinf(single):
                    column = start - self._line_start(buf, start) + 1
                    raise UploadParseError(line, column, _f32_overflow(text))
                value = single
            data[slot] = value
            if value == 0.0 and self.csv:
                self.csv_zero_from_slow = True

    def _raise_kernel_error(self, buf: bytearray):
        st = self.st
        code = int(st[K.S_ERR])
        start, stop = int(st[K.S_ERR_START]), int(st[K.S_ERR_END])
        line, ls, aux = int(st[K.S_ERR_LINE]), int(st[K.S_ERR_LINE_START]), int(st[K.S_ERR_AUX])
        column = start - ls + 1
        raw = bytes(buf[start:stop])
        tok = _quote(raw)
        hint = _binary_hint(raw)
        no_nan = " (NaN and infinity are not allowed)"
        if code == K.E_LIMIT_ROWS:
            raise UploadLimitError("max_rows", self.limits.max_rows, line)
        if code == K.E_LIMIT_NNZ:
            raise UploadLimitError("max_nnz", self.limits.max_nnz, line)
        if code == K.E_LIMIT_FEATURES:
            raise UploadLimitError("max_features", self.limits.max_features, line)
        messages = {
            K.E_BAD_LABEL: f"bad label {tok}: not a number{hint}{_csv_hint(raw, line, self.csv)}",
            K.E_NONFINITE_LABEL: f"label {tok} is not a finite number{no_nan}",
            K.E_MISSING_LABEL: f"missing label: the line starts with the feature {tok}"
            " (expected 'label [qid:N] index:value ...')",
            K.E_BAD_QID: f"bad qid {tok}: expected qid:<integer>{hint}",
            K.E_QID_MISSING: "mixed qid: earlier rows have a qid but this row has none",
            K.E_QID_UNEXPECTED: f"mixed qid: this row has {tok} but earlier rows have none",
            K.E_MISSING_COLON: f"missing ':' in feature {tok} (expected index:value){hint}",
            K.E_BAD_INDEX: f"bad feature index {tok}: expected a non-negative integer{hint}",
            K.E_NEGATIVE_INDEX: f"negative feature index {tok}",
            K.E_ZERO_INDEX: "feature index 0 in a one-based file (zero_based=False: indices start at 1)",
            K.E_INDEX_TOO_LARGE: f"feature index {tok} is too large (indices must fit in int32)",
            K.E_UNSORTED_INDEX: f"feature index {tok} comes after index {aux}:"
            " indices must be strictly increasing within a row",
            K.E_DUPLICATE_INDEX: f"duplicate feature index {tok} in the row",
            K.E_BAD_VALUE: f"bad feature value {tok}: not a number{hint}",
            K.E_NONFINITE_VALUE: f"feature value {tok} is not a finite number{no_nan}",
            K.E_F32_OVERFLOW: _f32_overflow(raw),
        }
        if self.csv and code == K.E_F32_OVERFLOW:
            messages = {K.E_F32_OVERFLOW: f"{_f32_overflow(raw)[len('feature value ') :]} in {self._column_name(aux)}"}
        elif self.csv and code in (K.E_CSV_EMPTY, K.E_CSV_BAD_NUMBER, K.E_CSV_NONFINITE):
            where = self._column_name(aux)
            messages = {
                K.E_CSV_EMPTY: f"empty cell in {where}",
                K.E_CSV_BAD_NUMBER: f"bad number {tok} in {where}{hint}",
                K.E_CSV_NONFINITE: f"{tok} in {where} is not a finite number{no_nan}",
            }
        elif code == K.E_CSV_RAGGED:
            messages = {K.E_CSV_RAGGED: f"wrong number of fields: expected {self.n_cols} as in the header, got {aux}"}
        reason = messages.get(code, f"unparsable text (internal error code {code})")
        raise UploadParseError(line, column, reason)

    def _column_name(self, col: int) -> str:
        assert self.names is not None
        return f"column {col + 1} ({_short_name(self.names[col])})"

    # -- CSV header --------------------------------------------------------------------------

    def _header(self, raw: bytes, offset: int) -> None:
        raw = raw.rstrip(b"\r")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UploadParseError(1, offset + exc.start + 1, "the CSV header is not UTF-8 text") from None
        if not text.strip():
            raise UploadParseError(1, 1, "empty CSV header: the first line must name the columns")
        try:
            names = next(csv.reader([text], strict=True))
        except csv.Error as exc:
            raise UploadParseError(1, 1, f"unreadable CSV header ({exc})") from None
        names = [name.strip() for name in names]
        where = [i for i, name in enumerate(names) if name == self.label_column]
        if not where:
            shown = ", ".join(_short_name(n) for n in names[:10])
            more = f" and {len(names) - 10} more" if len(names) > 10 else ""
            raise UploadParseError(
                1, 1, f"label column {_short_name(self.label_column)} is not in the CSV header (columns: {shown}{more})"
            )
        if len(where) > 1:
            raise UploadParseError(
                1, 1, f"label column {_short_name(self.label_column)} appears {len(where)} times in the CSV header"
            )
        if len(names) - 1 > self.max_features:
            raise UploadLimitError("max_features", self.limits.max_features, 1)
        if len(names) - 1 > K.INT32_MAX:
            raise UploadParseError(1, 1, "too many columns (feature indices must fit in int32)")
        self.names = names
        self.n_cols = len(names)
        self.label_col = where[0]

    def _line_start(self, buf: bytearray, offset: int) -> int:
        return max(buf.rfind(b"\n", 0, offset) + 1, self.base)

    # -- result ------------------------------------------------------------------------------

    def finish(self, text_bytes: int, compressed: bool) -> ParseSummary:
        st = self.st
        n_rows, nnz = self.rows_done, self.nnz_done
        if n_rows == 0:
            lines = int(st[K.S_LINE])
            if text_bytes == 0:
                raise UploadParseError(
                    0, 0, "the uploaded file is empty (0 bytes): send a file with one example per line"
                )
            if self.csv and self.names is None:
                raise UploadParseError(0, 0, "the file is empty (a CSV upload needs a header line and data rows)")
            what = "only a header" if self.csv else "only blank or comment lines"
            raise UploadParseError(0, 0, f"no data rows: the file has {lines} line(s), {what}")
        value_dtype = np.dtype(self.value_dtype).name
        if self.csv:
            assert self.names is not None
            names = self.names[: self.label_col] + self.names[self.label_col + 1 :]
            return ParseSummary(
                n_rows,
                nnz,
                len(names),
                False,
                names,
                int(text_bytes),
                bool(compressed),
                False,
                dict(self.label_counts),
                value_dtype,
            )
        zero_based = self.mode == K.MODE_ZERO_BASED or (self.mode == K.MODE_AUTO and nnz == 0)
        max_idx = int(st[K.S_MAX_IDX])
        if nnz == 0:
            n_features = 1  # as scikit-learn
        else:
            n_features = max_idx + 1 if zero_based else max_idx
        if n_features > self.max_features:
            raise UploadLimitError("max_features", self.limits.max_features, int(st[K.S_MAX_IDX_LINE]))
        return ParseSummary(
            n_rows,
            nnz,
            int(n_features),
            bool(zero_based),
            None,
            int(text_bytes),
            bool(compressed),
            bool(st[K.S_HAS_QID] == 1),
            dict(self.label_counts),
            value_dtype,
        )


# ---------------------------------------------------------------------------------------------
# float32 values decided in Python (the kernel's slow path)

_F32_MAX = float(np.finfo(np.float32).max)


def nearest_float32(text: bytes | str) -> float:
    """The float32 nearest to the decimal ``text`` (ties to even), as a Python float; +-inf beyond range.

    Rounds the exact decimal once (``fractions.Fraction``), never the double first.
    """
    exact = Fraction(text.decode() if isinstance(text, bytes) else text)
    with np.errstate(over="ignore"):
        first = float(np.float32(float(exact)))  # within one float32 step of the answer
        if math.isinf(first):
            # beyond the largest float32 plus half its step (2**104): infinity; else the largest float32
            limit = Fraction(_F32_MAX) + Fraction(2) ** 103
            return math.copysign(math.inf if abs(exact) >= limit else _F32_MAX, float(exact))
        candidates = {first}
        for direction in (math.inf, -math.inf):
            neighbour = float(np.nextafter(np.float32(first), np.float32(direction)))
            if math.isfinite(neighbour):
                candidates.add(neighbour)
    return min(candidates, key=lambda c: (abs(Fraction(c) - exact), _odd_mantissa(c)))


def _odd_mantissa(value: float) -> int:
    return int(np.array(value, dtype=np.float32).view(np.uint32)) & 1


def recoverable_float32(text: bytes | str, single: float) -> bool:
    """True when the float32 ``single`` gives back the decimal ``text`` exactly: the text has at most
    7 significant digits and ``single`` rounded to 7 significant digits is the text's value."""
    raw = text.decode() if isinstance(text, bytes) else text
    exact = Fraction(raw)
    if exact == 0:
        return single == 0.0
    if not math.isfinite(single):
        return False
    mantissa = raw.lower().split("e")[0].lstrip("+-").replace(".", "").lstrip("0").rstrip("0")
    if len(mantissa) > K.AUTO_MAX_DIGITS:
        return False
    return Fraction(format(single, f".{K.AUTO_MAX_DIGITS}g")) == exact


def _f32_overflow(text: bytes) -> str:
    return f"feature value {_quote(text)} is beyond the range of float32 (value_dtype=float32 was asked for)"


def _mode(zero_based) -> int:
    if isinstance(zero_based, str) and zero_based == "auto":
        return K.MODE_AUTO
    if zero_based is True:
        return K.MODE_ZERO_BASED
    if zero_based is False:
        return K.MODE_ONE_BASED
    raise ValueError(f"zero_based must be 'auto', True or False, got {zero_based!r}")


_VALUE_MODES = {"float64": K.VAL_F64, "float32": K.VAL_F32, "auto": K.VAL_AUTO}


def _vmode(value_dtype: str) -> int:
    try:
        return _VALUE_MODES[value_dtype]
    except KeyError:
        raise ValueError(f"value_dtype must be 'auto', 'float32' or 'float64', got {value_dtype!r}") from None


class FollowedFile:
    """A spooled upload that the API is still writing, read as it grows.

    ``read`` returns what is there; at the end of what is written so far it waits (polling every
    ``poll_s``) until more arrives or the writer's marker file says the upload is ``complete``
    (then the rest is read and the end reported) or ``aborted`` (``UploadAborted``). The marker is
    a JSON file written once, by rename, after the spool file was closed.
    """

    growing = True

    def __init__(self, path, marker, poll_s: float = 0.005):
        self.path = path
        self.marker = marker
        self.poll_s = poll_s
        self.f = open(path, "rb")
        self.outcome: dict | None = None

    def _status(self) -> dict | None:
        try:
            with open(self.marker, "rb") as fh:
                return json.loads(fh.read())
        except FileNotFoundError:
            return None

    def read(self, n: int = -1) -> bytes:
        """Up to n bytes (all that is written when n < 0); b"" only at the end of a complete upload."""
        while True:
            piece = self.f.read(n)
            if piece or self.outcome is not None:
                return piece
            status = self._status()
            if status is None:
                time.sleep(self.poll_s)
                continue
            if status.get("status") != "complete":
                raise UploadAborted(status.get("reason", "the upload was abandoned"))
            self.outcome = status  # everything is written now: read on to the real end

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


def _parse_once(
    f, *, fmt: str, mode: int, vmode: int, label_column: str, limits: ParseLimits, chunk: int, sink
) -> ParseSummary:
    budget = max(0, int(limits.max_decompressed_bytes))
    head = f.read(2)
    while 0 < len(head) < 2:  # a followed upload may so far hold a single byte
        more = f.read(1)
        if not more:
            break
        head += more
    f.seek(0)
    compressed = head == _GZIP_MAGIC
    if not compressed and not getattr(f, "growing", False):
        try:
            size = os.fstat(f.fileno()).st_size
        except (AttributeError, OSError, io.UnsupportedOperation):
            size = None
        if size is not None and size > budget:
            raise UploadLimitError("max_decompressed_bytes", limits.max_decompressed_bytes)
    source = (_GzipSource if compressed else _PlainSource)(f, chunk, budget)
    builder = _Builder(fmt, mode, vmode, label_column, limits, sink)
    buf = bytearray()
    try:
        for block in source:
            start = len(buf)
            buf += block
            nl = buf.rfind(b"\n", start)
            if nl < 0:
                if len(buf) > limits.max_line_bytes:
                    line = int(builder.st[K.S_LINE]) + 1
                    raise UploadLimitError("max_line_bytes", limits.max_line_bytes, line)
                continue
            builder.feed(buf, nl + 1)
            del buf[: nl + 1]
    except _TextLimit as exc:
        line = int(builder.st[K.S_LINE]) + buf.count(b"\n") + exc.prefix.count(b"\n") + 1
        raise UploadLimitError("max_decompressed_bytes", limits.max_decompressed_bytes, line) from None
    except _GzipError as exc:
        if source.total == 0:
            raise UploadParseError(0, 0, str(exc)) from None
        line = int(builder.st[K.S_LINE]) + buf.count(b"\n") + 1
        column = len(buf) - (buf.rfind(b"\n") + 1) + 1
        raise UploadParseError(line, column, f"{exc} after {source.total} bytes of text") from None
    if buf:
        builder.feed(buf, len(buf))
    return builder.finish(source.total, compressed)


def parse_into(
    sink,
    open_text,
    *,
    format: str = "svmlight",
    zero_based: str | bool = "auto",
    value_dtype: str = "float64",
    label_column: str = "label",
    limits: ParseLimits,
    _chunk_bytes: int | None = None,
) -> ParseSummary:
    """Parse the text that ``open_text()`` opens (a binary file, plain or gzip) into ``sink``.

    ``sink``: see ``ArrayCollector``. ``value_dtype``: "float64" (values as Python's float),
    "float32" (the float32 nearest to each decimal) or "auto" (float32 when every value is
    recoverable from it, else float64; see ``parse_kernels``). A parse that learns late that it
    needs float64 values, or (``zero_based="auto"``) that the file is zero-based, starts over:
    ``sink.reset()`` and ``open_text()`` again. Raises UploadParseError, UploadLimitError or
    (followed uploads) UploadAborted.
    """
    fmt = {"svmlight": "svmlight", "libsvm": "svmlight", "csv": "csv"}.get(format)
    if fmt is None:
        raise ValueError(f"format must be 'svmlight', 'libsvm' or 'csv', got {format!r}")
    mode = _mode(zero_based)
    vmode = _vmode(value_dtype)
    chunk = int(_chunk_bytes if _chunk_bytes is not None else _CHUNK_BYTES)
    if chunk < 1:
        raise ValueError(f"_chunk_bytes must be >= 1, got {chunk}")
    while True:
        with open_text() as f:
            try:
                return _parse_once(
                    f, fmt=fmt, mode=mode, vmode=vmode, label_column=label_column, limits=limits, chunk=chunk, sink=sink
                )
            except _Restart as restart:
                sink.reset()
                if restart.reason == "widen":
                    vmode = K.VAL_F64
                else:
                    mode = K.MODE_ZERO_BASED


def parse_upload(
    path,
    *,
    format: str = "svmlight",
    zero_based: str | bool = "auto",
    value_dtype: str = "float64",
    label_column: str = "label",
    limits: ParseLimits,
    _chunk_bytes: int | None = None,
) -> ParsedData:
    """Parse the spooled upload at ``path`` (plain or gzip text) into CSR arrays and labels, in memory.

    ``format``: "svmlight" (alias "libsvm") or "csv". ``zero_based``: "auto", True or False
    (svmlight only). ``value_dtype``: see ``parse_into``. ``label_column``: the CSV header name of
    the label column. Raises UploadParseError (bad text, with line and column) or UploadLimitError
    (a limit crossed).
    """
    sink = ArrayCollector()
    summary = parse_into(
        sink,
        lambda: open(path, "rb"),
        format=format,
        zero_based=zero_based,
        value_dtype=value_dtype,
        label_column=label_column,
        limits=limits,
        _chunk_bytes=_chunk_bytes,
    )
    arrays = sink.arrays()
    return ParsedData(
        arrays["indptr"],
        arrays["indices"],
        arrays["data"],
        arrays["y"],
        arrays.get("qid"),
        summary.n_features,
        summary.zero_based,
        summary.feature_names,
        summary.text_bytes,
        summary.compressed,
    )


_WARM_SVM = b"# warm-up\n+1 qid:3 1:0.5 3:1e-320 7:2.5e300\n-2.0 qid:4 2:1.2345678901234567890123 4:-0\n"
_WARM_CSV = b"a,label,b\n1.5,1,0\n0,-1,1e-400\n"


def warm_up() -> None:
    """Compile (or load from numba's cache) every kernel, for float64 and float32 values, on tiny samples."""
    limits = ParseLimits(1 << 20, 1000, 1000, 1000)
    for value_dtype in ("float64", "auto"):
        for text, fmt in ((_WARM_SVM, "svmlight"), (_WARM_CSV, "csv")):
            parse_into(
                ArrayCollector(),
                lambda text=text: io.BytesIO(text),
                format=fmt,
                value_dtype=value_dtype,
                limits=limits,
                _chunk_bytes=64,
            )
    starts = np.zeros(1, dtype=np.int64)
    ends = np.ones(1, dtype=np.int64)
    K.parse_numbers(np.frombuffer(bytearray(b"1"), dtype=np.uint8), starts, ends, np.empty(1), np.empty(1, np.int64))

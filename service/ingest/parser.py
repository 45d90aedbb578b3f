"""Streaming parser for uploaded data sets: svmlight/libsvm or CSV text, plain or gzip.

Runs only inside the ingest processes (it imports numba through ``parse_kernels``); the API
process spools the upload to a file and hands its path to ``parse_upload``.

How a file is read:

1. The first two bytes decide gzip (1f 8b) or plain text. Gzip is inflated with the ``decompressobj`` of
   the chosen inflater (ISA-L's ``isal.isal_zlib`` by default, zlib-ng or zlib on request: the same
   interface) in bounded steps (never more than one chunk of output per step, never more than
   ``max_decompressed_bytes + 1`` bytes in total), so a gzip bomb stops at the limit. Concatenated gzip
   members are read like ``gzip`` does; zero padding after the last one is ignored.
2. The text arrives in chunks of ``_CHUNK_BYTES``. The complete lines of the carried-over text plus
   the new chunk go to a numba kernel (``parse_kernels.svm_chunk`` / ``csv_chunk``) which appends
   rows to growing CSR arrays; the unfinished last line is carried into the next round. A line
   longer than a chunk just makes the carry grow, up to ``max_line_bytes`` (then the upload is
   refused, so a 2 GB line is never held in memory).
3. Numbers the kernel cannot compute exactly (see ``number_kernels``) are recorded by byte span and
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

The parts, one job each: ``sources`` reads the text (plain or gzip blocks, an upload still being
written), ``builder`` runs the chunks through the svmlight and CSV kernels and hands the rows to the
sink, ``values`` rounds the slow path's decimals to float32, ``limits`` holds the limits, the errors
and the words of their messages. This module drives them (``parse_into``, ``parse_upload``).
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass

import numpy as np

from service.ingest import parse_kernels as K
from service.ingest.builder import Builder, ParseSummary, Restart
from service.ingest.limits import ParseLimits, UploadAborted, UploadLimitError, UploadParseError
from service.ingest.number_kernels import VAL_AUTO, VAL_F32, VAL_F64, parse_numbers
from service.ingest.sources import (
    DEFAULT_INFLATER,
    GZIP_MAGIC,
    FollowedFile,
    GzipError,
    GzipSource,
    PlainSource,
    ReadAhead,
    TextLimit,
    inflater_module,
)
from service.ingest.values import nearest_float32, recoverable_float32

__all__ = [
    "ArrayCollector",
    "FollowedFile",
    "ParseLimits",
    "ParseSummary",
    "ParsedData",
    "UploadAborted",
    "UploadLimitError",
    "UploadParseError",
    "nearest_float32",
    "parse_into",
    "parse_upload",
    "recoverable_float32",
    "warm_up",
]

_CHUNK_BYTES = 4 << 20  # text handed to one kernel call (tests shrink it)
_MIN_CHUNK_BYTES = 64 << 10


def chunk_bytes_for(shard_bytes: int) -> int:
    """Text a kernel call takes when its arrays go into shards of ``shard_bytes``: a shard is cut between two
    calls, so a chunk of at most half a shard (text takes about as many bytes as its arrays) lets shards smaller
    than _CHUNK_BYTES be cut near their size; 64 KiB at least (a call costs microseconds)."""
    return int(min(_CHUNK_BYTES, max(_MIN_CHUNK_BYTES, shard_bytes // 2)))


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


def _mode(zero_based) -> int:
    if isinstance(zero_based, str) and zero_based == "auto":
        return K.MODE_AUTO
    if zero_based is True:
        return K.MODE_ZERO_BASED
    if zero_based is False:
        return K.MODE_ONE_BASED
    raise ValueError(f"zero_based must be 'auto', True or False, got {zero_based!r}")


_VALUE_MODES = {"float64": VAL_F64, "float32": VAL_F32, "auto": VAL_AUTO}


def _vmode(value_dtype: str) -> int:
    try:
        return _VALUE_MODES[value_dtype]
    except KeyError:
        raise ValueError(f"value_dtype must be 'auto', 'float32' or 'float64', got {value_dtype!r}") from None


def _parse_once(
    f,
    *,
    fmt: str,
    mode: int,
    vmode: int,
    label_column: str,
    limits: ParseLimits,
    chunk: int,
    sink,
    inflater,
    labelled: bool = True,
) -> ParseSummary:
    budget = max(0, int(limits.max_decompressed_bytes))
    head = f.read(2)
    while 0 < len(head) < 2:  # a followed upload may so far hold a single byte
        more = f.read(1)
        if not more:
            break
        head += more
    f.seek(0)
    compressed = head == GZIP_MAGIC
    if not compressed and not getattr(f, "growing", False):
        try:
            size = os.fstat(f.fileno()).st_size
        except (AttributeError, OSError, io.UnsupportedOperation):
            size = None
        if size is not None and size > budget:
            raise UploadLimitError("max_decompressed_bytes", limits.max_decompressed_bytes)
    source = GzipSource(f, chunk, budget, inflater) if compressed else PlainSource(f, chunk, budget)
    builder = Builder(fmt, mode, vmode, label_column, limits, sink, labelled)
    with ReadAhead(source, cancel=getattr(f, "cancel", None)) as blocks:
        return _parse_blocks(blocks, source, builder, limits, compressed)


def _parse_blocks(blocks, source, builder: Builder, limits: ParseLimits, compressed: bool) -> ParseSummary:
    """Hand the complete lines of ``blocks`` (read from ``source``) to ``builder``; the errors say where the text stopped."""
    buf = bytearray()
    try:
        for block in blocks:
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
    except TextLimit as exc:
        line = int(builder.st[K.S_LINE]) + buf.count(b"\n") + exc.prefix.count(b"\n") + 1
        raise UploadLimitError("max_decompressed_bytes", limits.max_decompressed_bytes, line) from None
    except GzipError as exc:
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
    inflater: str = DEFAULT_INFLATER,
    chunk_bytes: int | None = None,
    labelled: bool = True,
) -> ParseSummary:
    """Parse the text that ``open_text()`` opens (a binary file, plain or gzip) into ``sink``.

    ``sink``: see ``ArrayCollector``. ``value_dtype``: "float64" (values as Python's float),
    "float32" (the float32 nearest to each decimal) or "auto" (float32 when every value is
    recoverable from it, else float64; see ``number_kernels``). A parse that learns late that it
    needs float64 values, or (``zero_based="auto"``) that the file is zero-based, starts over:
    ``sink.reset()`` and ``open_text()`` again. ``inflater``: what inflates gzip text (see
    ``sources.INFLATERS``). ``chunk_bytes``: text a kernel call takes (default _CHUNK_BYTES; an upload into shards
    smaller than that: ``chunk_bytes_for``). ``labelled`` False: the rows have no label (svmlight lines start with
    their first feature, every CSV column is a feature) and every row's label is 1. Raises UploadParseError,
    UploadLimitError or (followed uploads) UploadAborted.
    """
    fmt = {"svmlight": "svmlight", "libsvm": "svmlight", "csv": "csv"}.get(format)
    if fmt is None:
        raise ValueError(f"format must be 'svmlight', 'libsvm' or 'csv', got {format!r}")
    mode = _mode(zero_based)
    vmode = _vmode(value_dtype)
    inflate = inflater_module(inflater)
    chunk = int(chunk_bytes if chunk_bytes is not None else _CHUNK_BYTES)
    if chunk < 1:
        raise ValueError(f"chunk_bytes must be >= 1, got {chunk}")
    while True:
        with open_text() as f:
            try:
                return _parse_once(
                    f,
                    fmt=fmt,
                    mode=mode,
                    vmode=vmode,
                    label_column=label_column,
                    limits=limits,
                    chunk=chunk,
                    sink=sink,
                    inflater=inflate,
                    labelled=labelled,
                )
            except Restart as restart:
                sink.reset()
                if restart.reason == "widen":
                    vmode = VAL_F64
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
    inflater: str = DEFAULT_INFLATER,
    chunk_bytes: int | None = None,
) -> ParsedData:
    """Parse the spooled upload at ``path`` (plain or gzip text) into CSR arrays and labels, in memory.

    ``format``: "svmlight" (alias "libsvm") or "csv". ``zero_based``: "auto", True or False
    (svmlight only). ``value_dtype``: see ``parse_into``. ``label_column``: the CSV header name of
    the label column. ``inflater``: see ``parse_into``. Raises UploadParseError (bad text, with line and column) or UploadLimitError
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
        inflater=inflater,
        chunk_bytes=chunk_bytes,
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
                chunk_bytes=64,
            )
    starts = np.zeros(1, dtype=np.int64)
    ends = np.ones(1, dtype=np.int64)
    parse_numbers(np.frombuffer(bytearray(b"1"), dtype=np.uint8), starts, ends, np.empty(1), np.empty(1, np.int64))

"""What the formats share: their errors, number formatting, line reading and label checks."""

from __future__ import annotations

import gzip
import io
from typing import IO, Iterator

import numpy as np

ROWS_PER_PIECE = 2048
"""Rows of a weight matrix or support vectors formatted per piece of a streamed export."""


class ExportRefused(Exception):
    """The model cannot be written in the asked format; the message says why and what works instead (409)."""


class ModelFileError(Exception):
    """An imported file is not a valid model; ``line`` is 1-based (None when the whole file is at fault)."""

    def __init__(self, line: int | None, reason: str):
        super().__init__(f"line {line}: {reason}" if line is not None else reason)
        self.line = line
        self.reason = reason


def number(value: float) -> str:
    """The shortest text that reads back as the same double (C's strtod and fscanf("%lf") included)."""
    return repr(float(value))


def format_matrix(rows: np.ndarray) -> str:
    """Rows of numbers as text, space separated, one row per line (each line ends with a newline)."""
    return "".join(" ".join(map(repr, row)) + "\n" for row in np.asarray(rows, dtype=np.float64).tolist())


def integral_labels(labels, format_name: str) -> list[int]:
    """Labels as integers, or ExportRefused: LIBLINEAR and LIBSVM store labels as C ints."""
    values = np.asarray(labels, dtype=np.float64)
    if not np.all(np.isfinite(values)) or not np.all(values == np.round(values)) or np.any(np.abs(values) >= 2**31):
        raise ExportRefused(
            f"{format_name} model files store labels as 32-bit integers, and this model's labels "
            f"{[float(v) for v in values]} are not all integers; export it as json or onnx"
        )
    return [int(v) for v in values]


def open_text(stream: IO[bytes]) -> IO[str]:
    """A text view of an uploaded file, gunzipped when it starts with gzip's magic bytes."""
    head = stream.read(2)
    stream.seek(0)
    raw: IO[bytes] = gzip.GzipFile(fileobj=stream) if head == b"\x1f\x8b" else stream
    return io.TextIOWrapper(raw, encoding="utf-8", errors="strict", newline=None)


def read_all(stream: IO[bytes]) -> bytes:
    """The whole uploaded file as bytes, gunzipped when it starts with gzip's magic bytes."""
    head = stream.read(2)
    stream.seek(0)
    if head == b"\x1f\x8b":
        try:
            return gzip.GzipFile(fileobj=stream).read()
        except (OSError, EOFError) as exc:
            raise ModelFileError(None, f"the gzip stream is damaged: {exc}") from None
    return stream.read()


def numbered_lines(text: IO[str]) -> Iterator[tuple[int, str]]:
    """(line number from 1, line without its end) for every line; bad UTF-8 or gzip becomes a ModelFileError."""
    number_ = 0
    try:
        for number_, line in enumerate(text, start=1):
            yield number_, line.rstrip("\r\n")
    except UnicodeDecodeError as exc:
        raise ModelFileError(number_ + 1, f"not UTF-8 text ({exc.reason} at byte {exc.start} of the line)") from None
    except (OSError, EOFError) as exc:  # truncated or corrupt gzip
        raise ModelFileError(number_ + 1, f"the gzip stream is damaged: {exc}") from None


def parse_float(token: str, line: int, what: str) -> float:
    """A finite number, or a ModelFileError naming the line and what the token should have been."""
    try:
        value = float(token)
    except ValueError:
        raise ModelFileError(line, f"{what}: {token!r} is not a number") from None
    if not np.isfinite(value):
        raise ModelFileError(line, f"{what}: {token!r} is not finite")
    return value


def parse_int(token: str, line: int, what: str) -> int:
    """An integer, or a ModelFileError naming the line."""
    try:
        return int(token)
    except ValueError:
        try:
            value = float(token)
        except ValueError:
            value = float("nan")
        if np.isfinite(value) and value == int(value):
            return int(value)
        raise ModelFileError(line, f"{what}: {token!r} is not an integer") from None

"""What the formats share: their errors, number formatting, line reading and label checks."""

from __future__ import annotations

import gzip
import io
from collections.abc import Iterator
from typing import IO, cast

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
    raw: IO[bytes] = cast(IO[bytes], gzip.GzipFile(fileobj=stream)) if head == b"\x1f\x8b" else stream
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


class Header:
    """The key-value lines before a model file's body (`w` for LIBLINEAR, `SV` for LIBSVM), with their lines."""

    def __init__(
        self,
        lines: Iterator[tuple[int, str]],
        terminator: str,
        fields: tuple[str, ...],
        format_name: str,
        refuse=lambda key, values: None,
    ):
        self.values: dict[str, tuple[int, list[str]]] = {}
        self.end = 0
        for self.end, line in lines:
            parts = line.split()
            if not parts:
                continue
            key, values = parts[0], parts[1:]
            if key == terminator:
                if values:
                    raise ModelFileError(
                        self.end, f"`{terminator}` must stand alone on its line, found {line.strip()!r}"
                    )
                return
            if key not in fields:
                raise ModelFileError(
                    self.end,
                    f"unknown header field {key!r}: a {format_name} model file has "
                    f"{', '.join(fields)}, then `{terminator}`",
                )
            if key in self.values:
                raise ModelFileError(self.end, f"{key} is given twice (first on line {self.values[key][0]})")
            reason = refuse(key, values)
            if reason:
                raise ModelFileError(self.end, reason)
            self.values[key] = (self.end, values)
        raise ModelFileError(
            self.end or 1, f"no `{terminator}` line: this is not a {format_name} model file (or it is cut short)"
        )

    def __contains__(self, name: str) -> bool:
        return name in self.values

    def field(self, name: str, count: int | None = 1) -> tuple[int, list[str]]:
        """(line, values) of a header field, which must be there with ``count`` values."""
        if name not in self.values:
            raise ModelFileError(self.end, f"the header has no {name} line (needed before the body)")
        where, values = self.values[name]
        if count is not None and len(values) != count:
            raise ModelFileError(where, f"{name} takes {count} value{'s' if count != 1 else ''}, found {len(values)}")
        return where, values


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

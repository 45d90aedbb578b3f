"""Limits and errors of a parse (``service.ingest.parser``), and how its messages quote the text."""

from __future__ import annotations

from dataclasses import dataclass

_TOKEN_CHARS = 40


@dataclass(frozen=True)
class ParseLimits:
    """Upper bounds on an upload; crossing one raises ``UploadLimitError``."""

    max_decompressed_bytes: int  # bytes of text after gunzip (gzip bombs)
    max_rows: int
    max_features: int  # largest feature count allowed
    max_nnz: int
    max_line_bytes: int = 1 << 62  # longest line: the carried-over unfinished line never grows past it


class UploadParseError(ValueError):
    """The upload is not valid text of its format (HTTP 422); ``line``/``column`` are 1-based."""

    def __init__(self, line: int, column: int, reason: str):
        super().__init__(f"line {line}, column {column}: {reason}" if line > 0 else reason)
        self.line = int(line)
        self.column = int(column)
        self.reason = reason

    def __reduce__(self):
        return (type(self), (self.line, self.column, self.reason))


def csv_hint(label: bytes, line: int, csv: bool) -> str:
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


class UploadAborted(Exception):
    """The upload being followed was abandoned by its writer (nothing is stored)."""


def quote(raw: bytes) -> str:
    """A token as a message shows it: quoted, unprintable characters escaped, cut at _TOKEN_CHARS."""
    text = raw.decode("utf-8", "backslashreplace")
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    if len(text) > _TOKEN_CHARS:
        text = text[:_TOKEN_CHARS] + "..."
    return "'" + text + "'"


def binary_hint(raw: bytes) -> str:
    """A hint for a token that is not text: the file may be the wrong one."""
    try:
        raw.decode("utf-8")
        bad = any(b < 32 and b not in (9, 10, 11, 12, 13) or b == 127 for b in raw)
    except UnicodeDecodeError:
        bad = True
    return " (binary data or text that is not UTF-8: is this the right file?)" if bad else ""


def short_name(name: str) -> str:
    """A CSV column name as a message shows it."""
    return repr(name if len(name) <= _TOKEN_CHARS else name[:_TOKEN_CHARS] + "...")


def f32_overflow(text: bytes) -> str:
    """The message of a value beyond float32 when float32 values were asked for."""
    return f"feature value {quote(text)} is beyond the range of float32 (value_dtype=float32 was asked for)"

"""Local files that `hingectl predict` reads itself: svmlight or CSV rows (plain or gzip) as predict instances.

A file that cannot be read as its format is a ``CliError`` (exit 6, "refused") naming the file, the line and
the column, as the service names them for an upload; never a traceback.
"""

from __future__ import annotations

import csv
import gzip
import math
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field

from hinge_client._cli_errors import EXIT_REFUSED, EXIT_USAGE, CliError

TOKEN = re.compile(r"\S+")


@dataclass
class LocalRows:
    """The rows of a local file as predict instances, where each came from, and their labels."""

    rows: list = field(default_factory=list)  # svmlight: {"index": value}; CSV: dense lists
    lines: list[int] = field(default_factory=list)  # the file's line of each row (from 1)
    labels: list[float | None] = field(default_factory=list)  # each row's label, None where it has none

    def all_labelled(self) -> bool:
        """Whether every row has a label (then predict can report its accuracy)."""
        return bool(self.labels) and all(label is not None for label in self.labels)


def bad_line(path: str, line: int, column: int, reason: str) -> CliError:
    """The error of a file that is not what its format says: file, line, column and what is wrong."""
    return CliError(f"{path}: line {line}, column {column}: {reason}", EXIT_REFUSED)


def _number(path: str, line: int, column: int, text: str, what: str) -> float:
    """``text`` as a finite number, else the error naming ``what`` (the service's words for an upload)."""
    try:
        value = float(text)
    except ValueError:
        raise bad_line(path, line, column, f"bad {what}: not a number") from None
    if not math.isfinite(value):
        raise bad_line(path, line, column, f"{what} is not a finite number (NaN and infinity are not allowed)")
    return value


def _lines(path: str) -> Iterator[tuple[int, str]]:
    """(line number, text) of a plain or gzip file (told apart by its first bytes)."""
    try:
        with open(path, "rb") as probe:
            compressed = probe.read(2) == b"\x1f\x8b"
        handle = gzip.open(path, "rb") if compressed else open(path, "rb")
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror or exc}", EXIT_USAGE) from None
    with handle:
        number = 0
        try:
            for number, raw in enumerate(handle, start=1):
                try:
                    yield number, raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise bad_line(path, number, exc.start + 1, "not UTF-8 text") from None
        except (OSError, EOFError, zlib.error) as exc:  # a damaged or truncated gzip file
            raise CliError(f"{path}: line {number + 1}: cannot decompress: {exc}", EXIT_REFUSED) from None


def read_svmlight(path: str) -> LocalRows:
    """svmlight rows: ``[label] [qid:Q] index:value ... [# comment]``; a row without a label starts with index:value."""
    out = LocalRows()
    for number, text in _lines(path):
        tokens = list(TOKEN.finditer(text.split("#", 1)[0]))
        if not tokens:
            continue
        label = None
        if ":" not in tokens[0].group():
            label = _number(path, number, tokens[0].start() + 1, tokens[0].group(), f"label {tokens[0].group()!r}")
            tokens = tokens[1:]
        features = {}
        for token in tokens:
            index, sep, value = token.group().partition(":")
            column = token.start() + 1
            if not sep:
                raise bad_line(path, number, column, f"missing ':' in feature {token.group()!r} (expected index:value)")
            if index == "qid":
                continue
            if not index.isdigit():
                raise bad_line(path, number, column, f"bad feature index {index!r}: expected a non-negative integer")
            features[str(int(index))] = _number(
                path, number, column + len(index) + 1, value, f"feature value {value!r}"
            )
        out.rows.append(features)
        out.lines.append(number)
        out.labels.append(label)
    return out


def read_csv(path: str, label_column: str) -> LocalRows:
    """CSV rows under a header line; the column named ``label_column``, when there, holds the labels."""
    out = LocalRows()
    header: list[str] | None = None
    label_at = None
    for number, text in _lines(path):
        if not text.strip():
            continue
        fields = next(csv.reader([text]))
        if header is None:
            header = [name.strip() for name in fields]
            label_at = header.index(label_column) if label_column in header else None
            continue
        if len(fields) != len(header):
            raise bad_line(path, number, 1, f"{len(fields)} fields, but the header has {len(header)}")
        # columns count characters when no field is quoted; else they count fields
        starts = _field_starts(text, fields)
        row, label = [], None
        for at, value in enumerate(fields):
            parsed = _number(
                path, number, starts[at], value.strip(), f"number {value.strip()!r} in column {at + 1} ({header[at]!r})"
            )
            if at == label_at:
                label = parsed
            else:
                row.append(parsed)
        out.rows.append(row)
        out.lines.append(number)
        out.labels.append(label)
    return out


def _field_starts(text: str, fields: list[str]) -> list[int]:
    if '"' in text:
        return list(range(1, len(fields) + 1))
    starts, column = [], 1
    for value in fields:
        starts.append(column)
        column += len(value) + 1
    return starts


def read_rows(path: str, fmt: str, label_column: str) -> LocalRows:
    """The rows of a local svmlight or CSV file (plain or gzip)."""
    return read_csv(path, label_column) if fmt == "csv" else read_svmlight(path)

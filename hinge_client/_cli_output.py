"""What `hingectl` prints: messages and progress bars on stderr, results and padded tables on stdout."""

from __future__ import annotations

import sys


def _err(message: str) -> None:
    print(f"hingectl: {message}", file=sys.stderr, flush=True)


def _out(text: str) -> None:
    print(text, flush=True)


def _console(force: bool = False):
    from rich.console import Console

    return Console(stderr=True, force_terminal=True if force else None)


def _table(columns: list[str], rows: list[list[str]]) -> None:
    """Columns padded to their widest cell, on stdout."""
    widths = [max([len(c)] + [len(row[i]) for row in rows]) for i, c in enumerate(columns)]
    _out("  ".join(c.ljust(w) for c, w in zip(columns, widths)).rstrip())
    for row in rows:
        _out("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip())


def _cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)

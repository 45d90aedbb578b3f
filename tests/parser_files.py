"""What the upload parser's tests share: uploads written to files and parsed with limits that never bind."""

from __future__ import annotations

import gzip

import numpy as np

from service.ingest.parser import ParseLimits, parse_upload

BIG = ParseLimits(max_decompressed_bytes=1 << 30, max_rows=1 << 30, max_features=1 << 30, max_nnz=1 << 30)


def write_upload(tmp_path, content: bytes | str, *, gz: bool = False, name: str = "upload"):
    """``content`` as a file in ``tmp_path`` (gzip-compressed with ``gz``)."""
    if isinstance(content, str):
        content = content.encode()
    if gz:
        content = gzip.compress(content)
    path = tmp_path / name
    path.write_bytes(content)
    return path


def parse_file(tmp_path, content, *, gz=False, limits=BIG, chunk=None, **kw):
    """Parse ``content`` written to a file of ``tmp_path`` (gzip with ``gz``), with ``chunk``-byte reads."""
    return parse_upload(write_upload(tmp_path, content, gz=gz), limits=limits, chunk_bytes=chunk, **kw)


def float_bits(a):
    """The float64 values' bits, to compare numbers exactly (nan and -0.0 included)."""
    return np.ascontiguousarray(a, dtype=np.float64).view(np.int64)


def small_limits(**kw):
    """Limits of 1 MiB and 1,000 rows, features and non-zeros, with ``kw`` changed."""
    base = dict(max_decompressed_bytes=1 << 20, max_rows=1000, max_features=1000, max_nnz=1000)
    base.update(kw)
    return ParseLimits(**base)

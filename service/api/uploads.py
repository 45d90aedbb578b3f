"""Streams a multipart upload straight to a file on disk, counting and hashing as it goes.

The body is never held in memory: each piece received is written to a temporary file under
``<data_dir>/uploads`` (a path the user cannot name) and fed to SHA-256. The byte limit is checked
on the Content-Length header first and again on every piece, so an oversized upload is refused
without storing more than the limit.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import Request
from python_multipart.multipart import MultipartParser, parse_options_header

from service.api.errors import ApiError, too_large

FILE_FIELD = "file"
MULTIPART_OVERHEAD = 64 * 1024


@dataclass
class SpooledUpload:
    """The uploaded file on disk."""

    path: Path
    size: int
    sha256: str
    filename: str | None


class _FilePartWriter:
    """Multipart callbacks that keep the part named ``file`` and drop the others."""

    def __init__(self, out, max_bytes: int):
        self.out = out
        self.max_bytes = max_bytes
        self.digest = hashlib.sha256()
        self.size = 0
        self.filename: str | None = None
        self.found = False
        self._in_file = False
        self._header_field = b""
        self._header_value = b""
        self._disposition: bytes | None = None

    def callbacks(self) -> Any:  # python-multipart's MultipartCallbacks (a TypedDict)
        return {
            "on_part_begin": self._part_begin,
            "on_header_field": lambda data, start, end: self._append("_header_field", data[start:end]),
            "on_header_value": lambda data, start, end: self._append("_header_value", data[start:end]),
            "on_header_end": self._header_end,
            "on_headers_finished": self._headers_finished,
            "on_part_data": self._part_data,
            "on_part_end": self._part_end,
        }

    def _append(self, name: str, data: bytes) -> None:
        setattr(self, name, getattr(self, name) + data)

    def _part_begin(self) -> None:
        self._disposition = None
        self._in_file = False

    def _header_end(self) -> None:
        if self._header_field.strip().lower() == b"content-disposition":
            self._disposition = self._header_value
        self._header_field = b""
        self._header_value = b""

    def _headers_finished(self) -> None:
        if self._disposition is None:
            return
        _, options = parse_options_header(self._disposition)
        name = options.get(b"name")
        if name is not None and name.decode("latin-1") == FILE_FIELD and not self.found:
            self._in_file = True
            self.found = True
            raw_name = options.get(b"filename")
            self.filename = raw_name.decode("utf-8", "replace") if raw_name else None

    def _part_data(self, data: bytes, start: int, end: int) -> None:
        if not self._in_file:
            return
        piece = data[start:end]
        self.size += len(piece)
        if self.size > self.max_bytes:
            raise too_large(
                "max_upload_bytes",
                self.max_bytes,
                f"upload exceeds the limit max_upload_bytes = {self.max_bytes} bytes",
            )
        self.digest.update(piece)
        try:
            self.out.write(piece)
        except OSError as exc:
            raise disk_full(exc, self.size) from None

    def _part_end(self) -> None:
        self._in_file = False


def new_spool_file(upload_dir: Path) -> Path:
    """A new empty file under ``upload_dir`` to spool an upload to (a name the user cannot choose)."""
    upload_dir.mkdir(parents=True, exist_ok=True)
    handle = tempfile.NamedTemporaryFile(dir=upload_dir, prefix="upload-", suffix=".part", delete=False)
    handle.close()
    return Path(handle.name)


def marker_path(spool: Path) -> Path:
    """Where the end of a followed upload is announced (see ``write_marker``)."""
    return spool.with_suffix(".done")


def write_marker(spool: Path, status: dict) -> None:
    """Announce the end of the upload spooled to ``spool`` to the process following it: written once, by rename."""
    target = marker_path(spool)
    staging = target.with_suffix(".done-tmp")
    staging.write_text(json.dumps(status))
    os.replace(staging, target)


def declared_length(request: Request) -> int | None:
    """The request's Content-Length, when it sends one."""
    declared = request.headers.get("content-length")
    return int(declared) if declared is not None and declared.isdigit() else None


async def spool_upload(
    request: Request, upload_dir: Path, max_bytes: int, *, path: Path | None = None, keep_on_error: bool = False
) -> SpooledUpload:
    """Write the ``file`` part of a multipart body to a new file under ``upload_dir`` (or to ``path``).

    The caller deletes the file; on an error it is deleted here unless ``keep_on_error`` (a file
    that another process follows is deleted by that process)."""
    content_type = request.headers.get("content-type", "")
    mime, options = parse_options_header(content_type)
    if mime != b"multipart/form-data" or b"boundary" not in options:
        raise ApiError(
            415,
            "unsupported_media_type",
            f"send the data set as multipart/form-data with the file in field `{FILE_FIELD}` (got content-type {content_type!r})",
        )
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_bytes + MULTIPART_OVERHEAD:
        raise too_large(
            "max_upload_bytes",
            max_bytes,
            f"upload of {int(declared)} bytes exceeds the limit max_upload_bytes = {max_bytes} bytes",
        )
    if path is None:
        path = new_spool_file(upload_dir)
    handle = open(path, "wb")
    try:
        with handle:
            writer = _FilePartWriter(handle, max_bytes)
            parser = MultipartParser(options[b"boundary"], writer.callbacks())
            received = 0
            async for piece in request.stream():
                received += len(piece)
                if received > max_bytes + MULTIPART_OVERHEAD and not writer.found:
                    raise too_large(
                        "max_upload_bytes", max_bytes, f"request body exceeds max_upload_bytes = {max_bytes} bytes"
                    )
                try:
                    parser.write(piece)
                except ApiError:
                    raise
                except Exception as exc:  # python-multipart's own parse errors
                    raise ApiError(400, "bad_multipart", f"malformed multipart body: {exc}") from exc
            parser.finalize()
        if not writer.found:
            raise ApiError(
                422,
                "validation_error",
                f"body.{FILE_FIELD}: field required (send the data set in the multipart field `{FILE_FIELD}`)",
                [{"loc": ["body", FILE_FIELD], "msg": "field required", "type": "missing"}],
            )
        return SpooledUpload(path=path, size=writer.size, sha256=writer.digest.hexdigest(), filename=writer.filename)
    except OSError as exc:  # the spool file's last buffer, flushed on close, can meet a full disk too
        path.unlink(missing_ok=True)
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise disk_full(exc, 0) from None
        raise
    except BaseException:
        if not keep_on_error:
            path.unlink(missing_ok=True)
        raise


def disk_full(exc: OSError, written: int) -> Exception:
    """507 for an upload the API's disk has no room to spool (other OS errors pass through unchanged)."""
    if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
        return exc
    return ApiError(
        507,
        "disk_full",
        f"the API's disk is full: the upload could not be spooled ({exc.strerror} after "
        f"{written} bytes); nothing was stored",
        {"written_bytes": written},
    )


def remove_quietly(path: Path) -> None:
    """Delete a spooled file, ignoring a file already gone."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass

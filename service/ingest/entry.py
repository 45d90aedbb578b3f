"""Entry points run inside the ingest processes (spawned by the API; numba is imported only there).

The API process imports this module, which imports nothing heavy at module level: the parser
(numba) is imported inside the functions, so only the spawned processes ever compile or load a
kernel. Results cross the process boundary as plain dicts, errors included.
"""

from __future__ import annotations

import atexit
import os

from core.kernel_cache import KernelSet, KernelUnit
from core.processes import die_with_parent, lower_priority

PARSER_KERNELS = KernelSet(
    (KernelUnit("parser", "service.ingest", "parse_kernels", "service.ingest.parser:warm_up", reference_s=7.9),)
)
"""The parser's kernels: one unit, compiled by one ingest process of the machine while the others wait for it
(``core.kernel_cache``; defining it imports no numba)."""

_clients: dict = {}


def init_process() -> None:
    """Initializer of an ingest process: die with the parent, then load the parser kernels.

    When the pool stops it, the process leaves without the interpreter's finalization (about two
    seconds with numba loaded, which a stopping API would wait for): registered last, this exit
    handler runs first. Results have been written by then (the pool's result queue is synchronous).
    """
    die_with_parent()
    from core.config import get_settings

    lower_priority(get_settings().batch_nice)  # parsing is batch work: requests of the API go first
    PARSER_KERNELS.seed()
    PARSER_KERNELS.ensure(["parser"])
    atexit.register(os._exit, 0)


def ping() -> bool:
    """A no-op used to start the process (and its warm-up) before the first upload."""
    return True


def ingest(
    path: str,
    *,
    redis_url: str,
    chunk_bytes: int,
    meta: dict,
    format: str,
    zero_based: str | bool,
    label_column: str,
    limits: dict,
    value_dtype: str = "float64",
    follow_marker: str | None = None,
    reserve_fraction: float = 0.0,
    inflater: str = "isal",
) -> dict:
    """Parse the spooled upload at ``path`` and store it; returns {"record": meta}, {"error": {...}} or {"aborted": reason}.

    The arrays go to Redis chunk by chunk while the text is parsed (staged, then committed with the
    metadata in one transaction; nothing is left behind on an error). With ``follow_marker`` the
    upload is still being written by the API: the parser reads it as it grows until the marker
    file says it is complete (its ``meta`` fields, such as the size and SHA-256, are then added to
    the record) or aborted; this process then deletes the spool file and the marker.
    """
    import os

    import redis

    from core.labels import label_key
    from core.storage.capacity import StorageFull, is_out_of_memory
    from core.storage.documents import DatasetRecord
    from core.storage.records import dataset_store
    from service.ingest.parser import (
        FollowedFile,
        ParseLimits,
        UploadAborted,
        UploadLimitError,
        UploadParseError,
        parse_into,
    )

    client = _clients.get(redis_url)
    if client is None:
        client = _clients[redis_url] = redis.Redis.from_url(redis_url)
    store = dataset_store(client, chunk_bytes, reserve_fraction)
    staged = store.staging(meta["id"], background=True)
    followed: list[FollowedFile] = []

    def open_text():
        if follow_marker is None:
            return open(path, "rb")
        try:
            text = FollowedFile(path, follow_marker)
        except FileNotFoundError:
            raise UploadAborted("the spooled upload is gone") from None
        followed.append(text)
        return text

    try:
        try:
            summary = parse_into(
                staged,
                open_text,
                format=format,
                zero_based=zero_based,
                value_dtype=value_dtype,
                label_column=label_column,
                limits=ParseLimits(**limits),
                inflater=inflater,
            )
            manifest = staged.manifest()
        except UploadParseError as exc:
            staged.discard()
            return {
                "error": {
                    "status": 422,
                    "code": "parse_error",
                    "message": str(exc),
                    "details": {"line": exc.line or None, "column": exc.column or None, "reason": exc.reason},
                }
            }
        except UploadLimitError as exc:
            staged.discard()
            return {
                "error": {
                    "status": 413,
                    "code": "payload_too_large",
                    "message": str(exc),
                    "details": {"limit": exc.limit, "value": exc.value},
                }
            }
        except UploadAborted as exc:
            staged.discard()
            return {"aborted": str(exc)}
        except (StorageFull, redis.exceptions.ResponseError) as exc:  # no room in Redis: nothing stays
            staged.discard()
            if isinstance(exc, redis.exceptions.ResponseError) and not is_out_of_memory(exc):
                raise
            full = exc if isinstance(exc, StorageFull) else StorageFull(f"data set {meta['id']}", 0, 0, 0)
            return {"error": {"status": 507, "code": "storage_full", "message": str(full), "details": full.details()}}
        except BaseException:
            staged.discard()
            raise
        final = dict(meta)
        if followed and followed[-1].outcome is not None:
            final.update(followed[-1].outcome.get("meta") or {})
        record = DatasetRecord.from_document(
            dict(
                final,
                n_samples=int(summary.n_rows),
                n_features=int(summary.n_features),
                nnz=int(summary.nnz),
                labels={label_key(v): int(c) for v, c in sorted(summary.label_counts.items())},
                has_qid=bool(summary.has_qid),
                zero_based=bool(summary.zero_based),
                compressed=bool(summary.compressed),
                text_bytes=int(summary.text_bytes),
                feature_names=summary.feature_names,
                value_dtype=summary.value_dtype,
            )
        )
        try:
            stored = store.commit(record, manifest)
        except StorageFull as exc:
            return {"error": {"status": 507, "code": "storage_full", "message": str(exc), "details": exc.details()}}
        return {"record": stored.to_document()}
    finally:
        staged.close()
        if follow_marker is not None:
            for name in (path, follow_marker):
                try:
                    os.unlink(name)
                except FileNotFoundError:
                    pass

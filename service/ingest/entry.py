"""Entry points run inside the ingest processes (spawned by the API; numba is imported only there).

The API process imports this module, which imports nothing heavy at module level: the parser
(numba) is imported inside the functions, so only the spawned processes ever compile or load a
kernel. Results cross the process boundary as plain dicts, errors included.
"""

from __future__ import annotations

import atexit
import os

from core.compile_cache import CompileUnit, CompileUnits
from core.processes import die_with_parent, lower_priority, map_large_blocks, release_freed_memory

PARSER_UNITS = CompileUnits(
    (CompileUnit("parser", "service.ingest", "parse_kernels", "service.ingest.parser:warm_up", reference_s=6.1),)
)
"""The parser's kernels: one unit, compiled by one ingest process of the machine while the others wait for it
(``core.compile_cache``; defining it imports no numba). reference_s: 7.9 s measured, scaled by 2026-12-01's single
signature of ``_set_error`` (11.4 -> 8.8 CPU-s on a fresh cache)."""

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
    map_large_blocks()  # an upload's buffers go back to the machine when it ends
    PARSER_UNITS.seed()
    PARSER_UNITS.ensure(["parser"])
    atexit.register(os._exit, 0)


def ping() -> bool:
    """A no-op used to start the process (and its warm-up) before the first upload."""
    return True


def ingest(
    path: str,
    *,
    dataset_id: str,
    redis_url: str,
    store_config: dict,
    shard_bytes: int,
    meta: dict,
    format: str,
    zero_based: str | bool,
    label_column: str,
    limits: dict,
    labelled: bool = True,
    value_dtype: str = "float64",
    follow_marker: str | None = None,
    inflater: str = "isal",
    reserve_fraction: float = 0.0,
) -> dict:
    """Parse the spooled upload at ``path`` and store it as data set ``dataset_id`` (``meta``: the record's fields
    known before parsing); returns {"record": meta}, {"error": {...}} or {"aborted": reason}.

    The rows go to the object store as shards while the text is parsed (``core.storage.shards``); the
    record, with its shard list, is committed to Redis once every shard is stored, and nothing is left
    behind on an error (the shards written are deleted; if the store went away meanwhile, the garbage
    collection deletes them later). With ``follow_marker`` the upload is still being written by the
    API: the parser reads it as it grows until the marker file says it is complete (its ``meta``
    fields, such as the size and SHA-256, are then added to the record) or aborted; this process then
    deletes the spool file and the marker.
    """
    import os

    import redis

    from core.storage.capacity import StorageFull
    from core.storage.documents import DatasetRecord
    from core.storage.objects import StoreError, open_store
    from core.storage.records import datasets_in
    from service.ingest.parser import (
        FollowedFile,
        ParseLimits,
        UploadAborted,
        UploadLimitError,
        UploadParseError,
        chunk_bytes_for,
        parse_into,
    )

    client = _clients.get(redis_url)
    if client is None:
        client = _clients[redis_url] = redis.Redis.from_url(redis_url)
    store = datasets_in(client, open_store(store_config), reserve_fraction=reserve_fraction)
    writer = store.shard_writer(dataset_id, shard_bytes)
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
            store.ensure_room(dataset_id, 4096)  # the record, once the shards are stored: refused now, not then
            summary = parse_into(
                writer,
                open_text,
                format=format,
                zero_based=zero_based,
                value_dtype=value_dtype,
                label_column=label_column,
                limits=ParseLimits(**limits),
                labelled=labelled,
                inflater=inflater,
                chunk_bytes=chunk_bytes_for(shard_bytes),
            )
            arrays, shards = writer.manifest()
        except UploadParseError as exc:
            writer.discard()
            return {
                "error": {
                    "status": 422,
                    "code": "parse_error",
                    "message": str(exc),
                    "details": {"line": exc.line or None, "column": exc.column or None, "reason": exc.reason},
                }
            }
        except UploadLimitError as exc:
            writer.discard()
            return {
                "error": {
                    "status": 413,
                    "code": "payload_too_large",
                    "message": str(exc),
                    "details": {"limit": exc.limit, "value": exc.value},
                }
            }
        except UploadAborted as exc:
            writer.discard()
            return {"aborted": str(exc)}
        except StoreError as exc:
            writer.discard()
            return {"error": store_error(exc)}
        except StorageFull as exc:
            writer.discard()
            return {"error": {"status": 507, "code": "storage_full", "message": str(exc), "details": exc.details()}}
        except BaseException:
            writer.discard()
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
                labels=summary.labels.label_counts(),
                targets=summary.labels.targets(),
                has_qid=bool(summary.has_qid),
                zero_based=bool(summary.zero_based),
                zero_based_guessed=None if format == "csv" else zero_based == "auto",
                compressed=bool(summary.compressed),
                text_bytes=int(summary.text_bytes),
                feature_names=summary.feature_names,
                value_dtype=summary.value_dtype,
                shards=[shard.to_document() for shard in shards],
                max_row_norm_sq=_max_row_norm_sq(shards),
                **({} if labelled else {"labelled": False}),
            )
        )
        try:
            stored = store.commit(record, arrays)
        except StorageFull as exc:  # Redis has no room even for the record
            writer.discard()
            return {"error": {"status": 507, "code": "storage_full", "message": str(exc), "details": exc.details()}}
        except BaseException:
            writer.discard()
            raise
        return {"record": stored.to_document()}
    finally:
        writer.close()
        del writer
        if follow_marker is not None:
            for name in (path, follow_marker):
                try:
                    os.unlink(name)
                except FileNotFoundError:
                    pass
        release_freed_memory()  # the upload's buffers, freed, go back to the machine


def store_error(exc) -> dict:
    """The error answer for an upload the object store could not take (``core.storage.objects.StoreError``)."""
    from core.storage.objects import StoreRefused

    if isinstance(exc, StoreRefused):
        message = f"the object store refused to store the data set: {exc}; nothing was stored (an operator must fix it)"
        return {"status": 503, "code": exc.code, "message": message, "details": {"store": exc.store}}
    message = f"the object store is unavailable: {exc}; nothing was stored, try again shortly"
    return {"status": 503, "code": exc.code, "message": message, "details": {"store": exc.store}, "retry_after": 5}


def _max_row_norm_sq(shards: list) -> float | None:
    """The largest squared row norm over the shards (None when a shard did not measure it)."""
    norms = [shard.max_row_norm_sq for shard in shards]
    if any(norm is None for norm in norms):
        return None
    return max(norms, default=0.0)

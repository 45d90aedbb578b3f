"""Entry points run inside the ingest processes (spawned by the API; numba is imported only there).

The API process imports this module, which imports nothing heavy at module level: the parser
(numba) is imported inside the functions, so only the spawned processes ever compile or load a
kernel. Results cross the process boundary as plain dicts, errors included.
"""

from __future__ import annotations

import ctypes
import signal
import sys

_clients: dict = {}


def init_process() -> None:
    """Initializer of an ingest process: die with the parent, then load the parser kernels."""
    die_with_parent()
    from service.ingest import parser

    parser.warm_up()


def die_with_parent() -> None:
    """Ask Linux to send SIGTERM to this process when its parent dies (no orphans)."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        except OSError:
            pass


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
) -> dict:
    """Parse the spooled upload at ``path`` and store it; returns {"record": meta} or {"error": {...}}."""
    import numpy as np
    import redis

    from service.ingest.parser import ParseLimits, UploadLimitError, UploadParseError, parse_upload
    from service.labels import label_key
    from service.storage.records import dataset_store

    try:
        parsed = parse_upload(
            path, format=format, zero_based=zero_based, label_column=label_column, limits=ParseLimits(**limits)
        )
    except UploadParseError as exc:
        return {
            "error": {
                "status": 422,
                "code": "parse_error",
                "message": str(exc),
                "details": {"line": exc.line or None, "column": exc.column or None, "reason": exc.reason},
            }
        }
    except UploadLimitError as exc:
        return {
            "error": {
                "status": 413,
                "code": "payload_too_large",
                "message": str(exc),
                "details": {"limit": exc.limit, "value": exc.value},
            }
        }
    values, counts = np.unique(parsed.y, return_counts=True)
    record = dict(
        meta,
        n_samples=int(parsed.y.size),
        n_features=int(parsed.n_features),
        nnz=int(parsed.indices.size),
        labels={label_key(v): int(c) for v, c in zip(values, counts)},
        has_qid=parsed.qid is not None,
        zero_based=bool(parsed.zero_based),
        compressed=bool(parsed.compressed),
        text_bytes=int(parsed.text_bytes),
        feature_names=parsed.feature_names,
    )
    arrays = {"indptr": parsed.indptr, "indices": parsed.indices, "data": parsed.data, "y": parsed.y}
    if parsed.qid is not None:
        arrays["qid"] = parsed.qid
    client = _clients.get(redis_url)
    if client is None:
        client = _clients[redis_url] = redis.Redis.from_url(redis_url)
    stored = dataset_store(client, chunk_bytes).create(record, arrays)
    return {"record": stored}

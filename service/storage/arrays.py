"""Binary numpy arrays in Redis, cut into chunks so that arrays beyond Redis's 512 MB value limit work.

An array is stored as raw little-endian bytes in values of at most ``chunk_bytes`` each; its
manifest ``{"dtype", "shape", "chunks"}`` lives in the owner's JSON metadata. Chunks are written with
a time-to-live first and made permanent by the owner's commit transaction (see ``persist_commands``),
so an upload that dies half-way leaves nothing that lasts.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import redis

from service.storage import keys

STAGING_TTL_S = 6 * 3600


def write_staged(
    client: redis.Redis, owner_key: str, arrays: Mapping[str, np.ndarray], chunk_bytes: int
) -> dict[str, dict]:
    """Write every array in chunks with a staging TTL; return the manifest to keep in the metadata."""
    manifest: dict[str, dict] = {}
    for name, array in arrays.items():
        flat = np.ascontiguousarray(array).reshape(-1)
        if flat.dtype.byteorder == ">":
            flat = flat.astype(flat.dtype.newbyteorder("<"))
        raw = memoryview(flat.view(np.uint8))
        n_chunks = max(1, -(-raw.nbytes // chunk_bytes))
        for index in range(n_chunks):
            piece = raw[index * chunk_bytes : (index + 1) * chunk_bytes]
            client.set(keys.array_chunk(owner_key, name, index), piece.tobytes(), ex=STAGING_TTL_S)
        manifest[name] = {"dtype": flat.dtype.str, "shape": list(array.shape), "chunks": n_chunks}
    return manifest


def chunk_keys(owner_key: str, manifest: Mapping[str, dict]) -> list[str]:
    """Every Redis key holding a chunk of the arrays in the manifest."""
    return [
        keys.array_chunk(owner_key, name, index)
        for name, entry in manifest.items()
        for index in range(entry["chunks"])
    ]


def read(client: redis.Redis, owner_key: str, manifest: Mapping[str, dict], names=None) -> dict[str, np.ndarray]:
    """Read arrays back (all of them, or those named); raises KeyError if a chunk is missing."""
    out: dict[str, np.ndarray] = {}
    for name, entry in manifest.items():
        if names is not None and name not in names:
            continue
        dtype = np.dtype(entry["dtype"])
        count = int(np.prod(entry["shape"], dtype=np.int64))
        result = np.empty(count, dtype=dtype)
        target = result.view(np.uint8)
        offset = 0
        for index in range(entry["chunks"]):
            piece = client.get(keys.array_chunk(owner_key, name, index))
            if piece is None:
                raise KeyError(f"missing chunk {index} of array {name!r} under {owner_key}")
            target[offset : offset + len(piece)] = np.frombuffer(piece, dtype=np.uint8)
            offset += len(piece)
        if offset != target.size:
            raise KeyError(f"array {name!r} under {owner_key} has {offset} bytes, expected {target.size}")
        out[name] = result.reshape(entry["shape"])
    return out


def persist_commands(pipe, owner_key: str, manifest: Mapping[str, dict]) -> None:
    """Queue PERSIST of every chunk on a transaction pipeline (the commit that makes them last)."""
    for key in chunk_keys(owner_key, manifest):
        pipe.persist(key)


def discard(client: redis.Redis, owner_key: str, manifest: Mapping[str, dict]) -> None:
    """Delete staged or committed chunks (best effort clean-up after a failed write)."""
    names = chunk_keys(owner_key, manifest)
    for start in range(0, len(names), 1000):
        client.delete(*names[start : start + 1000])

"""The object store: where data sets' shards and large models' arrays live, behind one small interface.

Redis keeps what is small and changes (queues, jobs, traces, the manifests of data sets, models); the
bytes that are large and never change once written go to an object store, so that a data set can be
larger than Redis's memory and workers on many machines read it without going through Redis. Two
backends speak the same interface:

- ``LocalDirectoryStore``: a directory of files (``<data_dir>/objects`` by default), the embedded
  default of ``hinge serve``: nothing to install or start. A write goes to a temporary file renamed into
  place, so a reader sees a whole object or none. It serves one machine (or several that mount the same
  directory).
- ``S3Store``: any server that speaks the S3 protocol (SeaweedFS, Ceph RGW, AWS S3, ...), chosen by the
  settings ``object_store=s3``, ``s3_endpoint_url``, ``s3_bucket``, ``s3_region`` and the credentials
  (``s3_access_key_id`` / ``s3_secret_access_key``, or the usual ``AWS_ACCESS_KEY_ID`` /
  ``AWS_SECRET_ACCESS_KEY``), through obstore (the Rust ``object_store`` crate: requests run without the
  GIL). The credentials are never logged nor returned: ``describe()`` names the endpoint and the bucket.

Objects are immutable: a key is written once (data set shards are named by their SHA-256) and deleted
when its owner is. Errors come in three kinds, so that callers can say what is wrong: ``StoreUnavailable``
(the store did not answer: a retry may work), ``StoreRefused`` (it answered no: credentials, a missing
bucket, permissions; a retry will not help until the settings change) and ``ObjectMissing``.
"""

from __future__ import annotations

import errno
import os
import tempfile
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from core.config import Settings

Buffer = bytes | bytearray | memoryview


class StoreError(Exception):
    """Something went wrong with the object store; ``kind`` is the error code the API answers with."""

    code = "store_error"

    def __init__(self, message: str, store: str = ""):
        super().__init__(f"{message} ({store})" if store else message)
        self.store = store


class StoreUnavailable(StoreError):
    """The object store did not answer (down, unreachable, timing out, or failing with 5xx): try again later."""

    code = "store_unavailable"


class StoreRefused(StoreError):
    """The object store answered but refused (credentials, permissions, no such bucket): fix the settings."""

    code = "store_misconfigured"


class ObjectMissing(StoreError, KeyError):
    """No object under this key."""

    code = "object_missing"

    def __str__(self) -> str:  # KeyError's str() would quote the message
        return str(self.args[0]) if self.args else "object missing"


@dataclass(frozen=True)
class ObjectInfo:
    """One stored object as a listing shows it."""

    key: str
    size: int
    modified: float  # seconds since the epoch


class ObjectStore(ABC):
    """Immutable objects by key (``a/b/c``: slash-separated, no leading slash)."""

    @abstractmethod
    def put(self, key: str, data: Buffer) -> None:
        """Store ``data`` under ``key`` (whole: a reader never sees part of it)."""

    @abstractmethod
    def get(self, key: str) -> Buffer:
        """The object's bytes (a buffer: bytes, or a zero-copy view); ``ObjectMissing`` when there is none."""

    @abstractmethod
    def delete(self, keys: Iterable[str]) -> None:
        """Remove these objects; keys without an object are ignored."""

    @abstractmethod
    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        """Every object whose key starts with ``prefix``."""

    @abstractmethod
    def ping(self) -> None:
        """Return when the store answers and accepts our requests; else raise StoreUnavailable or StoreRefused."""

    def probe(self) -> None:
        """As ``ping``, answering within a few seconds (no retries): for readiness checks."""
        self.ping()

    @abstractmethod
    def describe(self) -> dict[str, str]:
        """Where the store is, for logs, errors and /readyz (never a credential)."""

    def name(self) -> str:
        """A one-line description (backend and location)."""
        return " ".join(f"{key}={value}" for key, value in self.describe().items())


class LocalDirectoryStore(ObjectStore):
    """Objects as files under ``root`` (the key's slashes become directories)."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def _path(self, key: str) -> Path:
        if not key or key.startswith("/") or any(part in ("", ".", "..") for part in key.split("/")):
            raise ValueError(f"invalid object key {key!r}")
        return self.root / key

    def put(self, key: str, data: Buffer) -> None:
        """Write to a temporary file beside the target, then rename it into place."""
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            handle, staging = tempfile.mkstemp(dir=path.parent, prefix=".put-")
            try:
                with os.fdopen(handle, "wb") as out:
                    out.write(data)
                os.replace(staging, path)
            except BaseException:
                Path(staging).unlink(missing_ok=True)
                raise
        except OSError as exc:
            raise self._error(exc, f"could not write {key}") from exc

    def get(self, key: str) -> Buffer:
        """The file's bytes."""
        try:
            return self._path(key).read_bytes()
        except FileNotFoundError:
            raise ObjectMissing(f"no object {key!r}", self.name()) from None
        except OSError as exc:
            raise self._error(exc, f"could not read {key}") from exc

    def delete(self, keys: Iterable[str]) -> None:
        """Unlink each file, then the directories left empty."""
        parents = set()
        for key in keys:
            path = self._path(key)
            path.unlink(missing_ok=True)
            parents.add(path.parent)
        for parent in sorted(parents, key=lambda p: len(p.parts), reverse=True):
            while parent != self.root and parent.is_relative_to(self.root):
                try:
                    parent.rmdir()
                except OSError:
                    break
                parent = parent.parent

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        """Walk the directory under the prefix's folder (temporary files of writes under way are left out)."""
        folder = self.root / prefix.rsplit("/", 1)[0] if "/" in prefix else self.root
        if not folder.is_dir():
            return
        for directory, _, names in os.walk(folder):
            for filename in names:
                if filename.startswith(".put-"):
                    continue
                path = Path(directory) / filename
                key = path.relative_to(self.root).as_posix()
                if not key.startswith(prefix):
                    continue
                try:
                    stat = path.stat()
                except FileNotFoundError:
                    continue
                yield ObjectInfo(key, stat.st_size, stat.st_mtime)

    def ping(self) -> None:
        """The directory exists (it is made if needed) and takes writes."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            if not os.access(self.root, os.W_OK | os.X_OK):
                raise StoreRefused(f"the object directory {self.root} is not writable", self.name())
        except OSError as exc:
            raise self._error(exc, "the object directory cannot be made") from exc

    def describe(self) -> dict[str, str]:
        """The backend and its directory."""
        return {"backend": "local", "directory": str(self.root)}

    def _error(self, exc: OSError, what: str) -> StoreError:
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            return StoreRefused(f"{what}: {exc.strerror}", self.name())
        return StoreUnavailable(f"{what}: {exc.strerror or exc}", self.name())


class S3Store(ObjectStore):
    """A bucket of an S3-protocol server, through obstore.

    Requests retry on connection errors and 5xx for a few seconds (``retry_s``) before the error is
    raised: the callers decide how long to keep trying (a worker fetching shards waits much longer than
    an upload, which answers 503 and lets its client retry)."""

    def __init__(
        self,
        *,
        bucket: str,
        endpoint_url: str | None,
        region: str,
        access_key_id: str | None,
        secret_access_key: str | None,
        prefix: str = "",
        retry_s: float = 10.0,
        timeout_s: float = 120.0,
    ):
        from obstore.store import S3Store as _ObstoreS3

        self.bucket = bucket
        self.endpoint_url = endpoint_url
        self.region = region
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        options: dict[str, Any] = {
            "connect_timeout": timedelta(seconds=3),
            "timeout": timedelta(seconds=timeout_s),
            "pool_idle_timeout": timedelta(seconds=30),
        }
        if endpoint_url and endpoint_url.startswith("http://"):
            options["allow_http"] = True
        # unsigned payload: the request's signature does not cover a SHA-256 of its body, which the client would
        # compute and the server check, a pass over every byte each (SeaweedFS: 20-30% of its CPU per upload).
        # Integrity is end to end instead: every shard and model array is named and checked by its own SHA-256.
        config: dict[str, Any] = {"region": region, "unsigned_payload": True}
        if endpoint_url:
            config["endpoint"] = endpoint_url
            config["virtual_hosted_style_request"] = False  # path style: what S3 servers other than AWS speak
        if access_key_id:
            config["access_key_id"] = access_key_id
        if secret_access_key:
            config["secret_access_key"] = secret_access_key
        retry = {
            "max_retries": 6,
            "retry_timeout": timedelta(seconds=retry_s),
            "backoff": {"init_backoff": timedelta(milliseconds=100), "max_backoff": timedelta(seconds=2), "base": 2},
        }
        self._store = _ObstoreS3(bucket, config=config, client_options=options, retry_config=retry)  # type: ignore[arg-type]
        quick = dict(options, connect_timeout=timedelta(seconds=1), timeout=timedelta(seconds=3))
        self._quick = _ObstoreS3(bucket, config=config, client_options=quick, retry_config={"max_retries": 0})  # type: ignore[arg-type]

    def _key(self, key: str) -> str:
        if not key or key.startswith("/"):
            raise ValueError(f"invalid object key {key!r}")
        return self.prefix + key

    def put(self, key: str, data: Buffer) -> None:
        """One PUT (shards and model arrays are bounded in size; SeaweedFS took them 20-40% faster than multipart)."""
        import obstore

        try:
            obstore.put(self._store, self._key(key), data, use_multipart=False)
        except Exception as exc:
            raise self._error(exc, f"could not write {key}") from None

    def get(self, key: str) -> Buffer:
        """The object's bytes, without a copy (obstore's Bytes, read through the buffer protocol)."""
        import obstore

        try:
            return memoryview(obstore.get(self._store, self._key(key)).bytes())
        except Exception as exc:
            raise self._error(exc, f"could not read {key}") from None

    def delete(self, keys: Iterable[str]) -> None:
        """Delete in batches (S3's DeleteObjects)."""
        import obstore

        names = [self._key(key) for key in keys]
        for start in range(0, len(names), 1000):
            try:
                obstore.delete(self._store, names[start : start + 1000])
            except FileNotFoundError:
                continue
            except Exception as exc:
                raise self._error(exc, "could not delete objects") from None

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        """Every object under the prefix, in the order the server lists them."""
        import obstore

        try:
            for batch in obstore.list(self._store, self.prefix + prefix):
                for meta in batch:
                    key = str(meta["path"])[len(self.prefix) :]
                    yield ObjectInfo(key, int(meta["size"]), meta["last_modified"].timestamp())
        except Exception as exc:
            raise self._error(exc, f"could not list {prefix!r}") from None

    def ping(self) -> None:
        """List one key of the bucket: the server answers, the bucket exists and the credentials are taken."""
        self._list_one(self._store)

    def probe(self) -> None:
        """``ping`` without retries, within about 3 s."""
        self._list_one(self._quick)

    def _list_one(self, client) -> None:
        import obstore

        try:
            stream = obstore.list(client, self.prefix + ".hinge-ping", chunk_size=1)
            next(iter(stream), None)
        except Exception as exc:
            raise self._error(exc, "the object store does not answer a listing") from None

    def describe(self) -> dict[str, str]:
        """The backend, endpoint, bucket and key prefix."""
        out = {"backend": "s3", "endpoint": self.endpoint_url or "AWS", "bucket": self.bucket}
        if self.prefix:
            out["prefix"] = self.prefix
        return out

    def _error(self, exc: Exception, what: str) -> StoreError:
        """obstore's exception as one of ours, with the server's own words but never a credential."""
        from obstore.exceptions import PermissionDeniedError, UnauthenticatedError

        text = str(exc)
        detail = _server_code(text)
        if "NoSuchBucket" in text:
            return StoreRefused(f"{what}: the bucket {self.bucket!r} does not exist; create it", self.name())
        if isinstance(exc, FileNotFoundError):
            return ObjectMissing(f"{what}: no such object", self.name())
        if "169.254.169.254" in text or "credential" in text.lower():  # no key given, and AWS's chain found none
            return StoreRefused(
                f"{what}: no credentials (set HINGE_S3_ACCESS_KEY_ID and HINGE_S3_SECRET_ACCESS_KEY, or AWS's "
                "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)",
                self.name(),
            )
        if isinstance(exc, PermissionDeniedError | UnauthenticatedError) or detail in _REFUSALS:
            return StoreRefused(
                f"{what}: the store refused the request ({detail or type(exc).__name__}); check the credentials "
                "(HINGE_S3_ACCESS_KEY_ID, HINGE_S3_SECRET_ACCESS_KEY) and the bucket's permissions",
                self.name(),
            )
        reason = detail or ("no answer" if "error sending request" in text else type(exc).__name__)
        return StoreUnavailable(f"{what}: {reason}", self.name())


_REFUSALS = {
    "AccessDenied",
    "SignatureDoesNotMatch",
    "InvalidAccessKeyId",
    "InvalidBucketName",
    "AllAccessDisabled",
    "AuthorizationHeaderMalformed",
}


def _server_code(text: str) -> str | None:
    """The S3 error code (``<Code>...</Code>``) in obstore's message, if there is one."""
    start = text.find("<Code>")
    end = text.find("</Code>", start)
    return text[start + 6 : end] if start >= 0 and end > start else None


def store_config(settings: Settings) -> dict[str, Any]:
    """What opens the object store the settings name, as plain values (handed to the ingest processes)."""
    if settings.object_store == "s3":
        secret = settings.s3_secret_access_key
        return {
            "backend": "s3",
            "bucket": settings.s3_bucket,
            "endpoint_url": settings.s3_endpoint_url,
            "region": settings.s3_region,
            "access_key_id": settings.s3_access_key_id,
            "secret_access_key": secret.get_secret_value() if secret is not None else None,
            "prefix": settings.s3_prefix,
        }
    return {"backend": "local", "root": str(settings.object_store_dir or settings.data_dir / "objects")}


_opened: dict[tuple, ObjectStore] = {}
_opened_lock = threading.Lock()


def open_store(config: dict[str, Any]) -> ObjectStore:
    """The object store of a ``store_config`` (one client per configuration and process, made on first use)."""
    identity = tuple(sorted((key, str(value)) for key, value in config.items()))
    with _opened_lock:
        store = _opened.get(identity)
        if store is None:
            options = {key: value for key, value in config.items() if key != "backend"}
            if config["backend"] == "s3":
                store = S3Store(**options)
            else:
                store = LocalDirectoryStore(Path(options["root"]))
            _opened[identity] = store
        return store


def object_store(settings: Settings) -> ObjectStore:
    """The object store the settings name (``object_store``: ``local`` or ``s3``)."""
    return open_store(store_config(settings))


def wait_until(call, *, patience_s: float, should_stop=None, on_wait=None, step_s: float = 1.0):
    """``call()``, tried again while it raises StoreUnavailable, for about ``patience_s`` seconds.

    ``on_wait(error)`` is called once when the first try fails; ``should_stop()`` is asked between tries
    (True: the last error is raised). Other errors pass through at once."""
    deadline = time.monotonic() + patience_s
    told = False
    delay = 0.2
    while True:
        try:
            return call()
        except StoreUnavailable as exc:
            if time.monotonic() + delay > deadline or (should_stop is not None and should_stop()):
                raise
            if not told and on_wait is not None:
                on_wait(exc)
                told = True
            time.sleep(delay)
            delay = min(step_s * 5, delay * 2)

"""API keys kept in Redis, hashed: created, listed and revoked by `hinge keys`, checked by the API.

A key reads ``hinge_<key id>_<secret>``: the key id (16 hex digits) is public and names the key in
listings and revocations; the secret is 32 random bytes (``secrets.token_urlsafe``). Redis keeps,
per key id, the tenant, a name, the creation and revocation times and the SHA-256 digest of the
whole key, never the key. The API looks the record up by the key id and compares digests with
``hmac.compare_digest`` (constant time).

Why plain SHA-256 and not bcrypt/argon2: those slow hashes exist to protect low-entropy secrets
(passwords) from guessing after a database leak. A 256-bit random secret cannot be guessed, fast
hash or not, so a slow hash would only add ~100 ms of CPU to every request.

Keys from the ``HINGE_API_KEYS`` setting keep working (also compared by digest in constant time).
Authentication is required as soon as either source has a key; with none, every caller is the
tenant ``public``.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import time
from typing import Any

import redis

from core.storage import keys
from core.storage.connection import text
from core.storage.jobs import utc_now

TENANT_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_KEY_PATTERN = re.compile(r"^hinge_([0-9a-f]{16})_[A-Za-z0-9_-]{20,}$")


def digest(key: str) -> str:
    """Hex SHA-256 of a key."""
    return hashlib.sha256(key.encode()).hexdigest()


class ApiKeyStore:
    """Create, list, revoke and verify API keys."""

    def __init__(self, client: redis.Redis):
        self.client = client

    def create(self, tenant: str, name: str = "") -> tuple[str, str]:
        """A new key for ``tenant``; returns (key id, key). The key is shown once and never stored."""
        if not TENANT_PATTERN.match(tenant):
            raise ValueError(
                f"tenant {tenant!r}: use 1 to 64 letters, digits, '_', '.', '-' (starting with a letter or digit)"
            )
        key_id = secrets.token_hex(8)
        key = f"hinge_{key_id}_{secrets.token_urlsafe(32)}"
        with self.client.pipeline(transaction=True) as pipe:
            pipe.hset(
                keys.api_key(key_id),
                mapping={
                    "key_id": key_id,
                    "tenant": tenant,
                    "name": name,
                    "sha256": digest(key),
                    "created_at": utc_now(),
                },
            )
            pipe.zadd(keys.api_keys(), {key_id: time.time()})
            pipe.sadd(keys.api_keys_active(), key_id)
            pipe.execute()
        return key_id, key

    def list(self) -> list[dict]:
        """Every key's record without its digest, oldest first."""
        out: list[dict[str, Any]] = []
        for raw in self.client.zrange(keys.api_keys(), 0, -1):
            record: dict[str, Any] = {text(k): text(v) for k, v in self.client.hgetall(keys.api_key(text(raw))).items()}
            if record:
                record.pop("sha256", None)
                record["active"] = "revoked_at" not in record
                out.append(record)
        return out

    def revoke(self, key_id: str) -> bool:
        """Revoke a key (kept for the record, refused from now on); False if there is no such key."""
        if not self.client.exists(keys.api_key(key_id)):
            return False
        with self.client.pipeline(transaction=True) as pipe:
            pipe.hsetnx(keys.api_key(key_id), "revoked_at", utc_now())
            pipe.srem(keys.api_keys_active(), key_id)
            pipe.execute()
        return True

    def any_active(self) -> bool:
        """True when at least one key is active (authentication is then required)."""
        return bool(self.client.scard(keys.api_keys_active()))

    def tenant_of(self, key: str) -> str | None:
        """The tenant of a presented key, or None (unknown, malformed or revoked)."""
        match = _KEY_PATTERN.match(key)
        if match is None:
            return None
        record = self.client.hmget(keys.api_key(match.group(1)), "sha256", "tenant", "revoked_at")
        stored, tenant, revoked = record
        presented = digest(key).encode()
        # Compare even when there is no record, so a miss and a mismatch take the same time.
        same = hmac.compare_digest(stored if isinstance(stored, bytes) else b"0" * 64, presented)
        if stored is None or not same or revoked is not None or tenant is None:
            return None
        return text(tenant)

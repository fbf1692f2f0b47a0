"""OAuth state in Redis, shared by every replica: registered clients, sign-ins waiting for an access key,
authorization codes, refresh tokens and revoked access tokens.

Codes and refresh tokens are stored under their SHA-256 and taken with GETDEL, so each is used exactly once
even when two replicas race. A refresh token presented a second time means it leaked: its whole family (every
token rotated from the same sign-in) is revoked.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from typing import Any

from redis.asyncio import Redis

from memento_shared import keys

PREFIX = keys.OAUTH_PREFIX  # no hash tag: memento_shared.keys
CLIENT_TTL_S = 180 * 86400  # an unused registration is forgotten; the client registers again
PENDING_TTL_S = 600  # the sign-in page stays valid this long
CODE_TTL_S = 300  # RFC 6749 §4.1.2: short-lived


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


class OAuthStore:
    def __init__(self, redis: Redis, refresh_ttl_s: int) -> None:
        self.redis = redis
        self.refresh_ttl = refresh_ttl_s

    async def _put(self, key: str, value: dict[str, Any], ttl: int, *, only_new: bool = False) -> bool:
        return bool(await self.redis.set(PREFIX + key, json.dumps(value), ex=ttl, nx=only_new))

    async def _get(self, key: str) -> dict[str, Any] | None:
        raw = await self.redis.get(PREFIX + key)
        return json.loads(raw) if raw else None

    async def _take(self, key: str) -> dict[str, Any] | None:
        raw = await self.redis.getdel(PREFIX + key)
        return json.loads(raw) if raw else None

    # --- clients (RFC 7591) ---
    async def put_client(self, client_id: str, record: dict[str, Any]) -> None:
        await self._put(f"client:{client_id}", record, CLIENT_TTL_S)

    async def get_client(self, client_id: str) -> dict[str, Any] | None:
        record = await self._get(f"client:{client_id}")
        if record is not None:
            await self.redis.expire(PREFIX + f"client:{client_id}", CLIENT_TTL_S)
        return record

    # --- sign-ins waiting on the login page ---
    async def put_pending(self, request: dict[str, Any]) -> str:
        request_id = secrets.token_urlsafe(24)
        await self._put(f"pending:{request_id}", request, PENDING_TTL_S)
        return request_id

    async def get_pending(self, request_id: str) -> dict[str, Any] | None:
        return await self._get(f"pending:{request_id}") if 0 < len(request_id) <= 64 else None

    async def count_failure(self, request_id: str) -> int:
        key = PREFIX + f"pending-failures:{request_id}"
        failures = int(await self.redis.incr(key))
        await self.redis.expire(key, PENDING_TTL_S)
        return failures

    async def drop_pending(self, request_id: str) -> None:
        await self.redis.delete(PREFIX + f"pending:{request_id}")

    # --- authorization codes ---
    async def put_code(self, code: str, record: dict[str, Any]) -> None:
        await self._put(f"code:{_hash(code)}", record, CODE_TTL_S)

    async def get_code(self, code: str) -> dict[str, Any] | None:
        return await self._get(f"code:{_hash(code)}")

    async def take_code(self, code: str) -> dict[str, Any] | None:
        return await self._take(f"code:{_hash(code)}")

    # --- refresh tokens, rotated on every use ---
    async def put_refresh(self, token: str, record: dict[str, Any]) -> None:
        await self._put(f"refresh:{_hash(token)}", record, self.refresh_ttl)

    async def get_refresh(self, token: str) -> dict[str, Any] | None:
        """The live record; None for unknown tokens, and for a rotated one presented again, which also revokes
        its family: either the client or a thief holds a copy, and we cannot tell which."""
        record = await self._get(f"refresh:{_hash(token)}")
        if record is None:
            await self._revoke_if_reused(token)
            return None
        if await self.redis.exists(PREFIX + f"family-revoked:{record['family']}"):
            return None
        return record

    async def take_refresh(self, token: str) -> dict[str, Any] | None:
        """The record, once (two replicas racing on one token: one wins, the other's use counts as reuse)."""
        record = await self._take(f"refresh:{_hash(token)}")
        if record is None:
            await self._revoke_if_reused(token)
            return None
        await self._put(f"refresh-used:{_hash(token)}", {"family": record["family"]}, self.refresh_ttl)
        return record

    async def _revoke_if_reused(self, token: str) -> None:
        reused = await self._get(f"refresh-used:{_hash(token)}")
        if reused is not None:
            await self.revoke_family(reused["family"])

    async def revoke_family(self, family: str) -> None:
        await self.redis.set(PREFIX + f"family-revoked:{family}", "1", ex=self.refresh_ttl)

    async def drop_refresh(self, token: str) -> None:
        record = await self._take(f"refresh:{_hash(token)}")
        if record is not None:
            await self.revoke_family(record["family"])

    # --- access tokens revoked before they expire ---
    async def revoke_access(self, jti: str, ttl: int) -> None:
        await self.redis.set(PREFIX + f"revoked:{jti}", "1", ex=max(ttl, 1))

    async def access_revoked(self, jti: str, family: str) -> bool:
        """The token itself was revoked, or the sign-in it came from (a leaked or revoked refresh token)."""
        return bool(await self.redis.exists(PREFIX + f"revoked:{jti}", PREFIX + f"family-revoked:{family}"))

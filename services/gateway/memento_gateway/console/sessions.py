"""Console sessions in Redis: the signed-in principal and its CSRF token under a random id, with a TTL. The id
travels only in an HttpOnly, SameSite=Strict cookie; the store holds no credential, only what it resolved to."""

from __future__ import annotations

import secrets
from dataclasses import asdict
from typing import Any

from redis.asyncio import Redis

from memento_shared import jsonio, keys
from memento_shared.principal import Principal

PREFIX = keys.CONSOLE_SESSION_PREFIX  # no hash tag: memento_shared.keys
FLOW_PREFIX = keys.CONSOLE_FLOW_PREFIX
FLOW_TTL_S = 600


def principal_of(record: dict[str, Any]) -> Principal:
    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in record["principal"].items() if k != "issued_at"}
    return Principal(**fields)


class ConsoleSessions:
    def __init__(self, redis: Redis, ttl_s: int) -> None:
        self.redis = redis
        self.ttl_s = ttl_s

    async def create(self, principal: Principal, credential: str) -> str:
        session_id = secrets.token_urlsafe(32)
        record = {
            "principal": asdict(principal),
            "credential": credential,
            "csrf": secrets.token_urlsafe(32),
            "workspace": _first_workspace(principal),
        }
        await self.redis.set(PREFIX + session_id, jsonio.dumps(record), ex=self.ttl_s)
        return session_id

    async def get(self, session_id: str | None) -> dict[str, Any] | None:
        if not session_id or len(session_id) > 64:
            return None
        raw = await self.redis.get(PREFIX + session_id)
        if raw is None:
            return None
        await self.redis.expire(PREFIX + session_id, self.ttl_s)  # sliding: an active console stays signed in
        return jsonio.loads(raw)

    async def update(self, session_id: str, record: dict[str, Any]) -> None:
        await self.redis.set(PREFIX + session_id, jsonio.dumps(record), ex=self.ttl_s)

    async def drop(self, session_id: str | None) -> None:
        if session_id:
            await self.redis.delete(PREFIX + session_id)

    # --- an OAuth sign-in in flight: state -> PKCE verifier, taken once ---
    async def put_flow(self, state: str, verifier: str) -> None:
        await self.redis.set(FLOW_PREFIX + state, verifier, ex=FLOW_TTL_S)

    async def take_flow(self, state: str) -> str | None:
        if not state or len(state) > 128:
            return None
        value = await self.redis.getdel(FLOW_PREFIX + state)
        return value.decode() if isinstance(value, bytes) else value


def _first_workspace(principal: Principal) -> str:
    named = [w for w in principal.workspaces if w != "*"]
    return "default" if "*" in principal.workspaces or not named else named[0]

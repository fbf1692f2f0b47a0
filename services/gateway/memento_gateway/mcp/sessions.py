"""MCP sessions kept in Redis (principal, protocol version, profiles, timestamps), so any gateway replica
can serve any session. A sorted set of expiry times gives /health its active count without scanning keys."""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import asdict, dataclass

from redis.asyncio import Redis

from memento_shared.principal import Principal

INDEX = "memento:sessions"


def _key(session_id: str) -> str:
    return f"memento:session:{session_id}"


@dataclass
class Session:
    id: str
    principal: Principal
    protocol_version: str
    profiles: tuple[str, ...]
    created_at: float
    client: str = ""


class SessionStore:
    def __init__(self, redis: Redis, ttl_seconds: int) -> None:
        self.redis = redis
        self.ttl = ttl_seconds

    async def create(
        self, principal: Principal, protocol_version: str, profiles: tuple[str, ...], client: str
    ) -> Session:
        session = Session(secrets.token_urlsafe(24), principal, protocol_version, profiles, time.time(), client[:100])
        data = asdict(session)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.set(_key(session.id), json.dumps(data), ex=self.ttl)
            pipe.zadd(INDEX, {session.id: time.time() + self.ttl})
            await pipe.execute()
        return session

    async def get(self, session_id: str) -> Session | None:
        raw = await self.redis.get(_key(session_id))
        if raw is None:
            return None
        data = json.loads(raw)
        p = data.pop("principal")
        principal = Principal(**{k: tuple(v) if isinstance(v, list) else v for k, v in p.items()})
        session = Session(principal=principal, **{**data, "profiles": tuple(data["profiles"])})
        async with self.redis.pipeline(transaction=False) as pipe:  # sliding expiry
            pipe.expire(_key(session_id), self.ttl)
            pipe.zadd(INDEX, {session_id: time.time() + self.ttl})
            await pipe.execute()
        return session

    async def delete(self, session_id: str) -> bool:
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.delete(_key(session_id))
            pipe.zrem(INDEX, session_id)
            deleted, _ = await pipe.execute()
        return bool(deleted)

    async def active_count(self) -> int:
        now = time.time()
        await self.redis.zremrangebyscore(INDEX, "-inf", now)
        return int(await self.redis.zcard(INDEX))

"""MCP sessions kept in Redis (principal, protocol version, profiles, log level, timestamps), so any gateway
replica can serve any session. Sorted sets of expiry times give /health its active count without scanning keys.

A session's key carries its tenant as hash tag (memento_shared.keys), beside its working memory and the caller's rate
bucket, so a request's reads are one round trip even on a cluster: every lookup names the tenant (the caller's, or
for the legacy transport the one its endpoint URL carries). The count is spread over SESSION_INDEX_BUCKETS sets."""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import asdict, dataclass, replace
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from memento_shared import keys, redis_client, working_memory
from memento_shared.principal import Principal

_key = keys.session  # (tenant, session id)
_index = keys.session_index  # (session id)


@dataclass(frozen=True)
class Session:
    id: str
    principal: Principal  # who opened it; later requests must come from the same tenant and subject
    protocol_version: str
    profiles: tuple[str, ...]
    created_at: float
    client: str = ""
    transport: str = "streamable-http"  # or "sse" (2024-11-05 legacy transport)
    log_level: str | None = None  # set by logging/setLevel; no log notifications until then
    credential: str = "operator"  # operator | api_key | oauth | open (auth disabled)
    credential_expires_at: float | None = None  # an OAuth token's expiry: /message stops trusting it then
    client_extensions: tuple[str, ...] = ()  # extensions the client declared (2026-07-28: on each request)

    def owned_by(self, principal: Principal) -> bool:
        return (self.principal.tenant_id, self.principal.subject) == (principal.tenant_id, principal.subject)


def _load(raw: bytes) -> Session:
    data = json.loads(raw)
    p = data.pop("principal")
    principal = Principal(**{k: tuple(v) if isinstance(v, list) else v for k, v in p.items()})
    return Session(principal=principal, **{**data, "profiles": tuple(data["profiles"])})


class SessionStore:
    def __init__(self, redis: Redis, ttl_seconds: int) -> None:
        self.redis = redis
        self.ttl = ttl_seconds

    async def create(
        self, principal: Principal, protocol_version: str, profiles: tuple[str, ...], **extra: Any
    ) -> Session:
        session = Session(secrets.token_urlsafe(24), principal, protocol_version, profiles, time.time(), **extra)
        await self._write(session, new=True)
        return session

    async def save(self, session: Session) -> bool:
        """Update a live session; False (and nothing written) if it ended meanwhile - never bring it back."""
        return await self._write(session, new=False)

    async def _write(self, session: Session, *, new: bool) -> bool:
        """With REDIS_WAIT_REPLICAS, the session is on that many replicas before the client hears of it."""
        data = json.dumps(asdict(replace(session, client=session.client[:100])))
        key = _key(session.principal.tenant_id, session.id)
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.set(key, data, ex=self.ttl, nx=new, xx=not new)
            waited = redis_client.queue_wait(pipe, self.redis, key)
            results = await pipe.execute()
        if not results[0]:
            return False
        if waited:
            redis_client.check_wait(self.redis, results[-1])
        await self.redis.zadd(_index(session.id), {session.id: time.time() + self.ttl})
        return True

    async def get(self, session_id: str, tenant_id: str) -> Session | None:
        """The tenant's session, its expiry slid forward; None when unknown, ended or expired."""
        if not self.readable(session_id) or not tenant_id:
            return None
        async with self.redis.pipeline(transaction=False) as pipe:
            self.queue_get(pipe, session_id, tenant_id)
            return self.got(await pipe.execute())

    @staticmethod
    def readable(session_id: str | None) -> bool:
        """Worth looking up: ours are 32 characters; anything empty or long is no session."""
        return bool(session_id) and len(session_id) <= 64

    def queue_get(self, pipe: Pipeline, session_id: str, tenant_id: str) -> None:
        """`get` as commands of the caller's pipeline (read and slide the expiry in one round trip; EXPIRE and
        ZADD XX do nothing for a session that is gone); read the answer with `got`. The session's working memory
        slides with it (it lives as long as its session)."""
        pipe.expire(working_memory.key(tenant_id, session_id), self.ttl)
        pipe.get(_key(tenant_id, session_id))
        self._queue_slide(pipe, tenant_id, session_id)

    def _queue_slide(self, pipe: Pipeline, tenant_id: str, session_id: str) -> None:
        """Move the session's expiry forward (its key, and its place in the index: ZADD XX adds no gone session)."""
        pipe.expire(_key(tenant_id, session_id), self.ttl)
        pipe.zadd(_index(session_id), {session_id: time.time() + self.ttl}, xx=True)

    @staticmethod
    def got(results: list[Any]) -> Session | None:
        """The session from a pipeline whose last three commands are `queue_get`'s."""
        raw = results[-3]
        return None if raw is None else _load(raw)

    async def touch(self, session: Session) -> bool:
        """Slide an open stream's session, and its working memory, forward; False when the session is gone."""
        async with self.redis.pipeline(transaction=False) as pipe:
            self._queue_slide(pipe, session.principal.tenant_id, session.id)
            pipe.expire(working_memory.key(session.principal.tenant_id, session.id), self.ttl)
            alive, _, _ = await pipe.execute()
        return bool(alive)

    async def slide_working_memory(self, tenant_id: str, handle: str) -> None:
        """The stateless form's working memory, named by its handle on a request: it lives as long as it is used."""
        await self.redis.expire(working_memory.key(tenant_id, handle), self.ttl)

    async def delete(self, session: Session) -> bool:
        """End a session, and its working memory with it (one pipeline, not MULTI: a cluster runs none; the session
        key goes first, so a failure part-way leaves at most working memory and an index entry to expire)."""
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.delete(_key(session.principal.tenant_id, session.id))
            pipe.zrem(_index(session.id), session.id)
            pipe.delete(working_memory.key(session.principal.tenant_id, session.id))
            deleted, _, _ = await pipe.execute()
        return bool(deleted)

    async def active_count(self) -> int:
        now = time.time()
        async with self.redis.pipeline(transaction=False) as pipe:
            for index in keys.session_indexes():
                pipe.zremrangebyscore(index, "-inf", now)
                pipe.zcard(index)
            results = await pipe.execute()
        return sum(int(count) for count in results[1::2])

"""Limits at the edge: request body size, a per-principal rate kept in Redis (so every replica shares it), and a
cap on the SSE streams one principal keeps open."""

from __future__ import annotations

import math
import time
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline
from starlette.requests import Request

from memento_shared import keys

# A token bucket per key, refilled continuously; Redis's own clock, so replicas with skewed clocks agree.
# Returns 0 when allowed, else the milliseconds until one request fits. cost 0 only asks "is a token left?".
_BUCKET = """
local rate, capacity, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(state[1]) or capacity
local ts = tonumber(state[2]) or now
tokens = math.min(capacity, tokens + (now - ts) * rate)
local need = math.max(cost, 1)
if tokens < need then
  return math.ceil((need - tokens) / rate)
end
tokens = tokens - cost
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', now)
redis.call('PEXPIRE', KEYS[1], math.ceil(capacity / rate) + 1000)
return 0
"""

# Open streams per principal: members are stream ids scored by a lease that keep-alives renew, so a replica
# that dies without closing its streams frees their slots when the lease runs out.
_CLAIM = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[4])
redis.call('EXPIRE', KEYS[1], ARGV[5])
return 1
"""
STREAM_LEASE_S = 90


class PayloadTooLarge(Exception):
    pass


async def read_body(request: Request, limit: int) -> bytes:
    """The body, refused as soon as it is known to exceed `limit` (never buffered whole first)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge
    body = bytearray()
    async for chunk in request.stream():
        body.extend(chunk)
        if len(body) > limit:
            raise PayloadTooLarge
    return bytes(body)


class RateLimiter:
    def __init__(self, redis: Redis, per_minute: int) -> None:
        self.redis = redis
        self.per_minute = per_minute
        self.script = redis.register_script(_BUCKET)

    async def retry_after(self, key: str, *, per_minute: int | None = None, cost: int = 1) -> int:
        """0 if the request may go ahead (and it is counted), else the seconds to wait."""
        limit = per_minute if per_minute is not None else self.per_minute
        if limit <= 0:
            return 0
        # A full minute's worth as burst: generous for agents that fire several calls at once.
        wait_ms = await self.script(keys=[keys.rate(key)], args=[limit / 60_000, limit, cost])
        return _seconds(wait_ms)

    def queue(self, pipe: Pipeline, key: str) -> None:
        """retry_after for one request, as a command of the caller's pipeline; read it with `waited`."""
        if self.per_minute > 0:
            pipe.eval(_BUCKET, 1, keys.rate(key), self.per_minute / 60_000, self.per_minute, 1)

    def waited(self, results: list[Any]) -> int:
        """The seconds to wait from a pipeline's results (its first entry, when `queue` added one)."""
        return _seconds(results[0]) if self.per_minute > 0 else 0


def _seconds(wait_ms: Any) -> int:
    return math.ceil(int(wait_ms) / 1000) if int(wait_ms) else 0


class StreamSlots:
    def __init__(self, redis: Redis, cap: int) -> None:
        self.redis = redis
        self.cap = cap
        self.script = redis.register_script(_CLAIM)

    def _key(self, identity: str) -> str:
        return keys.streams(identity)

    async def claim(self, identity: str, stream_id: str) -> bool:
        now = time.time()
        args = [now, now + STREAM_LEASE_S, self.cap, stream_id, STREAM_LEASE_S * 2]
        return bool(await self.script(keys=[self._key(identity)], args=args))

    async def renew(self, identity: str, stream_id: str) -> None:
        await self.redis.zadd(self._key(identity), {stream_id: time.time() + STREAM_LEASE_S}, xx=True)

    async def release(self, identity: str, stream_id: str) -> None:
        await self.redis.zrem(self._key(identity), stream_id)

"""Resumable SSE response streams (Streamable HTTP 2025-03-26 to 2025-11-25): every event of a POST's stream gets
an id and is kept in a Redis stream while the call runs, so a client whose connection dropped sends
`GET /mcp` with `Last-Event-ID` to any replica and receives what it missed, then the rest as it happens, exactly
once. 2026-07-28 removed resumption; its streams carry no ids.

An event id is `<stream>:<n>`: a random stream name and the event's number in it (1, 2, ...). The Redis key is built
from the tenant, the session id and the stream name, so a `Last-Event-ID` only ever finds streams of the session it
names.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import AsyncIterator
from typing import Any

from redis.asyncio import Redis

from memento_shared import keys

MAX_EVENTS = 1000  # per stream: a call's progress steps and its answer; older ones go first
KEPT_AFTER_END_S = 300  # a stream whose call ended stays resumable this long (a drop just before the answer)
ENDED = {"memento": "ended"}  # kept after the last event of a call cancelled without an answer; never sent
BLOCK_MS = 1000  # one blocking read, well under the Redis client's 5 s socket timeout
EVENT_ID = re.compile(r"^([A-Za-z0-9_-]{1,32}):([0-9]{1,9})$")


_key = keys.sse_events  # (tenant, session id, stream)


def _final(message: dict[str, Any]) -> bool:
    return message == ENDED or ("id" in message and "method" not in message)


class EventLog:
    """One response stream's events, numbered and kept for `ttl_s` (the session's) after the last one while the
    call runs, then KEPT_AFTER_END_S after its end."""

    def __init__(self, redis: Redis, tenant_id: str, session_id: str, ttl_s: int) -> None:
        self.redis, self.ttl = redis, ttl_s
        self.stream = secrets.token_urlsafe(9)
        self.key = _key(tenant_id, session_id, self.stream)
        self.count = 0

    async def append(self, message: dict[str, Any]) -> str:
        """Keep the message; its event id."""
        self.count += 1
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.xadd(self.key, {"m": json.dumps(message)}, id=f"0-{self.count}", maxlen=MAX_EVENTS, approximate=False)
            pipe.expire(self.key, min(self.ttl, KEPT_AFTER_END_S) if _final(message) else self.ttl)
            await pipe.execute()
        return f"{self.stream}:{self.count}"

    async def end(self) -> None:
        """The call ended without an answer (cancelled): a resumed stream stops here."""
        await self.append(ENDED)


def parse(last_event_id: str) -> tuple[str, int] | None:
    """(stream, number) from a Last-Event-ID of ours; None for anything else."""
    match = EVENT_ID.match(last_event_id.strip())
    return (match[1], int(match[2])) if match else None


async def exists(redis: Redis, tenant_id: str, session_id: str, stream: str) -> bool:
    return bool(await redis.exists(_key(tenant_id, session_id, stream)))


async def resume(
    redis: Redis, tenant_id: str, session_id: str, stream: str, after: int
) -> AsyncIterator[tuple[str, dict[str, Any]] | None]:
    """The stream's events after number `after`, then each new one as it is kept, until the answer (a message with
    an id and no method) or until the stream is gone; None between them, when a blocking read found nothing."""
    key, position = _key(tenant_id, session_id, stream), f"0-{after}"
    last = await redis.xrevrange(key, count=1)
    if last and _entry(last[0])[0] <= after and _final(_entry(last[0])[1]):
        return  # the client already had the end
    while True:
        found = await redis.xread({key: position}, count=100, block=BLOCK_MS)
        if not found:
            if not await redis.exists(key):
                return
            yield None
            continue
        for entry in found[0][1]:
            number, message = _entry(entry)
            position = f"0-{number}"
            if message == ENDED:
                return
            yield f"{stream}:{number}", message
            if _final(message):
                return


def _entry(entry: tuple[Any, dict[str, Any]]) -> tuple[int, dict[str, Any]]:
    """(event number, message) from a Redis stream entry."""
    entry_id, fields = entry
    number = int((entry_id.decode() if isinstance(entry_id, bytes) else entry_id).split("-", 1)[1])
    return number, json.loads(fields[b"m"] if b"m" in fields else fields["m"])

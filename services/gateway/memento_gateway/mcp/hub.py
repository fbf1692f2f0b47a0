"""Server-to-client delivery across replicas: a Redis pub/sub channel per session.

The replica holding a client's open SSE stream subscribes to that session's channel; whichever replica handles
the client's next POST publishes there, so the message reaches the stream wherever it lives. One pub/sub
connection per replica carries every channel (a connection per stream would not scale to many clients).
The same connection hears cancellations, which must reach the replica running the cancelled request, and the
change notices memory-api's relay publishes (memento_shared.changes), which go to `on_change` (mcp/subscriptions.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
from redis.asyncio import Redis
from redis.exceptions import RedisError

from memento_shared import background, changes
from memento_shared.redis_client import PUBSUB_READ_WAIT_S

log = logging.getLogger(__name__)

CANCEL_CHANNEL = "memento:cancel"
CLOSE = {"memento": "close"}  # control message: the session ended on some replica, so end its stream


def channel(session_id: str) -> str:
    return f"memento:stream:{session_id}"


class StreamHub:
    def __init__(self, redis: Redis, on_cancel: Callable[[str, Any], None]) -> None:
        self.redis = redis
        self.pubsub = redis.pubsub()
        self.on_cancel = on_cancel
        self.on_change: Callable[[Any], None] | None = None
        self.queues: dict[str, asyncio.Queue[dict[str, Any]]] = {}
        self.reader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        # Always subscribed to one channel: the reader then never sees an idle, unsubscribed connection.
        await self.pubsub.subscribe(CANCEL_CHANNEL, changes.CHANNEL)
        self.reader = asyncio.create_task(self._read(), name="stream-hub")

    async def stop(self) -> None:
        await background.cancel(self.reader)  # not suppress(CancelledError): that would also eat a cancel of stop()
        for queue in self.queues.values():
            queue.put_nowait(CLOSE)
        with contextlib.suppress(RedisError, OSError):
            await self.pubsub.aclose()

    @property
    def open_streams(self) -> int:
        return len(self.queues)

    @contextlib.asynccontextmanager
    async def attach(self, session_id: str) -> AsyncIterator[asyncio.Queue[dict[str, Any]]]:
        """A queue receiving every message published for the session while the stream is open here."""
        queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.queues[session_id] = queue
        await self.pubsub.subscribe(channel(session_id))  # before the caller tells the client where to post
        try:
            yield queue
        finally:
            if self.queues.get(session_id) is queue:
                del self.queues[session_id]
            # shielded: this runs when a client hangs up, inside a cancelled scope
            with anyio.CancelScope(shield=True), contextlib.suppress(RedisError, OSError):
                await self.pubsub.unsubscribe(channel(session_id))

    async def publish(self, session_id: str, message: dict[str, Any]) -> bool:
        """True when some replica holds an open stream for the session (the message was delivered to it)."""
        receivers = await self.redis.publish(channel(session_id), json.dumps(message, ensure_ascii=False))
        if not receivers:
            log.info("stream.undelivered", extra={"reason": "no open stream"})
        return bool(receivers)

    async def close(self, session_id: str) -> None:
        """Ends the session's stream, if one is open anywhere."""
        await self.redis.publish(channel(session_id), json.dumps(CLOSE))

    async def cancel(self, session_id: str, request_id: Any) -> None:
        await self.redis.publish(CANCEL_CHANNEL, json.dumps({"session": session_id, "request": request_id}))

    async def _read(self) -> None:
        backoff = 0.1
        while True:
            try:
                message = await self.pubsub.get_message(ignore_subscribe_messages=True, timeout=PUBSUB_READ_WAIT_S)
                backoff = 0.1
            except (RedisError, OSError) as exc:
                # redis-py reconnects and re-subscribes on the next read; wait a little, longer each time.
                log.warning("stream_hub.redis_error", extra={"error_type": type(exc).__name__})
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            if message is not None and message.get("type") == "message":
                self._route(message["channel"], message["data"])

    def _route(self, raw_channel: bytes | str, data: bytes | str) -> None:
        name = raw_channel.decode() if isinstance(raw_channel, bytes) else raw_channel
        if name == changes.CHANNEL:
            if self.on_change is not None:
                self.on_change(data)
            return
        try:
            payload = json.loads(data)
        except ValueError:
            return
        if name == CANCEL_CHANNEL:
            self.on_cancel(payload.get("session", ""), payload.get("request"))
            return
        queue = self.queues.get(name.removeprefix("memento:stream:"))
        if queue is not None:
            queue.put_nowait(payload)

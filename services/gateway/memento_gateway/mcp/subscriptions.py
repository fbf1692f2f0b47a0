"""Who hears of a changed resource, on this replica. Change notices (memento_shared.changes) reach every replica on
one pub/sub channel, which the stream hub reads; this passes each to the streams open here that asked for it:

- `subscriptions/listen` streams (2026-07-28), registered for their lifetime with the tenant and workspace they
  listen in and their filter (resource URIs, the resource list);
- 2025 sessions that sent `resources/subscribe`: the subscription is kept in Redis (any replica may receive it), and
  the replica holding the session's stream (its GET stream, or the legacy SSE stream) delivers the notification.

Nothing here knows what a resource is: a notice names a URI, and a URI is what clients subscribe to.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from redis.asyncio import Redis

from memento_gateway.mcp.hub import CLOSE, StreamHub
from memento_gateway.mcp.jsonrpc import notification
from memento_shared import changes, keys

log = logging.getLogger(__name__)
MAX_URIS = 100  # per listen stream or session
MAX_URI_CHARS = 2048
QUEUE_LIMIT = 1000  # notices waiting for a slow client; past it the stream is ended (LOST), never grown
LOST = {"memento": "lost"}  # control message: the stream fell behind and must end without a graceful close
UPDATED, LIST_CHANGED = "notifications/resources/updated", "notifications/resources/list_changed"


@dataclass(eq=False)
class Listener:
    tenant: str
    workspace: str
    list_changed: bool
    uris: frozenset[str]
    queue: asyncio.Queue[dict[str, Any]] = field(default_factory=lambda: asyncio.Queue(QUEUE_LIMIT))

    def offer(self, message: dict[str, Any]) -> None:
        try:
            self.queue.put_nowait(message)
        except asyncio.QueueFull:
            self.uris, self.list_changed = frozenset(), False  # hears nothing more: LOST is its last message
            self.queue.get_nowait()
            self.queue.put_nowait(LOST)


class Subscriptions:
    def __init__(self, redis: Redis, hub: StreamHub, session_ttl_s: int) -> None:
        self.redis, self.hub, self.ttl = redis, hub, session_ttl_s
        self.listeners: set[Listener] = set()
        self.pending: set[asyncio.Task[None]] = set()
        hub.on_change = self.on_change

    # --- subscriptions/listen (2026-07-28) ---
    @contextlib.asynccontextmanager
    async def listen(
        self, tenant: str, workspace: str, *, list_changed: bool, uris: frozenset[str]
    ) -> AsyncIterator[asyncio.Queue[dict[str, Any]]]:
        """A queue of the notifications this listener asked for, from now until the block ends."""
        listener = Listener(tenant, workspace, list_changed, uris)
        self.listeners.add(listener)
        try:
            yield listener.queue
        finally:
            self.listeners.discard(listener)

    # --- resources/subscribe (2025 sessions) ---
    async def subscribe(self, session_id: str, tenant: str, workspace: str, uri: str) -> bool:
        """False when the session holds MAX_URIS subscriptions already."""
        mine = keys.resource_subscriptions(tenant, session_id)
        member = f"{workspace}\x1f{uri}"
        if await self.redis.scard(mine) >= MAX_URIS and not await self.redis.sismember(mine, member):
            return False
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.sadd(keys.resource_subscribers(tenant, workspace, uri), session_id)
            pipe.expire(keys.resource_subscribers(tenant, workspace, uri), self.ttl)
            pipe.sadd(mine, member)
            pipe.expire(mine, self.ttl)
            await pipe.execute()
        return True

    async def unsubscribe(self, session_id: str, tenant: str, workspace: str, uri: str) -> None:
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.srem(keys.resource_subscribers(tenant, workspace, uri), session_id)
            pipe.srem(keys.resource_subscriptions(tenant, session_id), f"{workspace}\x1f{uri}")
            await pipe.execute()

    # --- notices, from the hub's reader ---
    def on_change(self, raw: Any) -> None:
        change = changes.decode(raw)
        if change is None:
            return
        for listener in list(self.listeners):
            if (listener.tenant, listener.workspace) != (change.tenant, change.workspace):
                continue
            if change.uri in listener.uris:
                listener.offer(notification(UPDATED, {"uri": change.uri}))
            if change.new and listener.list_changed:
                listener.offer(notification(LIST_CHANGED, {}))
        if self.hub.queues:  # a session's stream is open here: maybe one that subscribed
            task = asyncio.create_task(self._to_sessions(change))
            self.pending.add(task)
            task.add_done_callback(self.pending.discard)

    async def _to_sessions(self, change: changes.Change) -> None:
        try:
            sessions = await self.redis.smembers(keys.resource_subscribers(change.tenant, change.workspace, change.uri))
        except Exception as exc:  # Redis away: this notice is lost, as any notification may be
            log.warning("subscriptions.lookup_failed", extra={"error_type": type(exc).__name__})
            return
        for raw in sessions:
            queue = self.hub.queues.get(raw.decode() if isinstance(raw, bytes) else raw)
            if queue is not None:
                queue.put_nowait(notification(UPDATED, {"uri": change.uri}))

    async def stop(self) -> None:
        """At shutdown: every listen stream ends gracefully."""
        for listener in list(self.listeners):
            with contextlib.suppress(asyncio.QueueFull):
                listener.queue.put_nowait(CLOSE)
        for task in list(self.pending):
            task.cancel()

"""notifications/progress for one tools/call whose client sent a progressToken: 0 when it starts, each step the
worker reports on the call's progress channel (memento_shared.progress) while it runs, and the end."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable
from typing import Any, TypeVar

from memento_gateway.mcp import versions
from memento_gateway.mcp.call import Call
from memento_gateway.mcp.jsonrpc import notification
from memento_shared import progress

log = logging.getLogger(__name__)
T = TypeVar("T")
POLL_S = 0.25  # how often a running call's channel is read: a few Redis reads a second, only while it runs


class ToolProgress:
    def __init__(self, call: Call, params: dict[str, Any], redis: Any, *, reports_steps: bool) -> None:
        """`reports_steps`: the tool's work reports on a progress channel; otherwise only the start and the end are
        sent, and nothing is polled."""
        meta = params.get("_meta")
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        self.wanted = isinstance(token, str | int) and not isinstance(token, bool) and call.emit is not None
        self.call, self.token, self.redis = call, token, redis
        # sent to memory-api; None: no channel to poll
        self.id = uuid.uuid4().hex if self.wanted and reports_steps else None
        self.sent: float | None = None
        self.total = 1  # until the worker says how many steps there are, the call is one step

    async def start(self, message: str) -> None:
        await self._send(0, message)

    async def around(self, work: Awaitable[T]) -> T:
        """`work`'s result, relaying the steps reported meanwhile."""
        if self.id is None:
            return await work
        task = asyncio.ensure_future(work)
        try:
            while not (await asyncio.wait({task}, timeout=POLL_S))[0]:
                await self._relay()
            await self._relay()  # the last steps, reported since the last reading
            return task.result()
        finally:
            task.cancel()  # a no-op once it finished; stops it when this call is cancelled

    async def _relay(self) -> None:
        reported = await progress.read(self.redis, self.call.principal.tenant_id, self.id)
        if reported is not None:
            done, self.total, message = reported
            await self._send(done, message)

    async def finish(self, message: str) -> None:
        await self._send(self.total, message)

    async def _send(self, done: float, message: str) -> None:
        # MCP: progress must increase with each notification, so a repeated or stale reading sends nothing
        if not self.wanted or (self.sent is not None and done <= self.sent):
            return
        self.sent = done
        payload: dict[str, Any] = {"progressToken": self.token, "progress": done, "total": self.total}
        if versions.has_annotations(self.call.session.protocol_version):  # `message` arrived with 2025-03-26
            payload["message"] = message
        try:
            await self.call.emit(notification("notifications/progress", payload))
        except Exception as exc:  # a courtesy: a notification that cannot go out must not fail the call itself
            log.warning("progress.emit_failed", extra={"error_type": type(exc).__name__})

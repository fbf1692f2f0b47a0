"""One request in its session: who makes it, and how to send notifications on the stream that will carry its
answer (progress, log messages). `emit` is None when the answer goes back as plain JSON."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from memento_gateway.mcp.jsonrpc import notification
from memento_gateway.mcp.sessions import Session
from memento_shared.principal import Principal

Emit = Callable[[dict[str, Any]], Awaitable[None]]
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


@dataclass(frozen=True)
class Call:
    session: Session
    principal: Principal  # the caller's, narrowed to the session's profiles and the request's workspace
    emit: Emit | None = None

    async def log(self, level: str, data: dict[str, Any]) -> None:
        """A `notifications/message`, if the client asked for this level with logging/setLevel."""
        wanted = self.session.log_level
        if self.emit is None or wanted is None or LOG_LEVELS.index(level) < LOG_LEVELS.index(wanted):
            return
        await self.emit(notification("notifications/message", {"level": level, "logger": "memento", "data": data}))

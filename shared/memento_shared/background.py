"""What every long-lived background loop in a service shares: stopping its task, and a LISTEN connection of its own
(outside the pool: a pooled connection goes back after each use, a listener must stay)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import asyncpg

log = logging.getLogger(__name__)


async def cancel(task: asyncio.Task[Any] | None) -> None:
    """Cancel a background task and wait until it has unwound."""
    if task is not None:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def listen(dsn: str, channel: str, on_notify: Callable[[], None], name: str) -> asyncpg.Connection | None:
    """A connection calling `on_notify` for each NOTIFY on `channel`; None (logged) when it cannot be opened —
    every caller also polls, so a missing listener only makes it slower to notice."""
    try:
        conn = await asyncpg.connect(dsn, server_settings={"application_name": name})
        await conn.add_listener(channel, lambda *_: on_notify())
        return conn
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        log.warning("listen_failed", extra={"channel": channel, "error_type": type(exc).__name__})
        return None


async def close(conn: asyncpg.Connection | None) -> None:
    if conn is not None and not conn.is_closed():
        await conn.close()

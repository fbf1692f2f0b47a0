"""Redis clients whose timeouts do not eat cancellations.

redis-py bounds a command's send with `asyncio.wait_for` whenever `socket_timeout` is set, and on Python 3.11
`wait_for` swallows a cancellation that arrives as the wrapped call completes (CPython gh-86296, fixed in 3.12). A
send completes at once, so the race is common: one cancel in four was lost in a loop of GETs, which kept a worker's
main loop running after SIGTERM and would drop an MCP cancellation or a deadline on the floor. Reads are bounded with
`asyncio.timeout`, which is correct; so the send here goes without a timeout of its own (a command lands in the
socket buffer, and the read after it is bounded) and the connection's handshake keeps both bounds.
"""

from __future__ import annotations

import functools
from typing import Any

from redis.asyncio import ConnectionPool, Redis
from redis.asyncio.connection import AbstractConnection


class _UnboundedSend:
    """Mixed into whichever connection class the URL asks for (TCP, TLS, Unix socket)."""

    socket_timeout: float | None

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        if not self.is_connected:  # type: ignore[attr-defined]
            await self.connect()  # type: ignore[attr-defined]  # AUTH/HELLO's reads keep socket_timeout
        timeout, self.socket_timeout = self.socket_timeout, None
        try:
            await super().send_packed_command(command, check_health)  # type: ignore[misc]
        finally:
            self.socket_timeout = timeout


@functools.cache
def _cancel_safe(base: type[AbstractConnection]) -> type[AbstractConnection]:
    return type(base.__name__, (_UnboundedSend, base), {})


def connection_pool(url: str, *, timeout: float, connect_timeout: float | None = None, **kwargs: Any) -> ConnectionPool:
    """A pool whose every command waits at most `timeout` for Redis's answer, and its connect `connect_timeout`."""
    pool = ConnectionPool.from_url(
        url, socket_timeout=timeout, socket_connect_timeout=connect_timeout or timeout, **kwargs
    )
    pool.connection_class = _cancel_safe(pool.connection_class)
    return pool


def client(url: str, *, timeout: float, connect_timeout: float | None = None) -> Redis:
    return Redis.from_pool(connection_pool(url, timeout=timeout, connect_timeout=connect_timeout))

"""Redis clients whose timeouts do not eat cancellations.

redis-py bounds a command's send with `asyncio.wait_for` whenever `socket_timeout` is set, and on Python 3.11
`wait_for` swallows a cancellation that arrives as the wrapped call completes (CPython gh-86296, fixed in 3.12). A
send completes at once, so the race is common: one cancel in four was lost in a loop of GETs, which kept a worker's
main loop running after SIGTERM and would drop an MCP cancellation or a deadline on the floor. Reads are bounded with
`asyncio.timeout`, which is correct; the send here is bounded the same way (a large pipeline to a Redis that stopped
reading fills the socket buffers and waits in drain()).
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

from redis.asyncio import ConnectionPool, Redis
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError


class _TimedSend:
    """redis-py's send_packed_command with asyncio.timeout in place of asyncio.wait_for; mixed into whichever
    connection class the URL asks for (TCP, TLS, Unix socket)."""

    async def send_packed_command(self: Any, command: Any, check_health: bool = True) -> None:
        if not self.is_connected:
            await self.connect()
        elif check_health:
            await self.check_health()
        if isinstance(command, str):
            command = command.encode()
        if isinstance(command, bytes):
            command = [command]
        try:
            async with asyncio.timeout(self.socket_timeout):
                self._writer.writelines(command)
                await self._writer.drain()
        except TimeoutError:  # before OSError, its base class
            await self.disconnect(nowait=True)
            raise RedisTimeoutError("Timeout writing to socket") from None
        except OSError as exc:
            await self.disconnect(nowait=True)
            raise RedisConnectionError(f"Error while writing to socket: {exc}") from exc
        except BaseException:
            # a send cut short (cancelled) leaves a partial command on the wire: the connection cannot be reused
            await self.disconnect(nowait=True)
            raise


@functools.cache
def _cancel_safe(base: type[AbstractConnection]) -> type[AbstractConnection]:
    return type(base.__name__, (_TimedSend, base), {})


def connection_pool(url: str, *, timeout: float, connect_timeout: float | None = None, **kwargs: Any) -> ConnectionPool:
    """A pool whose every send and read waits at most `timeout` for Redis, and a connect `connect_timeout`."""
    pool = ConnectionPool.from_url(
        url, socket_timeout=timeout, socket_connect_timeout=connect_timeout or timeout, **kwargs
    )
    pool.connection_class = _cancel_safe(pool.connection_class)
    return pool


def client(url: str, *, timeout: float, connect_timeout: float | None = None) -> Redis:
    return Redis.from_pool(connection_pool(url, timeout=timeout, connect_timeout=connect_timeout))

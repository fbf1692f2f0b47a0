"""Redis clients whose timeouts do not eat cancellations.

redis-py bounds a command's send with `asyncio.wait_for` whenever `socket_timeout` is set, and on Python 3.11
`wait_for` swallows a cancellation that arrives as the wrapped call completes (CPython gh-86296, fixed in 3.12). A
send completes at once, so the race is common: one cancel in four was lost in a loop of GETs, which kept a worker's
main loop running after SIGTERM and would drop an MCP cancellation or a deadline on the floor. Reads are bounded with
`asyncio.timeout`, which is correct; the send here is bounded the same way (a large pipeline to a Redis that stopped
reading fills the socket buffers and waits in drain()).

The state role (REDIS_URL) may be a Redis/Valkey Cluster, named by a `redis+cluster://` URL: `client` then answers
a redis-py `RedisCluster` over the same cancel-safe connections. The queue role (REDIS_QUEUE_URL) is always one
server (`connection_pool`). `queue_wait` makes a write survive a failover (REDIS_WAIT_REPLICAS).
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any
from urllib.parse import unquote, urlsplit

from redis.asyncio import ConnectionPool, Redis, RedisCluster
from redis.asyncio.cluster import ClusterNode
from redis.asyncio.connection import AbstractConnection, Connection, SSLConnection
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from memento_shared.settings import is_cluster_url

# How long one read of a pub/sub connection that only waits for messages (the gateway's stream hub, a worker's wakes)
# waits: a bound, not a poll. A message ends the read at once and a closed connection fails it at once, whatever the
# bound; given explicitly it replaces the client's socket timeout, which would end every quiet read with an error. A
# bound of 1-2 s woke each such process every second or two for nothing (issue 50).
PUBSUB_READ_WAIT_S = 60.0


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


def client(
    url: str,
    *,
    timeout: float,
    connect_timeout: float | None = None,
    wait_replicas: int = 0,
    wait_timeout_ms: int = 500,
) -> Redis | RedisCluster:
    """A client of one server or, for a `redis+cluster://` URL, of a cluster. `wait_replicas` (REDIS_WAIT_REPLICAS)
    is what `queue_wait` asks of it."""
    if is_cluster_url(url):
        found: Redis | RedisCluster = cluster_client(url, timeout=timeout, connect_timeout=connect_timeout)
    else:
        found = Redis.from_pool(connection_pool(url, timeout=timeout, connect_timeout=connect_timeout))
    found.memento_wait = (wait_replicas, wait_timeout_ms)
    return found


def cluster_client(url: str, *, timeout: float, connect_timeout: float | None = None) -> RedisCluster:
    """`redis+cluster://[user:password@]host:port[,host:port...]`: every host a seed, the rest found from them."""
    parts = urlsplit(url)
    credentials, _, hosts = parts.netloc.rpartition("@")
    user, _, password = credentials.partition(":")
    seeds = []
    for seed in hosts.split(","):
        host, _, port = seed.rpartition(":")
        seeds.append(ClusterNode(host.strip("[]"), int(port or 6379)))
    tls = parts.scheme.startswith("rediss")
    cluster = RedisCluster(
        startup_nodes=seeds,
        username=unquote(user) or None,
        password=unquote(password) or None,
        ssl=tls,
        socket_timeout=timeout,
        socket_connect_timeout=connect_timeout or timeout,
    )
    # every node's connections, those found later included, bound their sends as `connection_pool`'s do
    safe = _cancel_safe(SSLConnection if tls else Connection)
    cluster.nodes_manager.connection_kwargs["connection_class"] = safe
    for node in cluster.nodes_manager.startup_nodes.values():
        node.connection_class = safe
    return cluster


def is_cluster(redis: Any) -> bool:
    return isinstance(redis, RedisCluster)


class NotReplicated(RedisError):
    """A write's WAIT saw fewer replicas than REDIS_WAIT_REPLICAS in time: it may not survive a failover."""


def queue_wait(pipe: Any, redis: Any, key: str) -> bool:
    """Append a WAIT for the writes before it on `key`'s server to `pipe` (a pipeline of `redis`), when the client
    was made with wait_replicas > 0; True if one was added (then pass the pipeline's last result to `check_wait`).
    WAIT counts the calling connection's own writes: a pipeline runs on one connection per server, and in a cluster
    the WAIT is sent to the server holding `key`, so it covers exactly the writes before it there."""
    replicas, timeout_ms = getattr(redis, "memento_wait", (0, 0))
    if not replicas:
        return False
    if is_cluster(redis):
        pipe.execute_command("WAIT", replicas, timeout_ms, target_nodes=redis.get_node_from_key(key))
    else:
        pipe.execute_command("WAIT", replicas, timeout_ms)
    return True


def check_wait(redis: Any, acknowledged: Any) -> None:
    """Raise NotReplicated when WAIT's answer is short of the replicas asked for."""
    replicas = getattr(redis, "memento_wait", (0, 0))[0]
    if int(acknowledged) < replicas:
        raise NotReplicated(f"the write reached {int(acknowledged)} of {replicas} replicas in time")

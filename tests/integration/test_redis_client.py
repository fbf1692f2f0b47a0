"""Redis clients with timeouts (memento_shared.redis_client) against the real Valkey: a cancellation always lands.

redis-py's own timed send (asyncio.wait_for) lost about one cancel in four on Python 3.11; a worker's main loop then
went on polling after SIGTERM."""

from __future__ import annotations

import asyncio
import random

import pytest

from memento_shared import redis_client
from memento_shared.worker import create_queue_pool

CANCELS = 200  # with the lost-cancel race, all 200 landing had a chance of about 0.75**200


async def _every_cancel_lands(command) -> None:
    async def loop() -> None:
        while True:
            await command()

    rng = random.Random(7)
    for attempt in range(CANCELS):
        task = asyncio.create_task(loop())
        await asyncio.sleep(rng.uniform(0, 0.005))  # anywhere in a command: connect, send, read, release
        task.cancel()
        done, _ = await asyncio.wait([task], timeout=5)
        assert done, f"cancel {attempt} was swallowed: the task went on running"
        assert task.cancelled()


async def test_a_cancelled_command_stops_its_task(settings):
    client = redis_client.client(settings.redis_url, timeout=5)
    try:
        await _every_cancel_lands(lambda: client.get("memento:test:cancel"))
    finally:
        await client.aclose()


async def test_a_cancelled_queue_poll_stops_its_task(settings):
    """As arq's poll loop talks to the queue: a command, then a MULTI/EXEC pipeline."""
    queue = await create_queue_pool(settings)

    async def poll() -> None:
        await queue.zrangebyscore("memento:test:queue", min=float("-inf"), max=float("inf"), start=0, num=10)
        async with queue.pipeline(transaction=True) as pipe:
            pipe.zrange("memento:test:aborted", 0, -1)
            pipe.zremrangebyscore("memento:test:aborted", min=0, max=1)
            await pipe.execute()

    try:
        await _every_cancel_lands(poll)
    finally:
        await queue.aclose()


@pytest.mark.parametrize("url", ["redis://127.0.0.1:1/0", "rediss://127.0.0.1:1/0", "unix:///tmp/memento-none.sock"])
def test_the_url_still_chooses_the_transport(url):
    pool = redis_client.connection_pool(url, timeout=1)
    transport = {"redis": "Connection", "rediss": "SSLConnection", "unix": "UnixDomainSocketConnection"}
    assert [c.__name__ for c in pool.connection_class.__mro__[1:3]] == [
        "_TimedSend",
        transport[url.split(":")[0]],
    ]

"""The stream hub's reader waits for pub/sub messages without polling (issue 50): idle, it does not wake; a message
after a long idle still reaches its stream at once, and an idle read longer than the client's socket timeout is no
error."""

from __future__ import annotations

import asyncio
import logging

from memento_gateway.mcp.hub import StreamHub
from memento_shared import redis_client


async def test_an_idle_hub_waits_without_polling_and_still_routes_at_once(servers, caplog):
    # a socket timeout shorter than the idle spell: the reader's wait must not be cut short by it
    redis = redis_client.client(servers.valkey.url, timeout=0.5, connect_timeout=2)
    cancelled: list[tuple[str, object]] = []
    hub = StreamHub(redis, on_cancel=lambda session, request: cancelled.append((session, request)))
    reads = 0
    get_message = hub.pubsub.get_message

    async def counted(**kwargs):
        nonlocal reads
        reads += 1
        return await get_message(**kwargs)

    hub.pubsub.get_message = counted
    await hub.start()
    try:
        async with hub.attach("s-idle") as queue:
            await asyncio.sleep(0.3)  # the subscription's confirmation read and ignored
            settled = reads
            with caplog.at_level(logging.WARNING, logger="memento_gateway.mcp.hub"):
                await asyncio.sleep(1.5)
            assert reads - settled == 0, f"the idle reader read {reads - settled} times in 1.5 s"
            assert "stream_hub.redis_error" not in caplog.text
            assert await hub.publish("s-idle", {"n": 1})
            async with asyncio.timeout(1):
                assert await queue.get() == {"n": 1}
            await hub.cancel("s-idle", 7)
            async with asyncio.timeout(1):
                while not cancelled:
                    await asyncio.sleep(0.01)
            assert cancelled == [("s-idle", 7)]
    finally:
        await hub.stop()
        await redis.aclose()

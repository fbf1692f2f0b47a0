"""A Valkey that stops answering (paused, or a network that drops packets without a reset) is not one that is down:
nothing refuses the connection, so a client without a read timeout waits for good. Recall and remember go on
without it (§9.1). The bounds below only catch a hang; they time nothing."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

import pytest
from redis.exceptions import TimeoutError as RedisTimeoutError

from memento_shared import worker
from tests.fixtures.own_redis import own_redis
from tests.fixtures.waiting import eventually

HANG = 20  # seconds: far above REDIS_TIMEOUT_SECONDS, so only a call that waits for Redis for good reaches it


@contextlib.contextmanager
def paused(process_id: int):
    os.kill(process_id, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(process_id, signal.SIGCONT)


async def test_recall_and_remember_answer_while_redis_does_not(servers, tmp_path):
    async with own_redis(servers, tmp_path / "valkey", REDIS_TIMEOUT_SECONDS="0.5") as own:
        keeper = own.app.state.l1_keeper
        args = {"content": "the ingest queue drains nightly", "topic": "t", "type": "fact", "keywords": ["ingest"]}
        stored = (await own.call("remember", args))["result"]["id"]
        with paused(own.valkey.pid):
            async with asyncio.timeout(HANG):
                found = await own.call("recall", {"keywords": ["ingest"]})
            assert [(f["id"], f["tier"]) for f in found["result"]["fragments"]] == [(stored, "L2")]
            assert not keeper.readable, "a failed read pauses L1 reads, so the next recalls do not wait for it"
            async with asyncio.timeout(HANG):
                again = await own.call("recall", {"keywords": ["ingest"]})
            assert [f["tier"] for f in again["result"]["fragments"]] == ["L2"]
            during = {**args, "content": "stored while valkey did not answer"}
            async with asyncio.timeout(HANG):
                written = await own.call("remember", during)
            assert written["result"]["created"] is True
            assert keeper.out_of_step, "the lost L1 write is known"
        # answering again: the keeper rebuilds L1 from Postgres, with the fragment stored meanwhile
        both = [stored, written["result"]["id"]]
        await eventually(
            lambda: own.served_from_l1(["ingest"], both), 60, "L1 rebuilt with the fragment stored meanwhile"
        )


async def test_a_queue_command_gives_up_on_a_redis_that_does_not_answer(servers, tmp_path, monkeypatch):
    """The relay enqueues inside its Postgres transaction and the workers poll through the same pool: a hang there
    held a transaction open and a worker frozen for good."""
    monkeypatch.setattr(worker, "QUEUE_SOCKET_TIMEOUT_S", 0.5)
    async with own_redis(servers, tmp_path / "valkey") as own:
        queue = own.app.state.queue
        with paused(own.valkey.pid):
            # on a pooled connection (a new one would wait in its handshake's read): a batch larger than the socket
            # buffers waits for Redis to read it, so the send is bounded too
            with pytest.raises(RedisTimeoutError, match="writing"):
                async with asyncio.timeout(HANG), queue.pipeline(transaction=False) as pipe:
                    for i in range(256):  # 32 MB: loopback buffers take several
                        pipe.set(f"memento:test:big:{i}", b"x" * 128_000)
                    await pipe.execute()
            with pytest.raises(RedisTimeoutError):  # a command's answer, or a new connection's handshake
                async with asyncio.timeout(HANG):
                    await queue.zcard("memento:test:queue")
        assert await queue.zcard("memento:test:queue") == 0, "a new connection once Redis answers again"


async def test_only_the_first_write_waits_for_a_redis_that_does_not_answer(servers, tmp_path):
    """Once an L1 write is lost, L1 is rebuilt from Postgres when Redis answers again, which covers every later
    write too: those skip Redis instead of each waiting REDIS_TIMEOUT_SECONDS."""
    timeout = 5.0
    async with own_redis(servers, tmp_path / "valkey", REDIS_TIMEOUT_SECONDS=str(timeout)) as own:
        keeper = own.app.state.l1_keeper
        args = {"topic": "t", "type": "fact", "keywords": ["backlog"]}
        with paused(own.valkey.pid):
            async with asyncio.timeout(HANG):
                first = await own.call("remember", {**args, "content": "the first write waits for redis"})
            assert keeper.out_of_step
            async with asyncio.timeout(timeout / 2):  # far from the timeout: Redis was not asked
                second = await own.call("remember", {**args, "content": "the second write does not"})
        ids = {first["result"]["id"], second["result"]["id"]}

        await eventually(lambda: own.served_from_l1(["backlog"], list(ids)), 60, "L1 rebuilt with both writes")

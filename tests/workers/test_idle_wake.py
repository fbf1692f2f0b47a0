"""An idle worker waits for a wake instead of polling twenty times a second (issue 50: three idle workers polling
were most of an idle system's CPU), and still starts a relayed job at once: add_jobs publishes the wake. Its wake
listener reads without polling either, and a quiet spell longer than the queue's socket timeout is no error."""

from __future__ import annotations

import asyncio
import logging
import time

from redis.asyncio.client import PubSub

from memento_shared import worker
from memento_shared.enqueue import JobSpec, add_jobs
from memento_shared.events import envelope, job_id, queue_key
from memento_shared.worker import IDLE_WAIT_S, create_queue_pool
from tests.fixtures.waiting import eventually, truthy
from tests.workers.conftest import hosted_worker


async def test_an_idle_worker_polls_rarely_and_starts_a_relayed_job_at_once(wenv, tenant):
    settings = wenv.settings()
    started: list[float] = []

    async def job(event: dict, rt) -> None:
        started.append(time.monotonic())

    queue = await create_queue_pool(settings)
    try:
        async with hosted_worker("evaluator", {"fragment.stored": job}, settings) as host:
            beats = 0
            beat = host.worker.heart_beat

            async def counted() -> None:  # one heartbeat ends every poll round
                nonlocal beats
                beats += 1
                await beat()

            host.worker.heart_beat = counted
            await asyncio.sleep(3.0)
            assert 1 <= beats <= 3 / IDLE_WAIT_S + 1, f"{beats} poll rounds in 3 s idle (arq's own delay: 60)"
            for n in range(3):
                await asyncio.sleep(0.3)  # idle again between jobs
                await relay_and_wait_for_start(queue, tenant, n, started)
    finally:
        await queue.aclose()


async def test_the_wake_listener_does_not_poll_and_outlasts_the_socket_timeout(wenv, tenant, monkeypatch, caplog):
    monkeypatch.setattr(worker, "QUEUE_SOCKET_TIMEOUT_S", 0.5)  # far shorter than the quiet spell below
    reads = 0
    get_message = PubSub.get_message

    async def counted(self, *args, **kwargs):
        nonlocal reads
        reads += 1
        return await get_message(self, *args, **kwargs)

    monkeypatch.setattr(PubSub, "get_message", counted)
    settings = wenv.settings()
    started: list[float] = []

    async def job(event: dict, rt) -> None:
        started.append(time.monotonic())

    queue = await create_queue_pool(settings)
    try:
        async with hosted_worker("evaluator", {"fragment.stored": job}, settings):
            await asyncio.sleep(0.5)  # subscribed, the confirmation read
            settled = reads
            with caplog.at_level(logging.WARNING, logger="memento_shared.worker"):
                await asyncio.sleep(2.5)
                assert reads == settled, f"the wake listener read {reads - settled} times in 2.5 s idle"
                await relay_and_wait_for_start(queue, tenant, 0, started)  # and still hears the wake
            assert "wake_listener_failed" not in caplog.text
    finally:
        await queue.aclose()


async def relay_and_wait_for_start(queue, tenant: str, n: int, started: list[float]) -> None:
    """Enqueue the n-th job as the relay does (add_jobs, which publishes the wake); it must start well within the
    idle wait, so the wake, not the poll, started it."""
    event_id = f"00000000-0000-4000-8000-{n:04d}{tenant[2:10]}"
    spec = JobSpec(
        "handle_event",
        (envelope(event_id, "fragment.stored", tenant, "default", {"fragment_id": f"f-{n}"}, None),),
        job_id(event_id, "evaluator"),
        queue_key("evaluator"),
    )
    enqueued = time.monotonic()
    async with queue.pipeline(transaction=False) as pipe:
        add_jobs(pipe, queue, [spec])
        assert await pipe.execute() == [1, 1]  # the job, and the wake one worker heard
    await eventually(lambda: truthy(len(started) > n), 10, "the job to start")
    assert started[n] - enqueued < IDLE_WAIT_S / 2, started[n] - enqueued

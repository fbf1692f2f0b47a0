"""An idle worker waits for a wake instead of polling twenty times a second (issue 50: three idle workers polling
were most of an idle system's CPU), and still starts a relayed job at once: add_jobs publishes the wake."""

from __future__ import annotations

import asyncio
import time

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
                event_id = f"00000000-0000-4000-8000-{n:04d}{tenant[2:10]}"
                spec = JobSpec(
                    "handle_event",
                    (envelope(event_id, "fragment.stored", tenant, "default", {"fragment_id": f"f-{n}"}, None),),
                    job_id(event_id, "evaluator"),
                    queue_key("evaluator"),
                )
                await asyncio.sleep(0.3)  # idle again between jobs
                enqueued = time.monotonic()
                async with queue.pipeline(transaction=False) as pipe:
                    add_jobs(pipe, queue, [spec])
                    assert await pipe.execute() == [1, 1]  # the job, and the wake one worker heard
                await eventually(lambda n=n: truthy(len(started) > n), 10, "the job to start")
                assert started[n] - enqueued < IDLE_WAIT_S / 2, started[n] - enqueued
    finally:
        await queue.aclose()

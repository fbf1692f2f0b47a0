"""Recalls' access counts are written off the request path, a short while after they are recorded, one write for all
recorded meanwhile; with nothing recorded the flusher does not wake (issue 50: it woke once a second)."""

from __future__ import annotations

import asyncio

from memento_memory_api.access import AccessRecorder
from memento_memory_api.uow import Scope
from tests.fixtures.waiting import eventually

INSERT = (
    "INSERT INTO agent_memory.fragments (id, tenant_id, content, topic, type, importance, content_hash, ttl_tier)"
    " SELECT 'frag-' || left(md5($1), 6) || lpad(g::text, 10, '0'), $1, 'counted ' || g, 't', 'fact', 0.5,"
    " md5($1 || g), 'permanent' FROM generate_series(1, 2) g RETURNING id"
)


async def test_recorded_accesses_are_flushed_soon_in_one_write_and_an_idle_recorder_sleeps(tenant, owner_pool):
    first, second = [r["id"] for r in await owner_pool.fetch(INSERT, tenant)]
    recorder = AccessRecorder(owner_pool, half_life_days=30, interval=0.2)
    flushes = 0
    flush = recorder.flush

    async def counted() -> None:
        nonlocal flushes
        flushes += 1
        await flush()

    recorder.flush = counted
    recorder.start()
    try:
        await asyncio.sleep(0.7)  # idle: three intervals with nothing recorded
        assert flushes == 0, f"an idle recorder flushed {flushes} times"

        scope = Scope(tenant, "default", "default")
        recorder.record(scope, [first])
        recorder.record(scope, [first, second])

        async def counts() -> dict[str, int]:
            rows = await owner_pool.fetch(
                "SELECT id, access_count FROM agent_memory.fragments WHERE id = ANY($1)", [first, second]
            )
            return {r["id"]: r["access_count"] for r in rows}

        await eventually(lambda: _equals(counts(), {first: 2, second: 1}), 3, "the recorded accesses written")
        assert flushes == 1, "both records went in one write"
        await asyncio.sleep(0.7)  # idle again
        assert flushes == 1, f"an idle recorder flushed again ({flushes})"
        recorder.record(scope, [second])  # and wakes again for the next record
        await eventually(lambda: _equals(counts(), {first: 2, second: 2}), 3, "the next access written")
    finally:
        await recorder.stop()


async def _equals(awaitable, expected) -> bool:
    return await awaitable == expected

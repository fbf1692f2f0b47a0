"""Access bookkeeping (memento_memory_api.access) from several memory-api replicas at once: a flush locks the rows it
counts in one order, the ids sorted, so two flushes over the same rows wait for each other instead of deadlocking
(Postgres aborted one of them, and its counts were lost: "access.flush_failed", DeadlockDetectedError)."""

from __future__ import annotations

import asyncio

import asyncpg

from memento_memory_api.access import AccessRecorder
from memento_memory_api.uow import Scope

BUMP = "UPDATE agent_memory.fragments SET access_count = access_count + 1 WHERE id = $1"


async def test_a_flush_waiting_for_a_row_holds_none_of_the_others(memory_api, tenant, servers, owner_pool):
    ids = []
    for n in range(40):
        body = await memory_api.call(
            "remember", {"content": f"the flush order, note {n}", "topic": "t", "type": "fact"}, tenant=tenant
        )
        ids.append(body["result"]["id"])
    first, *_, last = sorted(ids)
    recorder = AccessRecorder(owner_pool, half_life_days=30)
    recorder.record(Scope(tenant, "default", "default"), sorted(ids, reverse=True))  # recalled in that order
    other = await asyncpg.connect(servers.owner_url)  # another replica's flush, holding `first`
    try:
        async with other.transaction():
            await other.execute(BUMP, first)
            flushing = asyncio.create_task(recorder.flush())
            await asyncio.sleep(0.5)  # the flush now waits for `first`
            async with asyncio.timeout(5):
                # it must not hold `last` meanwhile: that would be a deadlock, and Postgres would abort one of the two
                await other.execute(BUMP, last)
        async with asyncio.timeout(5):
            await flushing
    finally:
        await other.close()
    counts = dict(await owner_pool.fetch("SELECT id, access_count FROM agent_memory.fragments WHERE id = ANY($1)", ids))
    assert (counts.pop(first), counts.pop(last)) == (2, 2)  # both flushes counted them
    assert set(counts.values()) == {1}  # and the recorder's flush every other row

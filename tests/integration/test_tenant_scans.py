"""A tenant's searches read its own rows, not every tenant's. Row-level security alone filters rows after an index
found them: the policy is `system OR (tenant = ... AND ...)`, an OR the planner cannot turn into an index
condition, so a search by word, keyword or topic met every other tenant's matches and threw them away one by one.
On the million-fragment bench store a second tenant of 2,000 fragments waited 1.1 s for each lexical search (the
whole table read) and 0.1 s for each keyword one. Every such scan now also names the caller's tenant and workspace
(RLS still decides what is visible).

Measured, not timed: auto_explain reports each statement's plan with the rows every scan of `fragments` read."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from memento_memory_api.recall import lexical
from memento_memory_api.repositories import fragments as repo
from memento_memory_api.uow import Scope
from memento_shared.db.rls import set_principal
from tests.fixtures.rows import store_fragments
from tests.fixtures.waiting import eventually, truthy

BIG = 3000  # the other tenant's rows, every one matching the searches below
SMALL = 20  # the caller's rows, none matching
BOUND = 100  # rows of `fragments` any one statement may read for the caller: its own, a few times over


def fragment_scans(node: dict) -> list[float]:
    """Rows each heap scan of `fragments` in a plan looked at: returned plus thrown away, over all loops."""
    own = []
    if node.get("Relation Name") == "fragments":
        looked_at = node.get("Actual Rows", 0) + node.get("Rows Removed by Filter", 0)
        own = [(looked_at + node.get("Rows Removed by Index Recheck", 0)) * node.get("Actual Loops", 1)]
    return own + [rows for child in node.get("Plans", []) for rows in fragment_scans(child)]


@asynccontextmanager
async def explained(owner_pool, app_pool, scope: Scope) -> AsyncIterator[tuple[object, list[dict]]]:
    """A transaction as `scope` under the services' role (so RLS applies) on a connection whose every statement's
    plan, with row counts, arrives in the returned list (auto_explain needs a superuser to load it)."""
    role = await app_pool.fetchval("SELECT current_user")
    plans: list[dict] = []

    def collect(_conn, message) -> None:
        if "plan:" in message.message:
            plans.append(json.loads(message.message.split("plan:", 1)[1]))

    async with owner_pool.acquire() as conn:
        await conn.execute("LOAD 'auto_explain'")
        conn.add_log_listener(collect)
        try:
            async with conn.transaction():
                for setting, value in (
                    ("auto_explain.log_min_duration", "0"),
                    ("auto_explain.log_analyze", "on"),
                    ("auto_explain.log_timing", "off"),
                    ("auto_explain.log_format", "json"),
                    ("client_min_messages", "log"),
                ):
                    await conn.execute(f"SET LOCAL {setting} = {value}")
                await conn.execute(f'SET LOCAL ROLE "{role}"')
                await set_principal(
                    conn,
                    tenant_id=scope.tenant_id,
                    workspace=scope.workspace,
                    agent_id=scope.agent_id,
                    access=scope.access,
                )
                yield conn, plans
        finally:
            conn.remove_log_listener(collect)


async def _statements(conn, plans: list[dict]) -> list[tuple[str, float]]:
    """(statement, rows of `fragments` read) for each statement so far that scanned `fragments`. Log messages reach
    listeners through the event loop, so a last marker statement says when all have arrived."""
    await conn.execute("SELECT 'end of plans'")
    await eventually(
        lambda: truthy(plans and "end of plans" in plans[-1]["Query Text"]), 10, "auto_explain's plans", interval=0.01
    )
    scans = [(plan["Query Text"].strip()[:70], fragment_scans(plan["Plan"])) for plan in plans]
    return [(text, sum(rows)) for text, rows in scans if rows]


@pytest.fixture(scope="module")
async def big_tenant(owner_pool) -> str:
    """A tenant whose rows all match, newer than the caller's, statistics up to date."""
    tenant = "t-big-scans"
    if not await owner_pool.fetchval("SELECT count(*) FROM agent_memory.fragments WHERE tenant_id = $1", tenant):
        rows = [
            (f"frag-big{i:012d}", f"alpha beta shared note {i} ERR_CONN_RESET", ["alpha", "beta"]) for i in range(BIG)
        ]
        await store_fragments(owner_pool, tenant, rows)
        await owner_pool.execute("ANALYZE agent_memory.fragments")
    return tenant


@pytest.fixture
async def small_tenant(owner_pool, big_tenant, tenant) -> str:
    rows = [(f"frag-s{tenant[-6:]}{i:05d}", f"gamma delta note {i}", ["gamma"]) for i in range(SMALL)]
    await store_fragments(owner_pool, tenant, rows, days_old=1)
    return tenant


@pytest.mark.parametrize("access", ["agent", "admin"])
async def test_recall_reads_only_the_callers_rows(owner_pool, app_pool, small_tenant, access):
    scope = Scope(small_tenant, "default", "default", access)
    agents = None if access == "admin" else ["default", "other"]
    async with explained(owner_pool, app_pool, scope) as (conn, plans):
        found = {
            "lexical": await lexical.search(conn, "alpha beta", scope, agents, 10),
            "trigram": await lexical.search(conn, "ERR_CONN_RESET", scope, agents, 10),
            "keywords": await repo.by_keywords(conn, ["alpha", "beta"], scope, agents, 10),
            "recent": [r["id"] for r in await repo.recent(conn, scope, agents, 10)],
        }
        read = await _statements(conn, plans)
    assert found["lexical"] == found["trigram"] == found["keywords"] == []
    assert len(found["recent"]) == 10 and all(i.startswith(f"frag-s{small_tenant[-6:]}") for i in found["recent"])
    # full text twice (the second falls back to trigram for the identifier), trigram, L2, recent
    assert len(read) == 5 and sum(text.startswith("WITH m AS") for text, _ in read) == 1, read
    assert max(rows for _, rows in read) <= BOUND, read


async def test_forget_by_topic_and_stats_read_only_the_callers_rows(owner_pool, app_pool, small_tenant):
    scope = Scope(small_tenant, "default", "default")
    async with explained(owner_pool, app_pool, scope) as (conn, plans):
        by_topic = await repo.by_topic(conn, scope, "t", ["default"])
        stats = await repo.stats(conn, scope, ["default"], "none")
        read = await _statements(conn, plans)
    assert len(by_topic) == SMALL
    assert stats["total"] == SMALL and stats["by_type"] == {"fact": SMALL}
    assert len(read) == 3, read  # by topic, the grouping-sets count, and the rows still waiting for their vector
    assert max(rows for _, rows in read) <= BOUND, read

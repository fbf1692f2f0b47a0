"""Seed 003's decay job (the consolidator's PROTOCOL_DECAY_CRON): stored relevance follows the same formula recall
applies, expired memories and skip entries are purged, and a workspace's last decay is recorded for memento_health."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime, timedelta

import pytest

from memento_consolidator.decay import decay
from memento_shared import l1
from memento_shared.domain.decay import decayed
from memento_shared.worker import close_runtime, open_runtime


async def memory(
    owner,
    tenant: str,
    *,
    age_days: float,
    accesses: int = 0,
    used_days: float | None = None,
    expires_days: float | None = None,
    keywords: tuple[str, ...] = (),
) -> str:
    memory_id = "frag-" + secrets.token_hex(8)
    now = datetime.now(UTC)
    await owner.execute(
        "INSERT INTO agent_memory.fragments (id, tenant_id, workspace, content, topic, keywords, type, importance,"
        " content_hash, ttl_tier, created_at, access_count, accessed_at, expires_at)"
        " VALUES ($1, $2, 'default', $1, 'memory', $3, 'observation', 0.5, $1, 'permanent', $4, $5, $6, $7)",
        memory_id,
        tenant,
        list(keywords),
        now - timedelta(days=age_days),
        accesses,
        now - timedelta(days=used_days) if used_days is not None else None,
        now + timedelta(days=expires_days) if expires_days is not None else None,
    )
    return memory_id


@pytest.mark.parametrize("writers", ["1", "3"])
async def test_decay_stores_relevance_purges_what_expired_and_records_the_run(wenv, tenant, writers):
    owner = wenv.owner
    fresh = await memory(owner, tenant, age_days=0.5)
    month = await memory(owner, tenant, age_days=30)
    used = await memory(owner, tenant, age_days=10, accesses=20, used_days=0.2)
    gone = await memory(owner, tenant, age_days=2, expires_days=-1, keywords=("aurora",))
    await owner.execute(
        "INSERT INTO agent_memory.skip_entries (id, tenant_id, workspace, item, reason, expires_at) VALUES"
        " ('skip-old-' || $1, $1, 'default', 'x', 'r', now() - interval '1 minute'),"
        " ('skip-new-' || $1, $1, 'default', 'y', 'r', now() + interval '1 day')",
        tenant,
    )
    settings = wenv.settings(PROTOCOL_DECAY_BATCH_SIZE="100", PROTOCOL_DECAY_WRITERS=writers)
    rt = await open_runtime("consolidator", settings, max_jobs=1)
    try:
        await rt.redis.zadd(l1.key(tenant, "default", "default", "aurora"), {gone: 1.0})
        result = await decay(rt)
        assert result["expired_memories"] >= 1 and result["expired_skips"] >= 1
        rows = {
            r["id"]: r
            for r in await owner.fetch(
                "SELECT id, relevance, created_at, access_count, accessed_at FROM agent_memory.fragments"
                " WHERE tenant_id = $1",
                tenant,
            )
        }
        assert set(rows) == {fresh, month, used}
        decayed_at = await owner.fetchval(
            "SELECT decayed_at FROM agent_memory.protocol_decay WHERE tenant_id = $1", tenant
        )
        for row in rows.values():  # the SQL formula is the Python one recall applies
            expected = decayed(row["created_at"], row["access_count"], row["accessed_at"], decayed_at)
            assert row["relevance"] == pytest.approx(expected, rel=1e-4)
        # a month unused fades below both a fresh memory and an older one in steady use
        assert min(rows[fresh]["relevance"], rows[used]["relevance"]) > 5 * rows[month]["relevance"]
        assert await rt.redis.zscore(l1.key(tenant, "default", "default", "aurora"), gone) is None
        skips = await owner.fetch("SELECT id FROM agent_memory.skip_entries WHERE tenant_id = $1", tenant)
        assert [s["id"] for s in skips] == [f"skip-new-{tenant}"]
        again = await decay(rt)  # nothing moved by more than 1e-4 since: nothing rewritten
        assert again["expired_memories"] == 0 and again["rescored"] <= result["rescored"]
    finally:
        await close_runtime(rt)

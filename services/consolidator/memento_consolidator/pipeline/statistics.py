"""Stage 10: the figures a run reports about its scope after the other stages: fragments by tier, how many have a
vector in the active profile, open dead letters. The count is the number of fragments."""

from __future__ import annotations

from memento_consolidator.pipeline.context import StageContext


async def run(ctx: StageContext) -> int:
    async with ctx.transaction() as conn:
        tiers = await conn.fetch(
            "SELECT ttl_tier, count(*) AS n FROM agent_memory.fragments WHERE tenant_id = $1 AND workspace = $2"
            " GROUP BY ttl_tier",
            ctx.tenant_id,
            ctx.workspace,
        )
        embedded = await conn.fetchval(
            "SELECT count(*) FROM agent_memory.fragment_embeddings WHERE profile_id = (SELECT id FROM"
            " agent_memory.embedding_profiles WHERE is_active) AND tenant_id = $1 AND workspace = $2",
            ctx.tenant_id,
            ctx.workspace,
        )
        dead = await conn.fetchval(
            "SELECT count(*) FROM agent_memory.dead_letters WHERE tenant_id = $1 AND workspace = $2"
            " AND replayed_at IS NULL",
            ctx.tenant_id,
            ctx.workspace,
        )
    by_tier = dict.fromkeys(("hot", "warm", "cold", "permanent"), 0) | {r["ttl_tier"]: r["n"] for r in tiers}
    total = sum(by_tier.values())
    ctx.stats.update(fragments=total, by_tier=by_tier, embedded=embedded, dead_letters=dead)
    return total

"""Stage 4: importance decays for fragments that are rarely used (access_count <= decay.maxAccessCount) and judged
of little use (utility_score < decay.maxUtility): importance x decay.rate, never below decay.minImportance.

Idempotent: decayed_at records the last decay, and a fragment decays at most once per decay.intervalDays
(a new one only after its first interval), however often consolidation runs. Anchors and permanent fragments
never decay."""

from __future__ import annotations

from memento_consolidator.pipeline.context import StageContext

SQL = (
    "UPDATE agent_memory.fragments SET importance = greatest($5::real, importance * $3), decayed_at = now()"
    " WHERE id IN (SELECT id FROM agent_memory.fragments WHERE tenant_id = $1 AND workspace = $2"
    " AND NOT is_anchor AND ttl_tier <> 'permanent' AND importance > $5 AND access_count <= $6"
    " AND utility_score < $7 AND coalesce(decayed_at, created_at) < now() - $4::float8 * interval '1 day'"
    " LIMIT $8 FOR UPDATE SKIP LOCKED)"
)


async def run(ctx: StageContext) -> int:
    decay = ctx.config["decay"]
    return await ctx.repeat(
        SQL,
        ctx.tenant_id,
        ctx.workspace,
        float(decay["rate"]),
        float(decay["intervalDays"]),
        float(decay["minImportance"]),
        int(decay["maxAccessCount"]),
        float(decay["maxUtility"]),
    )

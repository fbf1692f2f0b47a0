"""Stage 2: warm fragments not used for tiers.warmInactiveDays become cold. Anchors stay."""

from __future__ import annotations

from memento_consolidator.pipeline.context import StageContext

SQL = (
    "UPDATE agent_memory.fragments SET ttl_tier = 'cold' WHERE id IN ("
    " SELECT id FROM agent_memory.fragments WHERE tenant_id = $1 AND workspace = $2 AND ttl_tier = 'warm'"
    " AND NOT is_anchor AND coalesce(accessed_at, created_at) < now() - $3::float8 * interval '1 day'"
    " LIMIT $4 FOR UPDATE SKIP LOCKED)"
)


async def run(ctx: StageContext) -> int:
    return await ctx.repeat(SQL, ctx.tenant_id, ctx.workspace, float(ctx.config["tiers"]["warmInactiveDays"]))

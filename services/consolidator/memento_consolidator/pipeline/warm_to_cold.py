"""Stage 2: warm fragments not used for tiers.warmInactiveDays become cold. Anchors stay."""

from __future__ import annotations

from memento_consolidator.pipeline.context import StageContext

MATCHES = (
    "ttl_tier = 'warm' AND NOT is_anchor AND coalesce(accessed_at, created_at) < now() - {0}::float8 * interval '1 day'"
)


async def run(ctx: StageContext) -> int:
    return await ctx.update_matching(MATCHES, [float(ctx.config["tiers"]["warmInactiveDays"])], "ttl_tier = 'cold'")

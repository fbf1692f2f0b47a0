"""Stage 1: hot fragments older than tiers.hotDays and not used within it become warm. Anchors stay."""

from __future__ import annotations

from memento_consolidator.pipeline.context import StageContext

MATCHES = (
    "ttl_tier = 'hot' AND NOT is_anchor AND created_at < now() - {0}::float8 * interval '1 day'"
    " AND coalesce(accessed_at, created_at) < now() - {0}::float8 * interval '1 day'"
)


async def run(ctx: StageContext) -> int:
    return await ctx.update_matching(MATCHES, [float(ctx.config["tiers"]["hotDays"])], "ttl_tier = 'warm'")

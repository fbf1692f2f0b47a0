"""Stage 8: utility_score = agent_memory.utility_score(quality, importance, access_count, last use, half-life)
(migration 0004: quality x (1/2 + 1/2 x importance x recency x use), recency halving every
decay.utilityHalfLifeDays, counted in whole weeks). Only rows whose rounded score changes are written, so a
second run soon after changes nothing, and a daily run rewrites about a seventh of the store. Anchors keep theirs."""

from __future__ import annotations

from memento_consolidator.pipeline.context import StageContext

FORMULA = (
    "agent_memory.utility_score(quality_score, importance, access_count, coalesce(accessed_at, created_at),"
    " {0}::float8)"
)


async def run(ctx: StageContext) -> int:
    half_life = float(ctx.config["decay"]["utilityHalfLifeDays"])
    return await ctx.update_matching(
        f"NOT is_anchor AND utility_score IS DISTINCT FROM {FORMULA}",
        [half_life],
        f"utility_score = {FORMULA}",
        [half_life],
    )

"""Stage 4: importance decays for fragments that are rarely used (access_count <= decay.maxAccessCount) and judged
of little use (utility_score < decay.maxUtility): importance x decay.rate, never below decay.minImportance.

Idempotent: decayed_at records the last decay, and a fragment decays at most once per decay.intervalDays
(a new one only after its first interval), however often consolidation runs. Anchors and permanent fragments
never decay."""

from __future__ import annotations

from memento_consolidator.pipeline.context import StageContext

MATCHES = (
    "NOT is_anchor AND ttl_tier <> 'permanent' AND importance > {1}::real AND access_count <= {2}::int"
    " AND utility_score < {3}::real AND coalesce(decayed_at, created_at) < now() - {0}::float8 * interval '1 day'"
)


async def run(ctx: StageContext) -> int:
    decay = ctx.config["decay"]
    floor = float(decay["minImportance"])
    params = [float(decay["intervalDays"]), floor, int(decay["maxAccessCount"]), float(decay["maxUtility"])]
    set_clause = "importance = greatest({0}::real, importance * {1}::real), decayed_at = now()"
    return await ctx.update_matching(MATCHES, params, set_clause, [floor, float(decay["rate"])])

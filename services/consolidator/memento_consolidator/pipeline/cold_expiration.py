"""Stage 3: delete cold fragments unused for longer than their type's stale threshold (MEMORY_CONFIG
staleThresholds: procedure 30, fact 60, decision 90, default 60 days), and fragments past their own expires_at
(seed 002/003 rows) unless permanent. Anchors are never deleted. Links and vectors go with them (foreign keys);
the L1 keyword sets are cleaned here."""

from __future__ import annotations

from memento_consolidator.pipeline import l1
from memento_consolidator.pipeline.context import StageContext

MATCHES = (
    "NOT is_anchor AND ((ttl_tier = 'cold' AND coalesce(accessed_at, created_at) < now() - interval '1 day'"
    " * coalesce((SELECT d FROM unnest({0}::text[], {1}::float8[]) AS t(kind, d) WHERE kind = type), {2}::float8))"
    " OR (ttl_tier <> 'permanent' AND expires_at < now()))"
)
DELETE = "DELETE FROM agent_memory.fragments WHERE"


async def run(ctx: StageContext) -> int:
    thresholds = {k: float(v) for k, v in ctx.config["staleThresholds"].items()}
    default = thresholds.pop("default", 60.0)
    params = [list(thresholds), list(thresholds.values()), default]
    total = 0
    async for rows in ctx.change_matching(MATCHES, params, DELETE, returning="id, agent_id, keywords"):
        await l1.forget(ctx, rows)
        total += len(rows)
    return total

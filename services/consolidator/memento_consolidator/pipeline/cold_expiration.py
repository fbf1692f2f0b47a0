"""Stage 3: delete cold fragments unused for longer than their type's stale threshold (MEMORY_CONFIG
staleThresholds: procedure 30, fact 60, decision 90, default 60 days), and fragments past their own expires_at
(seed 002/003 rows) unless permanent. Anchors are never deleted. Links and vectors go with them (foreign keys);
the L1 keyword sets are cleaned here."""

from __future__ import annotations

from memento_consolidator.pipeline import l1
from memento_consolidator.pipeline.context import StageContext

SQL = (
    "DELETE FROM agent_memory.fragments WHERE id IN ("
    " SELECT id FROM agent_memory.fragments f WHERE tenant_id = $1 AND workspace = $2 AND NOT is_anchor AND ("
    "  (ttl_tier = 'cold' AND coalesce(accessed_at, created_at) < now() - interval '1 day' * coalesce("
    "    (SELECT d FROM unnest($3::text[], $4::float8[]) AS t(kind, d) WHERE kind = f.type), $5::float8))"
    "  OR (ttl_tier <> 'permanent' AND expires_at < now()))"
    " LIMIT $6 FOR UPDATE SKIP LOCKED) RETURNING id, agent_id, keywords"
)


async def run(ctx: StageContext) -> int:
    thresholds = {k: float(v) for k, v in ctx.config["staleThresholds"].items()}
    default = thresholds.pop("default", 60.0)
    total = 0
    while True:
        async with ctx.transaction() as conn:
            rows = await conn.fetch(
                SQL, ctx.tenant_id, ctx.workspace, list(thresholds), list(thresholds.values()), default, ctx.batch_size
            )
        await l1.forget(ctx, rows)
        total += len(rows)
        if len(rows) < ctx.batch_size:
            return total

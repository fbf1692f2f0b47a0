"""Stage 8: utility_score = agent_memory.utility_score(quality, importance, access_count, last use, half-life)
(migration 0004: quality x (1/2 + 1/2 x importance x recency x use), recency halving every
decay.utilityHalfLifeDays). Only rows whose rounded score changes are written, so a second run soon after
changes nothing. Anchors keep theirs. Walks the workspace in id order, a batch at a time."""

from __future__ import annotations

from memento_consolidator.pipeline.context import StageContext

FORMULA = (
    "agent_memory.utility_score(f.quality_score, f.importance, f.access_count, coalesce(f.accessed_at, f.created_at),"
    " $5)"
)
SQL = (
    "WITH batch AS (SELECT id FROM agent_memory.fragments WHERE tenant_id = $1 AND workspace = $2 AND id > $3"
    "  ORDER BY id LIMIT $4),"
    f" changed AS (UPDATE agent_memory.fragments f SET utility_score = {FORMULA} FROM batch"
    f"  WHERE f.id = batch.id AND NOT f.is_anchor AND f.utility_score IS DISTINCT FROM {FORMULA} RETURNING 1)"
    " SELECT (SELECT max(id) FROM batch) AS last, (SELECT count(*) FROM batch) AS seen,"
    " (SELECT count(*) FROM changed)::int AS changed"
)


async def run(ctx: StageContext) -> int:
    half_life = float(ctx.config["decay"]["utilityHalfLifeDays"])
    changed, cursor = 0, ""
    while True:
        async with ctx.transaction() as conn:
            row = await conn.fetchrow(SQL, ctx.tenant_id, ctx.workspace, cursor, ctx.batch_size, half_life)
        changed += row["changed"]
        if row["seen"] < ctx.batch_size:
            return changed
        cursor = row["last"]

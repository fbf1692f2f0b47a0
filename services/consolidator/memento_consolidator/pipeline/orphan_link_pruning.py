"""Stage 7: links that lead nowhere. Rows of fragment_links disappear with their fragments (foreign keys), but the
linked_to arrays are plain ids: entries naming a fragment that no longer exists, or the fragment itself, are
removed; so are links from a fragment to itself (dedup never makes them, older data might). The count is the
entries and links removed. Walks the workspace in id order, a batch at a time."""

from __future__ import annotations

from memento_consolidator.pipeline.context import StageContext

ARRAYS_SQL = (
    "WITH batch AS (SELECT id, linked_to FROM agent_memory.fragments WHERE tenant_id = $1 AND workspace = $2"
    "  AND id > $3 AND linked_to <> '{}' ORDER BY id LIMIT $4),"
    " fixed AS (SELECT b.id, cardinality(b.linked_to) AS before, ARRAY(SELECT x FROM unnest(b.linked_to) x"
    "  WHERE x <> b.id AND EXISTS (SELECT 1 FROM agent_memory.fragments g WHERE g.id = x)) AS kept FROM batch b),"
    " changed AS (UPDATE agent_memory.fragments f SET linked_to = fixed.kept FROM fixed"
    "  WHERE f.id = fixed.id AND cardinality(fixed.kept) < fixed.before"
    "  RETURNING fixed.before - cardinality(fixed.kept) AS removed)"
    " SELECT (SELECT max(id) FROM batch) AS last, (SELECT count(*) FROM batch) AS seen,"
    " coalesce((SELECT sum(removed) FROM changed), 0)::int AS removed"
)
SELF_LINKS_SQL = (
    "DELETE FROM agent_memory.fragment_links WHERE id IN (SELECT id FROM agent_memory.fragment_links"
    " WHERE tenant_id = $1 AND workspace = $2 AND from_id = to_id LIMIT $3)"
)


async def run(ctx: StageContext) -> int:
    removed, cursor = 0, ""
    while True:
        async with ctx.transaction() as conn:
            row = await conn.fetchrow(ARRAYS_SQL, ctx.tenant_id, ctx.workspace, cursor, ctx.batch_size)
        removed += row["removed"]
        if row["seen"] < ctx.batch_size:
            break
        cursor = row["last"]
    return removed + await ctx.repeat(SELF_LINKS_SQL, ctx.tenant_id, ctx.workspace)

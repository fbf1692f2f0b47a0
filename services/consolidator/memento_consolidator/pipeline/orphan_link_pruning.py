"""Stage 7: links that lead nowhere. Rows of fragment_links disappear with their fragments (foreign keys), but the
linked_to arrays are plain ids: entries naming a fragment that no longer exists, or the fragment itself, are
removed; so are links from a fragment to itself (dedup never makes them, older data might). A superseded_by naming
a fragment that no longer exists (the replacement expired) is cleared with them, so the original is current again
(supersede always links the original to its replacement, so the same rows hold both). The count is the entries and
links removed (a cleared superseded_by is not counted). One pass finds the rows, each batch is fixed in its own
transaction."""

from __future__ import annotations

from memento_consolidator.pipeline.context import StageContext


def _kept(row: str) -> str:
    return (
        f"ARRAY(SELECT x FROM unnest({row}.linked_to) x WHERE x <> {row}.id"
        " AND EXISTS (SELECT 1 FROM agent_memory.fragments g WHERE g.id = x))"
    )


def _dangling(row: str) -> str:
    return (
        f"({row}.superseded_by IS NOT NULL"
        f" AND NOT EXISTS (SELECT 1 FROM agent_memory.fragments g WHERE g.id = {row}.superseded_by))"
    )


# A dangling superseded_by is found on its own too: stores from before this stage cleared it had pruned the
# linked_to entry already, leaving the original hidden behind a replacement that no longer exists.
FIND = (
    "SELECT f.id FROM agent_memory.fragments f WHERE f.tenant_id = $1 AND f.workspace = $2"
    f" AND ((f.linked_to <> '{{}}' AND cardinality({_kept('f')}) < cardinality(f.linked_to)) OR {_dangling('f')})"
)
FIX = (
    f"UPDATE agent_memory.fragments f SET linked_to = {_kept('f')},"
    f" superseded_by = CASE WHEN {_dangling('f')} THEN NULL ELSE f.superseded_by END"
    " FROM (SELECT id, cardinality(linked_to) AS before FROM agent_memory.fragments WHERE id = ANY($1) FOR UPDATE) old"
    f" WHERE f.id = old.id AND (cardinality({_kept('f')}) < cardinality(f.linked_to) OR {_dangling('f')})"
    " RETURNING old.before - cardinality(f.linked_to) AS removed"
)
SELF_LINKS = "DELETE FROM agent_memory.fragment_links WHERE tenant_id = $1 AND workspace = $2 AND from_id = to_id"


async def run(ctx: StageContext) -> int:
    removed = 0
    async for batch in ctx.stream(FIND, ctx.tenant_id, ctx.workspace):
        async with ctx.transaction() as conn:
            removed += sum(r["removed"] for r in await conn.fetch(FIX, [r["id"] for r in batch]))
    async with ctx.transaction() as conn:
        status = await conn.execute(SELF_LINKS, ctx.tenant_id, ctx.workspace)
    return removed + int(status.rsplit(" ", 1)[-1])

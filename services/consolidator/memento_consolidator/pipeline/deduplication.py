"""Stage 5: fragments of one agent namespace with the same content are merged into the oldest (seed 000 §8).

"Same content" is the content with case, whitespace and punctuation normalised: the content hash is unique per
namespace already, so exact copies cannot exist there, but "Deploy on Tuesday." and "deploy on tuesday" can.
Namespaces are never merged across: that would move knowledge between agents.

For each group, in one transaction: the survivor takes the sum of the access counts, the latest access and the
highest importance; links to or from the duplicates are re-pointed to it (dropping any that would duplicate an
existing link or point at itself), as are linked_to entries, superseded_by and version history; then the
duplicates are deleted. Anchors and permanent fragments are never deleted: they stay as they are, even in a group.
Groups are found server-side a batch at a time; merged groups stop matching, so the next query finds the next.
"""

from __future__ import annotations

from memento_consolidator.pipeline import l1
from memento_consolidator.pipeline.context import StageContext

NORMALISED = "md5(btrim(regexp_replace(lower(content), '[[:space:][:punct:]]+', ' ', 'g')))"

DELETABLE = "(NOT is_anchor AND ttl_tier <> 'permanent')"
# groups with something to delete: a deletable row besides the oldest, which survives whatever it is
GROUPS_SQL = (
    "SELECT array_agg(id ORDER BY created_at, id) AS ids FROM agent_memory.fragments"
    f" WHERE tenant_id = $1 AND workspace = $2 GROUP BY agent_id, {NORMALISED}"
    f" HAVING count(*) FILTER (WHERE {DELETABLE})"
    f"  > CASE WHEN (array_agg({DELETABLE} ORDER BY created_at, id))[1] THEN 1 ELSE 0 END"
    " LIMIT $3"
)


async def run(ctx: StageContext) -> int:
    merged = 0
    skipped: set[str] = set()  # groups whose rows were busy: the next run takes them
    while True:
        async with ctx.transaction() as conn:
            groups = [g["ids"] for g in await conn.fetch(GROUPS_SQL, ctx.tenant_id, ctx.workspace, ctx.batch_size)]
        groups = [g for g in groups if g[0] not in skipped]
        if not groups:
            return merged
        for ids in groups:
            done = await _merge(ctx, ids)
            if done is None:
                skipped.add(ids[0])
            merged += done or 0


async def _merge(ctx: StageContext, ids: list[str]) -> int | None:
    async with ctx.transaction() as conn:
        rows = await conn.fetch(
            "SELECT id, is_anchor, ttl_tier FROM agent_memory.fragments WHERE id = ANY($1)"
            " ORDER BY created_at, id FOR UPDATE SKIP LOCKED",
            ids,
        )
        if len(rows) != len(ids):
            return None  # a writer holds one of them right now
        survivor = rows[0]["id"]
        victims = [r["id"] for r in rows[1:] if not r["is_anchor"] and r["ttl_tier"] != "permanent"]
        if not victims:
            return 0
        await conn.execute(
            "UPDATE agent_memory.fragments s SET access_count = s.access_count + v.access_count,"
            " accessed_at = greatest(s.accessed_at, v.accessed_at), importance = greatest(s.importance, v.importance),"
            " linked_to = ARRAY(SELECT DISTINCT x FROM (SELECT unnest(s.linked_to) UNION ALL"
            "   SELECT unnest(f.linked_to) FROM agent_memory.fragments f WHERE f.id = ANY($2)) u(x)"
            "   WHERE x <> s.id AND x <> ALL($2::text[]))"
            " FROM (SELECT sum(access_count)::int AS access_count, max(accessed_at) AS accessed_at,"
            "   max(importance) AS importance FROM agent_memory.fragments WHERE id = ANY($2)) v WHERE s.id = $1",
            survivor,
            victims,
        )
        await _repoint_links(conn, survivor, victims)
        await conn.execute(
            "UPDATE agent_memory.fragments SET linked_to = ARRAY(SELECT DISTINCT CASE WHEN x = ANY($2) THEN $1 ELSE x"
            " END FROM unnest(linked_to) x WHERE NOT (x = ANY($2) AND id = $1)) WHERE tenant_id = $3"
            " AND workspace = $4 AND linked_to && $2 AND id <> ALL($2)",
            survivor,
            victims,
            ctx.tenant_id,
            ctx.workspace,
        )
        await conn.execute(
            "UPDATE agent_memory.fragments SET superseded_by = $1 WHERE superseded_by = ANY($2) AND id <> $1"
            " AND tenant_id = $3 AND workspace = $4",
            survivor,
            victims,
            ctx.tenant_id,
            ctx.workspace,
        )
        await conn.execute(
            "UPDATE agent_memory.fragment_versions SET fragment_id = $1 WHERE fragment_id = ANY($2)", survivor, victims
        )
        deleted = await conn.fetch(
            "DELETE FROM agent_memory.fragments WHERE id = ANY($1) RETURNING id, agent_id, keywords", victims
        )
    await l1.forget(ctx, deleted)
    return len(deleted)


async def _repoint_links(conn, survivor: str, victims: list[str]) -> None:
    """Copy every link touching a duplicate onto the survivor; the duplicates' own rows go with them (cascade)."""
    await conn.execute(
        "INSERT INTO agent_memory.fragment_links (tenant_id, workspace, agent_id, from_id, to_id, relation_type,"
        " created_at) SELECT DISTINCT ON (new_from, new_to) tenant_id, workspace, agent_id, new_from, new_to,"
        " relation_type, created_at FROM (SELECT l.*, CASE WHEN l.from_id = ANY($2) THEN $1 ELSE l.from_id END"
        " AS new_from, CASE WHEN l.to_id = ANY($2) THEN $1 ELSE l.to_id END AS new_to"
        " FROM agent_memory.fragment_links l WHERE l.from_id = ANY($2) OR l.to_id = ANY($2)) moved"
        " WHERE new_from <> new_to ORDER BY new_from, new_to, created_at ON CONFLICT (from_id, to_id) DO NOTHING",
        survivor,
        victims,
    )

"""Stage 5: fragments of one agent namespace with the same content are merged into the oldest (seed 000 §8).

"Same content" is the content with case, whitespace and punctuation normalised: the content hash is unique per
namespace already, so exact copies cannot exist there, but "Deploy on Tuesday." and "deploy on tuesday" can.
Namespaces are never merged across: that would move knowledge between agents.

For each group the oldest fragment survives. It takes the sum of the access counts, the latest access and the
highest importance; links to or from the duplicates are re-pointed to it (dropping any that would duplicate an
existing link or point at itself), as are linked_to entries, superseded_by and version history; then the
duplicates are deleted. Anchors and permanent fragments are never deleted: they stay as they are, even in a group.

One pass over the content_key index finds the duplicated keys; their groups are merged a batch of keys per
transaction, set-based, so the rows that may point at a duplicate are scanned once per batch, not once per group.
"""

from __future__ import annotations

from memento_consolidator.pipeline import l1
from memento_consolidator.pipeline.context import StageContext

# content_key (migration 0004) is the normalised content's hash, generated with the row and indexed
KEYS_SQL = (
    "SELECT agent_id, content_key FROM agent_memory.fragments WHERE tenant_id = $1 AND workspace = $2"
    " GROUP BY agent_id, content_key HAVING count(*) > 1"
)
MEMBERS_SQL = (
    "SELECT id, agent_id, content_key, NOT is_anchor AND ttl_tier <> 'permanent' AS deletable"
    " FROM agent_memory.fragments WHERE tenant_id = $1 AND workspace = $2 AND agent_id = ANY($3)"
    " AND content_key = ANY($4) ORDER BY agent_id, content_key, created_at, id"
)
# the (survivor, duplicate) pairs of a batch, as a relation every statement below joins
PAIRS = "(SELECT * FROM unnest($1::text[], $2::text[]) AS pairs(survivor, victim))"

# The survivor absorbs its duplicates: counts summed, latest access, highest importance, their links merged.
ABSORB = (
    "UPDATE agent_memory.fragments s SET access_count = s.access_count + a.access_count,"
    " accessed_at = greatest(s.accessed_at, a.accessed_at), importance = greatest(s.importance, a.importance),"
    " linked_to = ARRAY(SELECT DISTINCT x FROM unnest(s.linked_to || a.linked_to) x"
    "  WHERE x <> s.id AND x <> ALL($2::text[]))"
    " FROM (SELECT p.survivor, sum(v.access_count)::int AS access_count, max(v.accessed_at) AS accessed_at,"
    "  max(v.importance) AS importance,"
    "  ARRAY(SELECT DISTINCT l FROM agent_memory.fragments w, unnest(w.linked_to) l"
    f"   WHERE w.id = ANY(array_agg(p.victim))) AS linked_to FROM {PAIRS} p"
    "  JOIN agent_memory.fragments v ON v.id = p.victim GROUP BY p.survivor) a WHERE s.id = a.survivor"
)
REPOINT_LINKS = (
    "INSERT INTO agent_memory.fragment_links (tenant_id, workspace, agent_id, from_id, to_id, relation_type,"
    " created_at) SELECT DISTINCT ON (new_from, new_to) tenant_id, workspace, agent_id, new_from, new_to,"
    " relation_type, created_at FROM (SELECT l.*, coalesce(f.survivor, l.from_id) AS new_from,"
    f"  coalesce(t.survivor, l.to_id) AS new_to FROM agent_memory.fragment_links l LEFT JOIN {PAIRS} f"
    f"  ON f.victim = l.from_id LEFT JOIN {PAIRS} t ON t.victim = l.to_id"
    "  WHERE l.from_id = ANY($2) OR l.to_id = ANY($2)) moved"
    " WHERE new_from <> new_to ORDER BY new_from, new_to, created_at ON CONFLICT (from_id, to_id) DO NOTHING"
)
# one scan of the workspace per batch for the rows that name a duplicate
REPOINT_REFERENCES = (
    "UPDATE agent_memory.fragments f SET"
    " linked_to = ARRAY(SELECT DISTINCT coalesce(p.survivor, x) FROM unnest(f.linked_to) x"
    f"  LEFT JOIN {PAIRS} p ON p.victim = x WHERE coalesce(p.survivor, x) <> f.id),"
    f" superseded_by = coalesce((SELECT p.survivor FROM {PAIRS} p WHERE p.victim = f.superseded_by), f.superseded_by)"
    " WHERE f.tenant_id = $3 AND f.workspace = $4 AND f.id <> ALL($2)"
    " AND (f.linked_to && $2 OR f.superseded_by = ANY($2))"
)
REPOINT_VERSIONS = (
    f"UPDATE agent_memory.fragment_versions v SET fragment_id = p.survivor FROM {PAIRS} p"
    " WHERE v.fragment_id = p.victim"
)


async def run(ctx: StageContext) -> int:
    merged = 0
    async for keys in ctx.stream(KEYS_SQL, ctx.tenant_id, ctx.workspace):
        merged += await _merge(ctx, {(k["agent_id"], k["content_key"]) for k in keys})
    return merged


async def _merge(ctx: StageContext, keys: set[tuple[str, str]]) -> int:
    async with ctx.transaction() as conn:
        members = await conn.fetch(
            MEMBERS_SQL, ctx.tenant_id, ctx.workspace, sorted({a for a, _ in keys}), sorted({k for _, k in keys})
        )
    groups: dict[tuple[str, str], list] = {}
    for row in members:
        if (row["agent_id"], row["content_key"]) in keys:
            groups.setdefault((row["agent_id"], row["content_key"]), []).append(row)
    survivors, victims = [], []
    for rows in groups.values():  # oldest first: it survives, whatever it is
        for row in rows[1:]:
            if row["deletable"]:
                survivors.append(rows[0]["id"])
                victims.append(row["id"])
    if not victims:
        return 0
    async with ctx.transaction() as conn:
        # rows a writer holds right now are left for the next run
        present = {
            r["id"]
            for r in await conn.fetch(
                "SELECT id FROM agent_memory.fragments WHERE id = ANY($1) FOR UPDATE SKIP LOCKED",
                sorted({*survivors, *victims}),
            )
        }
        pairs = [(s, v) for s, v in zip(survivors, victims, strict=True) if s in present and v in present]
        if not pairs:
            return 0
        survivors, victims = [p[0] for p in pairs], [p[1] for p in pairs]
        await conn.execute(ABSORB, survivors, victims)
        await conn.execute(REPOINT_LINKS, survivors, victims)
        await conn.execute(REPOINT_REFERENCES, survivors, victims, ctx.tenant_id, ctx.workspace)
        await conn.execute(REPOINT_VERSIONS, survivors, victims)
        deleted = await conn.fetch(
            "DELETE FROM agent_memory.fragments WHERE id = ANY($1) RETURNING id, agent_id, keywords", victims
        )
    await l1.forget(ctx, deleted)
    return len(deleted)

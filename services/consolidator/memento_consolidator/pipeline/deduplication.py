"""Stage 5: fragments of one agent namespace with the same content are merged into the oldest (seed 000 §8).

"Same content" is the content with its Unicode form, case and whitespace normalised (content_key, migration 0008):
the content hash is unique per namespace already, so exact copies cannot exist there, but "Deploy on Tuesday." and
"deploy on  TUESDAY." can. Punctuation and symbols count: "x > 5" and "x < 5" are different notes.
Namespaces are never merged across: that would move knowledge between agents.

For each group the oldest fragment survives. It takes the sum of the access counts, the latest access and the
highest importance; links to or from the duplicates are re-pointed to it (dropping any that would duplicate an
existing link or point at itself), as are linked_to entries (each duplicate named there is replaced by its survivor),
superseded_by and version history; then the duplicates are deleted. Anchors and permanent fragments are never
deleted: they stay as they are, even in a group.

One pass over the content_key index finds the duplicated keys; their groups are merged a batch of keys per
transaction, set-based, so the rows that may point at a duplicate are scanned once per batch, not once per group.
The groups are read in one transaction and merged in another: the merge locks each (survivor, duplicate) pair and
checks again, on the locked rows, that both still have the group's key and that the duplicate is still deletable,
so a fragment amended or made an anchor meanwhile is left alone.
"""

from __future__ import annotations

from typing import Any

from memento_consolidator.pipeline import l1
from memento_consolidator.pipeline.context import StageContext

# content_key (migrations 0004, 0008) is the normalised content's hash, generated with the row and indexed
KEYS_SQL = (
    "SELECT agent_id, content_key FROM agent_memory.fragments WHERE tenant_id = $1 AND workspace = $2"
    " GROUP BY agent_id, content_key HAVING count(*) > 1"
)


def deletable(alias: str = "") -> str:
    """A duplicate that may go: anchors and permanent fragments are kept even when their content repeats."""
    return f"NOT {alias}is_anchor AND {alias}ttl_tier <> 'permanent'"


MEMBERS_SQL = (
    f"SELECT id, agent_id, content_key, {deletable()} AS deletable"
    " FROM agent_memory.fragments WHERE tenant_id = $1 AND workspace = $2 AND agent_id = ANY($3)"
    " AND content_key = ANY($4) ORDER BY agent_id, content_key, created_at, id"
)
# the (survivor, duplicate) pairs of a batch, as a relation every statement below joins
PAIRS = "(SELECT * FROM unnest($1::text[], $2::text[]) AS pairs(survivor, victim))"

# The survivor absorbs its duplicates: counts summed, latest access, highest importance, their links merged.
ABSORB = (
    "UPDATE agent_memory.fragments s SET access_count = s.access_count + a.access_count,"
    " accessed_at = greatest(s.accessed_at, a.accessed_at), importance = greatest(s.importance, a.importance),"
    # a duplicate named in either list is replaced by its survivor (possibly another group's), never dropped
    f" linked_to = ARRAY(SELECT DISTINCT coalesce(p.survivor, x) FROM unnest(s.linked_to || a.linked_to) x"
    f"  LEFT JOIN {PAIRS} p ON p.victim = x WHERE coalesce(p.survivor, x) <> s.id)"
    " FROM (SELECT p.survivor, sum(v.access_count)::int AS access_count, max(v.accessed_at) AS accessed_at,"
    "  max(v.importance) AS importance,"
    "  ARRAY(SELECT DISTINCT l FROM agent_memory.fragments w, unnest(w.linked_to) l"
    f"   WHERE w.id = ANY(array_agg(p.victim))) AS linked_to FROM {PAIRS} p"
    "  JOIN agent_memory.fragments v ON v.id = p.victim GROUP BY p.survivor) a WHERE s.id = a.survivor"
)
# Locks the pairs still to merge, judged on the rows as they are now (a row a concurrent write changed after the
# groups were read is re-evaluated on its new version): both still carry the group's key in one namespace, and the
# duplicate is still deletable. A pair whose rows a writer holds right now is left for the next run.
LOCK_PAIRS = (
    "SELECT s.id AS survivor, v.id AS victim FROM unnest($1::text[], $2::text[], $3::text[]) AS p(survivor, victim,"
    " content_key) JOIN agent_memory.fragments s ON s.id = p.survivor JOIN agent_memory.fragments v ON v.id = p.victim"
    " WHERE s.content_key = p.content_key AND v.content_key = p.content_key AND v.agent_id = s.agent_id"
    f" AND {deletable('v.')} ORDER BY v.id FOR UPDATE OF s, v SKIP LOCKED"
)
REPOINT_LINKS = (
    "INSERT INTO agent_memory.fragment_links (tenant_id, workspace, agent_id, from_id, to_id, relation_type,"
    " created_at) SELECT DISTINCT ON (new_from, new_to, agent_id) tenant_id, workspace, agent_id, new_from, new_to,"
    " relation_type, created_at FROM (SELECT l.*, coalesce(f.survivor, l.from_id) AS new_from,"
    f"  coalesce(t.survivor, l.to_id) AS new_to FROM agent_memory.fragment_links l LEFT JOIN {PAIRS} f"
    f"  ON f.victim = l.from_id LEFT JOIN {PAIRS} t ON t.victim = l.to_id"
    "  WHERE l.from_id = ANY($2) OR l.to_id = ANY($2)) moved"
    " WHERE new_from <> new_to ORDER BY new_from, new_to, agent_id, created_at"
    " ON CONFLICT (from_id, to_id, agent_id, tenant_id) DO NOTHING"
)
# one scan of the workspace per batch for the rows that name a duplicate
REPOINT_REFERENCES = (
    "UPDATE agent_memory.fragments f SET"
    " linked_to = ARRAY(SELECT DISTINCT coalesce(p.survivor, x) FROM unnest(f.linked_to) x"
    f"  LEFT JOIN {PAIRS} p ON p.victim = x WHERE coalesce(p.survivor, x) <> f.id),"
    # a note superseded by a copy of itself (a case or spacing fix) survives it: it is then superseded by nothing
    f" superseded_by = nullif(coalesce((SELECT p.survivor FROM {PAIRS} p WHERE p.victim = f.superseded_by),"
    " f.superseded_by), f.id)"
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
    return await merge_pairs(ctx, await find_pairs(ctx, keys))


async def find_pairs(ctx: StageContext, keys: set[tuple[str, str]]) -> list[tuple[str, str, str]]:
    """(survivor, duplicate, content_key) of the groups of `keys` (agent_id, content_key), as read now."""
    async with ctx.transaction() as conn:
        members = await conn.fetch(
            MEMBERS_SQL, ctx.tenant_id, ctx.workspace, sorted({a for a, _ in keys}), sorted({k for _, k in keys})
        )
    groups: dict[tuple[str, str], list[Any]] = {}
    for row in members:
        if (row["agent_id"], row["content_key"]) in keys:
            groups.setdefault((row["agent_id"], row["content_key"]), []).append(row)
    pairs = []
    for (_, key), rows in groups.items():  # oldest first: it survives, whatever it is
        pairs.extend((rows[0]["id"], row["id"], key) for row in rows[1:] if row["deletable"])
    return pairs


async def merge_pairs(ctx: StageContext, candidates: list[tuple[str, str, str]]) -> int:
    """Merge each duplicate into its survivor, in one transaction, for the pairs that still qualify once locked
    (LOCK_PAIRS): the candidates may be stale by now. Returns how many duplicates were deleted."""
    if not candidates:
        return 0
    async with ctx.transaction() as conn:
        locked = await conn.fetch(LOCK_PAIRS, *(list(column) for column in zip(*candidates, strict=True)))
        if not locked:
            return 0
        survivors, victims = [r["survivor"] for r in locked], [r["victim"] for r in locked]
        await conn.execute(ABSORB, survivors, victims)
        await conn.execute(REPOINT_LINKS, survivors, victims)
        await conn.execute(REPOINT_REFERENCES, survivors, victims, ctx.tenant_id, ctx.workspace)
        await conn.execute(REPOINT_VERSIONS, survivors, victims)
        deleted = await conn.fetch(
            "DELETE FROM agent_memory.fragments WHERE id = ANY($1) RETURNING id, agent_id, keywords", victims
        )
    await l1.forget(ctx, deleted)
    return len(deleted)

"""SQL for fragments and their links. Every query runs under the caller's RLS principal.

Queries that search (by word, keyword, topic, age) also name the caller's tenant and workspace, though RLS already
limits the rows to them: the policy's `system OR (tenant = ... AND ...)` hides that equality from the planner, so a
search would meet every tenant's matches and drop the others' one by one (1.1-1.3 s for a small tenant's lexical search
beside a million-fragment one; tests/integration/test_tenant_scans.py). By id, a row is found directly."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import asyncpg

from memento_memory_api.recall.filters import NO_FILTERS, Filters
from memento_memory_api.uow import Scope
from memento_shared.db.references import clear_references

COLUMNS = (
    "id, content, topic, type, keywords, importance, ttl_tier, is_anchor, created_at, accessed_at,"
    " estimated_tokens, agent_id, access_count, source, content_hash, confidence, supersedes, superseded_by,"
    " updated_at, expires_at, linkages, case_id, keywords_given, thread, seq, event_from, event_to, event_said,"
    " expansion, facts, entities"
)
F_COLUMNS = ", ".join("f." + c.strip() for c in COLUMNS.split(","))  # COLUMNS of a statement's fragments `f`
_PROFILE = re.compile(r"^[a-z0-9_]+$")


def profile_literal(profile_id: str) -> str:
    """`profile_id` as it may stand in a statement's text (statements are cached per profile; ValueError if it holds
    anything but lower-case letters, digits and underscores)."""
    if not _PROFILE.match(profile_id):
        raise ValueError(f"bad profile id {profile_id!r}")
    return profile_id


def tagged(alias: str, tags: str) -> str:
    """SQL: the row holds any of the keywords in the text[] parameter `tags` (NULL: no such filter). Seed 003's tags
    are the row's keywords, so the GIN index on them serves this filter."""
    return f"({tags}::text[] IS NULL OR {alias}.keywords && {tags}::text[])"


def narrowed(alias: str, narrow: str) -> str:
    """SQL: the row passes recall's optional filters, given as one jsonb parameter `narrow` (NULL: none of them):
    min_importance, is_anchor, case_id, and created_from / created_to (ISO instants, from inclusive, to exclusive).
    One parameter for all of them keeps every search's statement one shape, whichever are given."""
    n = f"{narrow}::jsonb"
    return (
        f"({n} IS NULL OR ((({n}->>'min_importance') IS NULL"
        f" OR {alias}.importance >= ({n}->>'min_importance')::real)"
        f" AND (({n}->>'is_anchor') IS NULL OR {alias}.is_anchor = ({n}->>'is_anchor')::bool)"
        f" AND (({n}->>'case_id') IS NULL OR {alias}.case_id = ({n}->>'case_id'))"
        f" AND (({n}->>'created_from') IS NULL OR {alias}.created_at >= ({n}->>'created_from')::timestamptz)"
        f" AND (({n}->>'created_to') IS NULL OR {alias}.created_at < ({n}->>'created_to')::timestamptz)))"
    )


def live(alias: str, superseded: str) -> str:
    """SQL: the row is one a search may return. Never an expired one (docs/dialects.md: expired rows are left out of
    every search of every dialect); a superseded one only when the boolean parameter `superseded` says so (seed 002
    filters them out at once; recall shows them with includeSuperseded)."""
    return (
        f"({alias}.expires_at IS NULL OR {alias}.expires_at > now())"
        f" AND ({superseded}::bool OR {alias}.superseded_by IS NULL)"
    )


async def insert(conn: asyncpg.Connection, row: dict[str, Any]) -> str | None:
    """Insert unless the same content exists in this namespace; returns the new id, or None on a duplicate."""
    return await conn.fetchval(
        "INSERT INTO agent_memory.fragments (id, tenant_id, workspace, agent_id, content, topic, keywords, type,"
        " importance, content_hash, source, ttl_tier, estimated_tokens, is_anchor, confidence, expires_at, linkages,"
        " case_id, keywords_given, thread, seq, event_from, event_to, event_said, expansion, entities)"
        " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21,"
        " $22, $23, $24, $25, $26)"
        " ON CONFLICT (tenant_id, workspace, agent_id, content_hash) DO NOTHING RETURNING id",
        row["id"],
        row["tenant_id"],
        row["workspace"],
        row["agent_id"],
        row["content"],
        row["topic"],
        row["keywords"],
        row["type"],
        row["importance"],
        row["content_hash"],
        row["source"],
        row["ttl_tier"],
        row["estimated_tokens"],
        row["is_anchor"],
        row.get("confidence", 1.0),
        row.get("expires_at"),
        row.get("linkages", []),
        row.get("case_id"),
        row.get("keywords_given", False),
        row.get("thread"),
        row.get("seq"),
        row.get("event_from"),
        row.get("event_to"),
        row.get("event_said"),
        row.get("expansion"),
        row.get("entities"),
    )


async def id_by_hash(
    conn: asyncpg.Connection, tenant_id: str, workspace: str, agent_id: str, content_hash: str
) -> str | None:
    return await conn.fetchval(
        "SELECT id FROM agent_memory.fragments WHERE tenant_id = $1 AND workspace = $2 AND agent_id = $3"
        " AND content_hash = $4",
        tenant_id,
        workspace,
        agent_id,
        content_hash,
    )


# One statement: both ends must be visible (RLS decides), the edge is inserted unless it exists, and the source's
# denormalised `linked_to` (seed 000 keeps one) follows; a CTE that modifies runs whether or not the query reads it.
_ADD_LINK = """
WITH visible AS (SELECT id FROM agent_memory.fragments WHERE id = ANY(ARRAY[$4, $5]::text[])),
inserted AS (
    INSERT INTO agent_memory.fragment_links (tenant_id, workspace, agent_id, from_id, to_id, relation_type)
    SELECT $1, $2, $3, $4, $5, $6 WHERE (SELECT count(*) FROM visible) = 2
    ON CONFLICT (from_id, to_id, agent_id, tenant_id) DO NOTHING RETURNING from_id, to_id),
adjacency AS (
    UPDATE agent_memory.fragments f SET linked_to = array_append(f.linked_to, i.to_id) FROM inserted i
    WHERE f.id = i.from_id AND NOT (i.to_id = ANY(f.linked_to)) RETURNING 1)
SELECT ARRAY(SELECT id FROM visible) AS visible, EXISTS (SELECT 1 FROM inserted) AS inserted
"""


async def add_link(
    conn: asyncpg.Connection, scope_row: dict[str, str], from_id: str, to_id: str, relation: str
) -> tuple[set[str], bool]:
    """Link two fragments if both are visible: returns which of the two are, and whether the edge was inserted
    (False for an existing one, or an end not visible)."""
    row = await conn.fetchrow(
        _ADD_LINK,
        scope_row["tenant_id"],
        scope_row["workspace"],
        scope_row["agent_id"],
        from_id,
        to_id,
        relation,
    )
    return set(row["visible"]), row["inserted"]


async def visible_ids(conn: asyncpg.Connection, ids: list[str]) -> set[str]:
    """Which of `ids` exist and are visible to the caller (RLS decides)."""
    return {r["id"] for r in await conn.fetch("SELECT id FROM agent_memory.fragments WHERE id = ANY($1::text[])", ids)}


async def fetch_by_ids(conn: asyncpg.Connection, ids: list[str], filters: Filters = NO_FILTERS) -> list[asyncpg.Record]:
    """The visible rows of `ids` that pass `filters`."""
    return await conn.fetch(
        f"SELECT {COLUMNS} FROM agent_memory.fragments f WHERE id = ANY($1::text[])"
        f" AND ($2::text IS NULL OR topic = $2) AND ($3::text IS NULL OR type = $3) AND {live('f', '$4')}"
        f" AND {tagged('f', '$5')} AND {narrowed('f', '$6')}",
        ids,
        *filters.values(),
    )


async def rows_by_ids(conn: asyncpg.Connection, ids: list[str]) -> list[asyncpg.Record]:
    """The visible rows of `ids` as they are, superseded and expired ones too (graph_explore shows a fragment's
    neighbourhood, not a search's answer)."""
    return await conn.fetch(f"SELECT {COLUMNS} FROM agent_memory.fragments WHERE id = ANY($1::text[])", ids)


def newest_in_namespaces(columns: str, agents: str, tenant: str, workspace: str, limit: str, when: str) -> str:
    """SQL for the `limit` newest fragments of each of the caller's namespaces (`agents`, a text[] parameter; NULL
    for an admin, whose one walk spans them all), each an index walk on (tenant, workspace, agent, created_at):
    a capped search's sample holds the rows its scan met first, the oldest, and what was just stored must still be
    found. `when` gates it (it costs a few hundred row reads)."""
    return f"""(
        SELECT n.* FROM unnest({agents}::text[]) a(agent_id) CROSS JOIN LATERAL (
            SELECT {columns} FROM agent_memory.fragments f
            WHERE {when} AND f.tenant_id = {tenant} AND f.workspace = {workspace} AND f.agent_id = a.agent_id
            ORDER BY f.created_at DESC LIMIT {limit}) n
        UNION ALL
        (SELECT {columns} FROM agent_memory.fragments f
         WHERE {when} AND {agents}::text[] IS NULL AND f.tenant_id = {tenant} AND f.workspace = {workspace}
         ORDER BY f.created_at DESC LIMIT {limit}))"""


# L2 ranks its matches by how many keywords each holds, then importance and recency; ranking every match took
# 0.5-2 s for common keywords at a million fragments (100k matches each). So at most KEYWORD_CANDIDATES matches are
# ranked: below that cap all of them; past it the first the scan met and the caller's newest. The fragments holding
# every keyword come from L1 before L2 runs. (Gathering them here too, `keywords @> ...` under a LIMIT, was planned
# as a sequential scan expecting thousands of rows and read the whole table when two common keywords never meet.)
KEYWORD_CANDIDATES = 300
KEYWORD_RECENT = 500
_KEYWORD_NEWEST = newest_in_namespaces(
    "f.id, f.keywords, f.importance, f.created_at, f.topic, f.type, f.expires_at, f.superseded_by, f.is_anchor,"
    " f.case_id",
    "$2",
    "$7",
    "$8",
    "$9",
    "(SELECT hit FROM capped)",
)
_BY_KEYWORDS = f"""
WITH any_kw AS MATERIALIZED (
    SELECT f.id, f.keywords, f.importance, f.created_at FROM agent_memory.fragments f
    WHERE f.tenant_id = $7 AND f.workspace = $8
      AND f.keywords && $1::text[] AND ($2::text[] IS NULL OR f.agent_id = ANY($2))
      AND ($3::text IS NULL OR f.topic = $3) AND ($4::text IS NULL OR f.type = $4) AND {live("f", "$10")}
      AND {tagged("f", "$11")} AND {narrowed("f", "$12")} LIMIT $6),
capped AS MATERIALIZED (SELECT count(*) >= $6 AS hit FROM any_kw),
newest AS MATERIALIZED (
    SELECT * FROM {_KEYWORD_NEWEST} r
    WHERE r.keywords && $1::text[] AND ($3::text IS NULL OR r.topic = $3) AND ($4::text IS NULL OR r.type = $4)
      AND {live("r", "$10")} AND {tagged("r", "$11")} AND {narrowed("r", "$12")}),
pool AS (
    SELECT id, keywords, importance, created_at FROM any_kw
    UNION SELECT id, keywords, importance, created_at FROM newest),
top AS (
    SELECT id, cardinality(ARRAY(SELECT unnest(keywords) INTERSECT SELECT unnest($1::text[]))) AS hits
    FROM pool ORDER BY hits DESC, importance DESC, created_at DESC LIMIT $5)
SELECT {F_COLUMNS}, top.hits
FROM top JOIN agent_memory.fragments f USING (id) ORDER BY top.hits DESC, f.importance DESC, f.created_at DESC
"""


async def by_keywords(
    conn: asyncpg.Connection,
    keywords: list[str],
    scope: Scope,
    agents: list[str] | None,
    limit: int,
    candidates: int = KEYWORD_CANDIDATES,
    recent: int = KEYWORD_RECENT,
    filters: Filters = NO_FILTERS,
) -> list[asyncpg.Record]:
    """L2: GIN overlap on keywords, most keyword matches first (bounded past `candidates` matches, see above), of the
    rows that pass `filters`."""
    return await conn.fetch(
        _BY_KEYWORDS,
        keywords,
        agents,
        filters.topic,
        filters.type,
        limit,
        candidates,
        scope.tenant_id,
        scope.workspace,
        recent,
        filters.superseded,
        filters.tags,
        filters.narrow,
    )


async def recent(
    conn: asyncpg.Connection,
    scope: Scope,
    agents: list[str] | None,
    limit: int,
    filters: Filters = NO_FILTERS,
) -> list[asyncpg.Record]:
    """The caller's newest fragments that pass `filters`, newest first."""
    return await conn.fetch(
        f"SELECT {COLUMNS} FROM agent_memory.fragments f WHERE tenant_id = $5 AND workspace = $6"
        " AND ($1::text[] IS NULL OR agent_id = ANY($1)) AND ($2::text IS NULL OR topic = $2)"
        f" AND ($3::text IS NULL OR type = $3) AND {live('f', '$7')} AND {tagged('f', '$8')}"
        f" AND {narrowed('f', '$9')} ORDER BY created_at DESC LIMIT $4",
        agents,
        filters.topic,
        filters.type,
        limit,
        scope.tenant_id,
        scope.workspace,
        filters.superseded,
        filters.tags,
        filters.narrow,
    )


async def count_up_to(conn: asyncpg.Connection, scope: Scope, agents: list[str] | None, limit: int) -> int:
    """How many fragments the caller's namespaces hold, counting no further than `limit` (an index walk)."""
    return await conn.fetchval(
        "SELECT count(*) FROM (SELECT 1 FROM agent_memory.fragments WHERE tenant_id = $1 AND workspace = $2"
        " AND ($3::text[] IS NULL OR agent_id = ANY($3)) LIMIT $4) s",
        scope.tenant_id,
        scope.workspace,
        agents,
        limit,
    )


async def linked(
    conn: asyncpg.Connection,
    ids: list[str],
    relations: list[str],
    limit: int,
    *,
    superseded: bool = False,
    created_by: Any = None,
) -> list[asyncpg.Record]:
    """One-hop neighbours over typed edges, either direction, excluding the origin set (and, with `created_by`,
    any created after it: recall's asOf)."""
    return await conn.fetch(
        f"SELECT DISTINCT ON (f.id) {', '.join('f.' + c.strip() for c in COLUMNS.split(','))}, l.relation_type"
        " FROM agent_memory.fragment_links l JOIN agent_memory.fragments f"
        "   ON f.id = CASE WHEN l.from_id = ANY($1::text[]) THEN l.to_id ELSE l.from_id END"
        " WHERE (l.from_id = ANY($1::text[]) OR l.to_id = ANY($1::text[])) AND l.relation_type = ANY($2::text[])"
        f"   AND NOT (f.id = ANY($1::text[])) AND {live('f', '$4')}"
        "   AND ($5::timestamptz IS NULL OR f.created_at <= $5) ORDER BY f.id LIMIT $3",
        ids,
        relations,
        limit,
        superseded,
        created_by,
    )


async def touch(conn: asyncpg.Connection, counts: dict[str, int], half_life_days: float) -> None:
    """Add each fragment's recall count, stamp accessed_at, and bring utility_score up to date with that use.

    The row is rewritten for the count anyway, so the score costs nothing here; consolidation's stage 8 then has
    only the weekly recency steps of fragments nobody recalled left to rewrite (same SQL function, so the two
    agree). Anchors keep theirs, as in stage 8.

    The rows are locked in id order first (the caller's transaction holds them): two replicas flushing the same rows
    in their recall orders deadlocked, and Postgres aborted one flush with its counts. The UPDATE alone locks rows in
    its plan's scan order, which follows the ids' order only when the plan walks `unnest` first: on a fuller table the
    planner chose otherwise and the flushes deadlocked again. The lock is the UPDATE's own (FOR NO KEY UPDATE), not
    FOR UPDATE: that one also blocks a vector written for the row meanwhile (its foreign key takes KEY SHARE), and
    the embedder's batch and the flush deadlocked."""
    ids = sorted(counts)
    await conn.execute(
        "SELECT 1 FROM agent_memory.fragments WHERE id = ANY($1::text[]) ORDER BY id FOR NO KEY UPDATE", ids
    )
    await conn.execute(TOUCH_SQL, ids, [counts[i] for i in ids], half_life_days)


# no indexed column changes (tests/integration/test_index_upkeep.py): Postgres rewrites the row in place
TOUCH_SQL = (
    "UPDATE agent_memory.fragments f SET access_count = f.access_count + c.n, accessed_at = now(),"
    " utility_score = CASE WHEN f.is_anchor THEN f.utility_score ELSE agent_memory.utility_score("
    "f.quality_score, f.importance, f.access_count + c.n, now(), $3) END"
    " FROM unnest($1::text[], $2::int[]) AS c(id, n) WHERE f.id = c.id"
)


async def get(conn: asyncpg.Connection, fragment_id: str, *, for_update: bool = False) -> asyncpg.Record | None:
    lock = " FOR UPDATE" if for_update else ""
    return await conn.fetchrow(
        f"SELECT {COLUMNS}, tenant_id, workspace, utility_score, linked_to FROM agent_memory.fragments"
        f" WHERE id = $1{lock}",
        fragment_id,
    )


async def by_topic(
    conn: asyncpg.Connection, scope: Scope, topic: str, agents: list[str] | None
) -> list[asyncpg.Record]:
    """The topic's visible rows, locked in id order (as `touch` and `lock_pair` lock): locked in the scan's order, a
    forget that waited for one row held others, and a writer reaching for those deadlocked with it."""
    return await conn.fetch(
        f"SELECT {COLUMNS} FROM agent_memory.fragments WHERE tenant_id = $3 AND workspace = $4 AND topic = $1"
        " AND ($2::text[] IS NULL OR agent_id = ANY($2)) ORDER BY id FOR UPDATE",
        topic,
        agents,
        scope.tenant_id,
        scope.workspace,
    )


async def delete(conn: asyncpg.Connection, ids: list[str]) -> list[str]:
    rows = await conn.fetch("DELETE FROM agent_memory.fragments WHERE id = ANY($1::text[]) RETURNING id", ids)
    await clear_references(conn, ids)
    return [r["id"] for r in rows]


async def archive_version(conn: asyncpg.Connection, row: asyncpg.Record, amended_by: str) -> int:
    """Archive the row's current state; returns how many states are archived now. One statement: the count does not
    see its own statement's insert (one snapshot), hence the + 1; the caller holds the row's lock, so no other amend
    of it runs meanwhile."""
    return await conn.fetchval(
        "WITH archived AS (INSERT INTO agent_memory.fragment_versions (tenant_id, workspace, agent_id, fragment_id,"
        " content, topic, keywords, type, importance, amended_by) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
        " RETURNING 1) SELECT count(*) + (SELECT count(*) FROM archived)"
        " FROM agent_memory.fragment_versions WHERE fragment_id = $4",
        row["tenant_id"],
        row["workspace"],
        row["agent_id"],
        row["id"],
        row["content"],
        row["topic"],
        row["keywords"],
        row["type"],
        row["importance"],
        amended_by,
    )


async def update(conn: asyncpg.Connection, fragment_id: str, changes: dict[str, Any]) -> bool:
    """Apply `changes` to one fragment. A new content_hash already held by another fragment of its namespace
    changes nothing and returns False: checked in the statement itself rather than by a look-up first (a round
    trip), and rather than by the unique constraint's error alone, which Postgres would log with the key's values.
    (Two amends racing to the same content still meet the constraint; the caller maps that error too.)"""
    allowed = {
        "content",
        "topic",
        "keywords",
        "type",
        "importance",
        "content_hash",
        "ttl_tier",
        "estimated_tokens",
        "is_anchor",
        "superseded_by",
        "keywords_given",
        "event_from",
        "event_to",
        "event_said",
        "expansion",
        "entities",
    }
    if not changes or set(changes) - allowed:
        raise ValueError(f"bad update columns: {sorted(set(changes) - allowed)}")
    columns = list(changes)
    assignments = ", ".join(f"{c} = ${i + 2}" for i, c in enumerate(columns))
    unique = ""
    if "content_hash" in changes:
        assignments += ", facts = NULL"  # drawn from the old content; the evaluator draws them again (issue 28)
        unique = (
            " AND NOT EXISTS (SELECT 1 FROM agent_memory.fragments d WHERE d.tenant_id = f.tenant_id"
            " AND d.workspace = f.workspace AND d.agent_id = f.agent_id"
            f" AND d.content_hash = ${columns.index('content_hash') + 2} AND d.id <> f.id)"
        )
    status = await conn.execute(
        f"UPDATE agent_memory.fragments f SET {assignments}, updated_at = now() WHERE f.id = $1{unique}",
        fragment_id,
        *[changes[c] for c in columns],
    )
    return status != "UPDATE 0"


async def edges(conn: asyncpg.Connection, fragment_id: str, relations: list[str]) -> list[asyncpg.Record]:
    return await conn.fetch(
        # one edge per pair and relation: two agents may each have made it (an admin sees both rows)
        "SELECT from_id, to_id, relation_type FROM (SELECT DISTINCT ON (from_id, to_id, relation_type) from_id,"
        " to_id, relation_type, created_at, id FROM agent_memory.fragment_links"
        " WHERE (from_id = $1 OR to_id = $1) AND relation_type = ANY($2::text[])"
        " ORDER BY from_id, to_id, relation_type, created_at, id) e ORDER BY created_at, id",
        fragment_id,
        relations,
    )


CORE_MEMORY_SQL = (
    f"SELECT {COLUMNS} FROM agent_memory.fragments WHERE tenant_id = $4 AND workspace = $5"
    " AND type = ANY($1::text[]) AND ($2::text[] IS NULL OR agent_id = ANY($2)) AND superseded_by IS NULL"
    " AND (expires_at IS NULL OR expires_at > now())"
    " ORDER BY is_anchor DESC, importance DESC, created_at DESC LIMIT $3"
)


async def core_memory(
    conn: asyncpg.Connection, scope: Scope, types: list[str], agents: list[str] | None, limit: int
) -> list[asyncpg.Record]:
    # naming the tenant and workspace (module docstring) also lets the planner walk fragments_core_memory_idx in order
    return await conn.fetch(CORE_MEMORY_SQL, types, agents, limit, scope.tenant_id, scope.workspace)


async def stats(conn: asyncpg.Connection, scope: Scope, agents: list[str] | None, profile_id: str) -> dict[str, Any]:
    """memory_stats' counts (§6.10). The fragment figures come from one scan (grouping sets) rather than three."""
    groups = await conn.fetch(
        "SELECT GROUPING(ttl_tier, type) AS g, ttl_tier, type, count(*) AS n,"
        " count(*) FILTER (WHERE is_anchor) AS anchors, avg(utility_score) AS utility, avg(importance) AS importance"
        " FROM agent_memory.fragments WHERE tenant_id = $1 AND workspace = $2"
        " AND ($3::text[] IS NULL OR agent_id = ANY($3)) GROUP BY GROUPING SETS ((), (ttl_tier), (type))",
        scope.tenant_id,
        scope.workspace,
        agents,
    )
    embedded = await conn.fetchval(
        "SELECT count(*) FROM agent_memory.fragment_embeddings WHERE profile_id = $1 AND tenant_id = $2"
        " AND workspace = $3 AND ($4::text[] IS NULL OR agent_id = ANY($4))",
        profile_id,
        scope.tenant_id,
        scope.workspace,
        agents,
    )
    # rows whose current content has no vector in the profile yet: the embedder's backlog, and how long the oldest
    # has waited (since it was written or its content amended)
    waiting = await conn.fetchrow(
        "SELECT count(*) AS n, extract(epoch FROM now() - min(f.updated_at))::float8 AS oldest"
        " FROM agent_memory.fragments f WHERE f.tenant_id = $2 AND f.workspace = $3"
        " AND ($4::text[] IS NULL OR f.agent_id = ANY($4)) AND NOT EXISTS (SELECT 1"
        " FROM agent_memory.fragment_embeddings e WHERE e.fragment_id = f.id AND e.profile_id = $1"
        " AND e.tenant_id = $2 AND e.content_hash = f.content_hash)",
        profile_id,
        scope.tenant_id,
        scope.workspace,
        agents,
    )
    links = await conn.fetchval(
        "SELECT count(*) FROM agent_memory.fragment_links WHERE tenant_id = $1 AND workspace = $2"
        " AND ($3::text[] IS NULL OR agent_id = ANY($3))",
        scope.tenant_id,
        scope.workspace,
        agents,
    )
    backlog = await conn.fetch(
        "SELECT event_type, count(*) AS n FROM agent_memory.outbox WHERE published_at IS NULL"
        " AND tenant_id = $1 AND workspace = $2 GROUP BY 1",
        scope.tenant_id,
        scope.workspace,
    )
    dead = await conn.fetchval(
        "SELECT count(*) FROM agent_memory.dead_letters WHERE replayed_at IS NULL"
        " AND tenant_id = $1 AND workspace = $2",
        scope.tenant_id,
        scope.workspace,
    )
    last_run = await conn.fetchrow(
        "SELECT trigger, started_at, finished_at, result->'stages' AS stages FROM agent_memory.consolidation_runs"
        " WHERE tenant_id = $1 AND workspace = $2 AND finished_at IS NOT NULL ORDER BY started_at DESC LIMIT 1",
        scope.tenant_id,
        scope.workspace,
    )
    total = next(r for r in groups if r["g"] == 3)  # the () grouping set: every fragment
    return {
        "total": total["n"],
        "anchors": total["anchors"],
        "utility": total["utility"],
        "importance": total["importance"],
        "by_tier": {r["ttl_tier"]: r["n"] for r in groups if r["g"] == 1},
        "by_type": {r["type"]: r["n"] for r in groups if r["g"] == 2},
        "embedded": embedded,
        "embedding_backlog": waiting["n"],
        "embedding_backlog_oldest_s": waiting["oldest"],
        "links": links,
        "backlog": {r["event_type"]: r["n"] for r in backlog},
        "dead_letters": dead,
        "last_consolidation": last_run,
    }


async def store_vector(conn: asyncpg.Connection, profile_id: str, fragment_id: str, chash: str, vector: Any) -> None:
    """A vector computed on the request path (store_memory), written in the write's own transaction: the embedder's
    event for the same content then finds it and skips. Kept only while the row still holds the content embedded."""
    await conn.execute(
        "INSERT INTO agent_memory.fragment_embeddings (fragment_id, profile_id, tenant_id, workspace, agent_id,"
        " content_hash, embedding) SELECT id, $2, tenant_id, workspace, agent_id, content_hash, $4"
        " FROM agent_memory.fragments WHERE id = $1 AND content_hash = $3"
        " ON CONFLICT (fragment_id, profile_id, tenant_id) DO NOTHING",
        fragment_id,
        profile_id,
        chash,
        vector,
    )


async def indexed(conn: asyncpg.Connection, scope: Scope, profile_id: str, ids: list[str]) -> set[str]:
    """Those of `ids` whose vector for their current content is in the profile: searchable by meaning by every
    reader (a write's `indexed`)."""
    if not ids:
        return set()
    rows = await conn.fetch(
        "SELECT f.id FROM agent_memory.fragments f JOIN agent_memory.fragment_embeddings e ON e.fragment_id = f.id"
        " AND e.profile_id = $2 AND e.tenant_id = $3 AND e.content_hash = f.content_hash"
        " WHERE f.id = ANY($1::text[]) AND f.tenant_id = $3",
        ids,
        profile_id,
        scope.tenant_id,
    )
    return {r["id"] for r in rows}


async def lock_pair(conn: asyncpg.Connection, first: str, second: str) -> dict[str, asyncpg.Record]:
    """The visible rows of two fragments, locked (in id order, so two calls locking the same pair cannot deadlock)."""
    rows = await conn.fetch(
        f"SELECT {COLUMNS}, tenant_id, workspace FROM agent_memory.fragments WHERE id = ANY($1::text[])"
        " ORDER BY id FOR UPDATE",
        [first, second],
    )
    return {r["id"]: r for r in rows}


async def successors(conn: asyncpg.Connection, fragment_id: str, limit: int = 1000) -> list[str]:
    """The visible chain of what supersedes `fragment_id`: its successor, that one's, and so on (at most `limit`)."""
    return await conn.fetchval(
        "WITH RECURSIVE chain(id, depth) AS ("
        " SELECT superseded_by, 1 FROM agent_memory.fragments WHERE id = $1 AND superseded_by IS NOT NULL"
        " UNION ALL SELECT f.superseded_by, c.depth + 1 FROM chain c JOIN agent_memory.fragments f ON f.id = c.id"
        " WHERE f.superseded_by IS NOT NULL AND c.depth < $2)"
        " SELECT coalesce(array_agg(id ORDER BY depth), '{}') FROM chain",
        fragment_id,
        limit,
    )


async def predecessors(conn: asyncpg.Connection, fragment_id: str, limit: int = 1000) -> list[str]:
    """The visible fragments `fragment_id` replaced, nearest first: those whose superseded_by names it (a
    consolidation names several), then theirs, and so on (at most `limit`)."""
    return await conn.fetchval(
        "WITH RECURSIVE chain(id, depth) AS ("
        " SELECT id, 1 FROM agent_memory.fragments WHERE superseded_by = $1"
        " UNION ALL SELECT f.id, c.depth + 1 FROM chain c JOIN agent_memory.fragments f ON f.superseded_by = c.id"
        " WHERE c.depth < $2)"
        " SELECT coalesce(array_agg(id ORDER BY depth, id), '{}') FROM (SELECT id, depth FROM chain LIMIT $2) c",
        fragment_id,
        limit,
    )


async def created_times(conn: asyncpg.Connection, ids: list[str]) -> dict[str, Any]:
    """When each visible one of `ids` was created."""
    rows = await conn.fetch("SELECT id, created_at FROM agent_memory.fragments WHERE id = ANY($1::text[])", ids)
    return {r["id"]: r["created_at"] for r in rows}


async def states_at(conn: asyncpg.Connection, ids: list[str], at: Any) -> dict[str, asyncpg.Record]:
    """For those of `ids` amended after `at`: the state the first such amend archived, i.e. the one they had at
    `at` (recall's asOf). The others read then as they read now."""
    rows = await conn.fetch(
        "SELECT DISTINCT ON (fragment_id) fragment_id, content, topic, keywords, type, importance"
        " FROM agent_memory.fragment_versions WHERE fragment_id = ANY($1::text[]) AND amended_at > $2"
        " ORDER BY fragment_id, amended_at, id",
        ids,
        at,
    )
    return {r["fragment_id"]: {k: r[k] for k in ("content", "topic", "keywords", "type", "importance")} for r in rows}


async def versions(conn: asyncpg.Connection, fragment_id: str) -> list[asyncpg.Record]:
    """The states amend archived, oldest first."""
    return await conn.fetch(
        "SELECT content, topic, keywords, type, importance, amended_at, amended_by FROM agent_memory.fragment_versions"
        " WHERE fragment_id = $1 ORDER BY amended_at, id",
        fragment_id,
    )


async def mark_superseded(conn: asyncpg.Connection, old_id: str, new_id: str, *, name_original: bool = True) -> None:
    """old.superseded_by = new and (with `name_original`) new.supersedes = old, in one statement (the caller holds both
    rows' locks). A consolidation of several sources names them in the new memory's linkages instead."""
    await conn.execute(
        "UPDATE agent_memory.fragments SET updated_at = now(),"
        " superseded_by = CASE WHEN id = $1 THEN $2 ELSE superseded_by END,"
        " supersedes = CASE WHEN id = $2 AND $3 THEN $1 ELSE supersedes END"
        " WHERE id = ANY(ARRAY[$1, $2]::text[])",
        old_id,
        new_id,
        name_original,
    )


async def most_relevant(conn: asyncpg.Connection, scope: Scope, agents: list[str] | None, limit: int) -> list[Any]:
    """The caller's current memories by the relevance the decay job stored (seed 003), then newest."""
    return await conn.fetch(
        "SELECT id, type, content FROM agent_memory.fragments f WHERE tenant_id = $1 AND workspace = $2"
        f" AND ($3::text[] IS NULL OR agent_id = ANY($3)) AND {live('f', 'false')}"
        " ORDER BY relevance DESC, created_at DESC LIMIT $4",
        scope.tenant_id,
        scope.workspace,
        agents,
        limit,
    )


async def consolidations(conn: asyncpg.Connection, scope: Scope, agents: list[str] | None, limit: int) -> list[Any]:
    """The caller's newest memories made by consolidating others (memento_consolidate links them to each source)."""
    return await conn.fetch(
        "SELECT id, content FROM agent_memory.fragments f WHERE tenant_id = $1 AND workspace = $2"
        ' AND ($3::text[] IS NULL OR agent_id = ANY($3)) AND linkages @> \'[{"label": "consolidated-from"}]\''
        f" AND {live('f', 'false')} ORDER BY created_at DESC LIMIT $4",
        scope.tenant_id,
        scope.workspace,
        agents,
        limit,
    )


async def revive(conn: asyncpg.Connection, fragment_id: str, expires_at: Any = None) -> None:
    """A fact stored again while its row was superseded or expired is current again: no longer superseded (and its
    successor no longer names it as what it replaced), ending at `expires_at` (None: never). The two rows are locked
    in id order first, as every writer of several fragments locks them: the update alone locked them in its own
    order, and deadlocked with an access flush holding the successor (tests/integration/test_lock_order.py)."""
    await conn.execute(
        "SELECT 1 FROM agent_memory.fragments WHERE id = $1"
        " OR id = (SELECT superseded_by FROM agent_memory.fragments WHERE id = $1) ORDER BY id FOR UPDATE",
        fragment_id,
    )
    await conn.execute(
        "WITH old AS (SELECT superseded_by FROM agent_memory.fragments WHERE id = $1),"
        " successor AS (UPDATE agent_memory.fragments SET supersedes = NULL, updated_at = now()"
        "   WHERE id = (SELECT superseded_by FROM old) AND supersedes = $1 RETURNING 1)"
        " UPDATE agent_memory.fragments SET superseded_by = NULL, expires_at = $2, updated_at = now() WHERE id = $1",
        fragment_id,
        expires_at,
    )


def is_current(row: Any) -> bool:
    expired = row["expires_at"] is not None and row["expires_at"] <= datetime.now(UTC)
    return row["superseded_by"] is None and not expired

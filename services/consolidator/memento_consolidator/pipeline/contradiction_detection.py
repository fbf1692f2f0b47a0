"""Stage 6: contradictions, reported and never resolved (seed 000 §8: resolution is a judgement for a person).

- linked: every `contradicts` link in the workspace (up to REPORT_LIMIT), with both ends' topic;
- candidates: for fragments created or changed since the last run (at most contradictions.candidateLimit), the
  nearest neighbours in the active embedding profile with the same topic, in the same agent namespace, at cosine
  similarity >= contradictions.similarity but with different content, not already linked as contradicting.
  Near-identical wording about one topic is where two notes most often disagree on a detail ("port 5432" and
  "port 5433"); they are proposed, not linked.

The count is linked pairs plus candidates; the pairs themselves go into the run's result.
"""

from __future__ import annotations

import re
from typing import Any

from memento_consolidator.pipeline.context import StageContext

REPORT_LIMIT = 1000
NEIGHBOURS = 10  # nearest in the namespace, before the topic filter
_PROFILE = re.compile(r"^[a-z0-9_]+$")

# one pair once, though several agents may each have linked it (edges are per agent)
LINKED_SQL = (
    "SELECT l.from_id, l.to_id, f.topic FROM (SELECT DISTINCT ON (from_id, to_id) id, from_id, to_id"
    "  FROM agent_memory.fragment_links WHERE tenant_id = $1 AND workspace = $2 AND relation_type = 'contradicts'"
    "  ORDER BY from_id, to_id, id) l"
    " JOIN agent_memory.fragments f ON f.id = l.from_id ORDER BY l.id LIMIT $3"
)
RECENT_SQL = (
    "SELECT id FROM agent_memory.fragments WHERE tenant_id = $1 AND workspace = $2"
    " AND ($3::timestamptz IS NULL OR greatest(created_at, updated_at) >= $3) AND superseded_by IS NULL"
    " ORDER BY greatest(created_at, updated_at) DESC LIMIT $4"
)


SOURCE_SQL = (
    "SELECT f.topic, f.content_hash, f.agent_id, e.embedding FROM agent_memory.fragments f"
    " JOIN agent_memory.fragment_embeddings e ON e.fragment_id = f.id AND e.profile_id = $2"
    " AND e.content_hash = f.content_hash WHERE f.id = $1"
)


def neighbours_sql(profile_id: str, dimension: int) -> str:
    """The nearest vectors in one agent namespace (the profile id is a checked literal so the planner can use
    that profile's partial HNSW index on a large namespace), then those with the same topic and other content."""
    if not _PROFILE.match(profile_id):
        raise ValueError(f"bad profile id {profile_id!r}")
    distance = f"e.embedding::vector({dimension}) <=> $1"
    return (
        f"SELECT n.fragment_id, n.similarity FROM (SELECT e.fragment_id, 1 - ({distance}) AS similarity"
        f" FROM agent_memory.fragment_embeddings e WHERE e.profile_id = '{profile_id}' AND e.tenant_id = $2"
        f" AND e.workspace = $3 AND e.agent_id = $4 AND e.fragment_id <> $5 ORDER BY {distance} LIMIT {NEIGHBOURS}) n"
        " JOIN agent_memory.fragments f ON f.id = n.fragment_id AND f.topic = $6 AND f.content_hash <> $7"
        " AND f.superseded_by IS NULL ORDER BY n.similarity DESC"
    )


async def run(ctx: StageContext) -> int:
    settings = ctx.config["contradictions"]
    async with ctx.transaction() as conn:
        linked = await conn.fetch(LINKED_SQL, ctx.tenant_id, ctx.workspace, REPORT_LIMIT)
        profile = await conn.fetchrow("SELECT id, dimension FROM agent_memory.embedding_profiles WHERE is_active")
        recent = [
            r["id"]
            for r in await conn.fetch(
                RECENT_SQL, ctx.tenant_id, ctx.workspace, ctx.since, int(settings["candidateLimit"])
            )
        ]
    known = {frozenset((r["from_id"], r["to_id"])) for r in linked}
    ctx.contradictions.extend(
        {"kind": "linked", "from_id": r["from_id"], "to_id": r["to_id"], "topic": r["topic"]} for r in linked
    )
    if profile is None or not recent:
        return len(linked)
    sql = neighbours_sql(profile["id"], profile["dimension"])
    proposed: set[frozenset[Any]] = set()
    threshold = float(settings["similarity"])
    for fragment_id in recent:
        async with ctx.transaction() as conn:
            source = await conn.fetchrow(SOURCE_SQL, fragment_id, profile["id"])
            if source is None:
                continue  # no current vector yet: the next run sees it
            await conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
            rows = await conn.fetch(
                sql,
                source["embedding"],
                ctx.tenant_id,
                ctx.workspace,
                source["agent_id"],
                fragment_id,
                source["topic"],
                source["content_hash"],
            )
        for row in rows:
            pair = frozenset((fragment_id, row["fragment_id"]))
            if row["similarity"] < threshold or pair in known or pair in proposed:
                continue
            proposed.add(pair)
            first, second = sorted(pair)
            ctx.contradictions.append(
                {
                    "kind": "candidate",
                    "from_id": first,
                    "to_id": second,
                    "topic": source["topic"],
                    "similarity": round(float(row["similarity"]), 4),
                }
            )
    return len(linked) + len(proposed)

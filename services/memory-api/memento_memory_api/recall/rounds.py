"""Rounds (issue 53, item 3): a conversation's turns scored with the turns beside them, as well as alone.

A reply often holds the answer without the question's words or meaning ("She's learning commands" after "How is the
puppy?"), and a turn alone may be too short for its vector to say what it is about. So after the vector list, each of
its hits and the nearest row on each side of it in its thread are scored by their round's vector: the row twice and
its nearest neighbour on each side once (the row and half of each neighbour), compared with the question's vector by
cosine. The rows are ranked by that and fused as one more list (`RECALL_ROUNDS`, its weight); the turns themselves
are returned, never a round.

One statement, after the vector list: for each hit, up to two rows on each side of it in its thread (those a search
may return: the same filters as the neighbour read), their stored vectors, and the rounds' cosine computed by the
server (pgvector's vector sum as a window over each hit's places, no vector leaves it; a lateral sum per row scanned
the whole list for each, ~8 ms a search), with the rows of the candidates. Hits without a thread are
scored alone. On the development conversations fused at weight 1: recall@10 +0.011 (bench/README.md, "LoCoMo: what
issue 53 changed"); ranking every turn of a conversation by its round instead, exactly, gave the same.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import asyncpg

from memento_memory_api.recall.filters import Filters
from memento_memory_api.recall.relevance import filter_conditions, given_filters
from memento_memory_api.repositories import fragments as repo
from memento_memory_api.uow import Scope

FIRST_FILTER = 8  # the optional filters' parameters start here (relevance.filter_conditions)


@lru_cache(maxsize=128)
def rounds_sql(profile_id: str, dimension: int, given: frozenset[str], superseded: bool) -> str:
    """The rounds statement with only the filters a search gives (as relevance.neighbours_sql, so the server keeps
    its plan). Parameters: hit ids, threads, seqs ($1-$3), the query vector ($4), tenant ($5), workspace ($6),
    two ($7: rows read on each side), then the filters given."""
    profile_id = repo.profile_literal(profile_id)
    where = " AND ".join([*filter_conditions(given, FIRST_FILTER), repo.live("f", "true" if superseded else "false")])
    side = """
    (SELECT f.id, f.seq FROM agent_memory.fragments f
     WHERE f.tenant_id = $5 AND f.workspace = $6 AND f.thread = h.thread AND (f.seq, f.id) {cmp} (h.seq, h.cid)
       AND {where} ORDER BY f.seq {dir}, f.id {dir} LIMIT $7)"""
    return f"""
WITH h AS (SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[]) AS h(cid, thread, seq)),
placed AS MATERIALIZED (
    SELECT h.cid AS hit, 0::bigint AS place, h.cid AS id FROM h
    UNION ALL
    SELECT h.cid, -row_number() OVER (PARTITION BY h.cid ORDER BY n.seq DESC, n.id DESC), n.id
    FROM h CROSS JOIN LATERAL {side.format(cmp="<", dir="DESC", where=where)} n WHERE h.thread IS NOT NULL
    UNION ALL
    SELECT h.cid, row_number() OVER (PARTITION BY h.cid ORDER BY n.seq, n.id), n.id
    FROM h CROSS JOIN LATERAL {side.format(cmp=">", dir="", where=where)} n WHERE h.thread IS NOT NULL),
vectors AS MATERIALIZED (
    SELECT p.hit, p.place, p.id, e.embedding::vector({dimension}) AS v FROM placed p
    JOIN agent_memory.fragment_embeddings e ON e.fragment_id = p.id AND e.profile_id = '{profile_id}'
      AND e.tenant_id = $5),
rounds AS (
    SELECT hit, place, id, (sum(v) OVER (PARTITION BY hit ORDER BY place RANGE BETWEEN 1 PRECEDING AND 1 FOLLOWING)
        + v) <=> $4 AS distance
    FROM vectors),
scored AS (SELECT id, min(distance) AS distance FROM rounds WHERE place BETWEEN -1 AND 1 GROUP BY id)
SELECT {repo.F_COLUMNS}, 1 - s.distance AS round_similarity FROM scored s JOIN agent_memory.fragments f ON f.id = s.id
"""


async def read(
    conn: asyncpg.Connection,
    scope: Scope,
    agents: list[str] | None,
    profile_id: str,
    dimension: int,
    hits: list[Any],
    query_vector: Any,
    filters: Filters,
) -> tuple[list[str], dict[str, Any]]:
    """The vector hits and the rows beside them, best round first, and their rows (id -> row)."""
    if not hits:
        return [], {}
    given, values = given_filters(agents, filters)
    found = await conn.fetch(
        rounds_sql(profile_id, dimension, given, filters.superseded),
        [r["id"] for r in hits],
        [r["thread"] for r in hits],
        [r["seq"] for r in hits],
        query_vector,
        scope.tenant_id,
        scope.workspace,
        2,
        *values,
    )
    rows = {r["id"]: r for r in found}
    ranked = sorted(rows, key=lambda i: (-rows[i]["round_similarity"], i))
    return ranked, rows

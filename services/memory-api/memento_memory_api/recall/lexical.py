"""L3 lexical side: Postgres full text over content, topic and keywords ('simple' config, OR of terms),
plus trigram similarity so identifiers like `ERR_CONN_RESET` or `pg_hba.conf` match when tokenised apart."""

from __future__ import annotations

import re

import asyncpg

from memento_shared.text.keywords import STOPWORDS

_TERM = re.compile(r"[0-9A-Za-z가-힣_]+")


def terms(text: str) -> list[str]:
    out: list[str] = []
    for term in _TERM.findall(text.lower()):
        if len(term) > 1 and term not in STOPWORDS and term not in out:
            out.append(term)
    return out[:32]


# Ranking every match does not scale: in a million fragments a common word matches a quarter of them, and ranking
# those took 1.7 s (EXPLAIN ANALYZE, bench store). So at most CANDIDATES matches of any term are ranked; when that
# cap is reached, the matches of every term (the ones ts_rank_cd would put first anyway) are gathered too and come
# first (and when they fill the answer, the rest is not ranked at all). Below the cap (every store of ordinary size)
# the answer is exactly the full ranking.
CANDIDATES = 1000
TRIGRAM_CANDIDATES = 200
_SEARCH = """
WITH any_term AS MATERIALIZED (
    SELECT f.id, f.tsv, f.created_at FROM agent_memory.fragments f
    WHERE f.tsv @@ to_tsquery('simple', $1) AND ($3::text[] IS NULL OR f.agent_id = ANY($3)) LIMIT $5),
all_terms AS MATERIALIZED (
    SELECT f.id, f.tsv, f.created_at FROM agent_memory.fragments f
    WHERE (SELECT count(*) FROM any_term) >= $5
      AND f.tsv @@ to_tsquery('simple', $2) AND ($3::text[] IS NULL OR f.agent_id = ANY($3)) LIMIT $5)
SELECT id FROM (
    SELECT *, 0 AS pass FROM all_terms
    UNION ALL SELECT *, 1 AS pass FROM any_term WHERE (SELECT count(*) FROM all_terms) < $4) c
ORDER BY pass, ts_rank_cd(tsv, to_tsquery('simple', $1), 32) DESC, created_at DESC LIMIT $4
"""


async def search(
    conn: asyncpg.Connection, text: str, agents: list[str] | None, limit: int, candidates: int = CANDIDATES
) -> list[str]:
    words = terms(text)
    if not words:
        return []
    rows = await conn.fetch(_SEARCH, " | ".join(words), " & ".join(words), agents, 2 * limit, candidates)
    ids = list(dict.fromkeys(r["id"] for r in rows))[:limit]  # a fragment can come from both passes
    identifier = _identifier(text)
    if len(ids) < limit and identifier:
        # identifiers that full text under-serves: trigram word similarity catches partial and punctuated matches.
        # Only as a fallback, only for the query's most specific identifier (the whole question's trigrams are
        # common ones: 0.8-1 s at a million fragments for "steps before a release 2"), and capped: a common token's
        # trigrams match tens of thousands of rows in a large store, and ranking all of them by distance took
        # seconds at a million fragments.
        trigram = await conn.fetch(
            f"WITH m AS MATERIALIZED (SELECT f.id, f.content FROM agent_memory.fragments f WHERE $1 <% f.content"
            f" AND ($2::text[] IS NULL OR f.agent_id = ANY($2)) LIMIT {TRIGRAM_CANDIDATES})"
            " SELECT id FROM m ORDER BY $1 <<-> content LIMIT $3",
            identifier,
            agents,
            limit,
        )
        ids += [r["id"] for r in trigram if r["id"] not in ids]
    return ids


_WORD = re.compile(r"[0-9A-Za-z가-힣_][0-9A-Za-z가-힣_.:/\-]*[0-9A-Za-z가-힣_]")


def _identifier(text: str) -> str | None:
    """The query's longest identifier-like word (`ERR_CONN_RESET`, `pg_hba.conf`, `v2.3.1`, `billing-worker`), if any:
    punctuation inside it or letters mixed with digits, 4 to 64 characters."""
    found = [
        w
        for w in _WORD.findall(text)
        if 4 <= len(w) <= 64 and (re.search(r"[_.:/\-]", w) or (re.search(r"\d", w) and re.search(r"[^\d]", w)))
    ]
    return max(found, key=len) if found else None

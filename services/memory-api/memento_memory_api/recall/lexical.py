"""L3 lexical side: Postgres full text over content, topic and keywords ('simple' config, OR of terms),
plus trigram similarity so identifiers like `ERR_CONN_RESET` or `pg_hba.conf` match when tokenised apart."""

from __future__ import annotations

import re

import asyncpg

from memento_shared.text.keywords import STOPWORDS

_TERM = re.compile(r"[0-9A-Za-z가-힣_]+")


def or_query(text: str) -> str | None:
    terms = []
    for term in _TERM.findall(text.lower()):
        if len(term) > 1 and term not in STOPWORDS and term not in terms:
            terms.append(term)
    return " | ".join(terms[:32]) or None


async def search(conn: asyncpg.Connection, text: str, agents: list[str] | None, limit: int) -> list[str]:
    query = or_query(text)
    if query is None:
        return []
    rows = await conn.fetch(
        "SELECT f.id FROM agent_memory.fragments f, to_tsquery('simple', $1) q"
        " WHERE f.tsv @@ q AND ($2::text[] IS NULL OR f.agent_id = ANY($2))"
        " ORDER BY ts_rank_cd(f.tsv, q, 32) DESC, f.created_at DESC LIMIT $3",
        query,
        agents,
        limit,
    )
    ids = [r["id"] for r in rows]
    if len(text) <= 64 and re.search(r"[_.:/\-]|\d", text):
        # identifier-like queries: trigram word similarity catches partial and punctuated matches
        trigram = await conn.fetch(
            "SELECT f.id FROM agent_memory.fragments f WHERE $1 <% f.content"
            " AND ($2::text[] IS NULL OR f.agent_id = ANY($2)) ORDER BY $1 <<-> f.content LIMIT $3",
            text,
            agents,
            limit,
        )
        ids += [r["id"] for r in trigram if r["id"] not in ids]
    return ids

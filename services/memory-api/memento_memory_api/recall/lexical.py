"""L3 lexical side: Postgres full text over content, topic and keywords ('simple' config, OR of terms),
plus trigram similarity so identifiers like `ERR_CONN_RESET` or `pg_hba.conf` match when tokenised apart."""

from __future__ import annotations

import re

import asyncpg

from memento_memory_api.recall.filters import NO_FILTERS, Filters
from memento_memory_api.repositories.fragments import live, narrowed, newest_in_namespaces, tagged
from memento_memory_api.uow import Scope
from memento_shared.text.keywords import STOPWORDS
from memento_shared.text.stems import stem

_TERM = re.compile(r"[0-9A-Za-z가-힣_]+")


def terms(text: str) -> list[str]:
    out: list[str] = []
    for term in _TERM.findall(text.lower()):
        if len(term) > 1 and term not in STOPWORDS and term not in out:
            out.append(term)
    return out[:32]


def query_terms(words: list[str]) -> list[str]:
    """Each word as the search asks for it: the word or its stem (text.stems), "(camped | camp)", when they differ.
    A memory's expansion holds the stems its own words do not spell (text.annotate), so "camp" finds "camping"."""
    out = []
    for word in words:
        s = stem(word)
        out.append(word if s == word else f"({word} | {s})")
    return out


# Each term weighs by how rarely the caller's matches hold it (an inverse document frequency, counted over SAMPLE of
# the matches, taken by id: in table order, a row rewritten by an access flush or an amend moved the sample and the
# same question on the same rows was answered differently), and fragments rank by the summed weights of the terms they
# hold, then by ts_rank_cd, then newest first: the rarest words of a question (a name, an identifier) say most about
# what it wants. On LoCoMo this took hybrid recall@10 from 0.617 (ts_rank_cd alone) to 0.654 (bench/README.md).
#
# Ranking every match does not scale: in a million fragments a common word matches a quarter of them, and ranking
# those took 1.7 s (EXPLAIN ANALYZE, bench store). So at most CANDIDATES matches of any term are ranked; below that
# cap (stores of ordinary size) they are all the matches. Past it they are whichever rows the scan met first (the
# oldest, mostly), so three kinds of candidates are gathered besides them:
#   - the matches of every term, which come first;
#   - the matches of the terms that (almost) none of the sample holds, up to RARE_CANDIDATES;
#   - the newest RECENT fragments of the caller's namespaces that match: what was just stored must be findable by
#     its words before its embedding exists (those that hold every term join the first group).
# A topic ($13) or type ($14) filter applies in every one of those reads (for the newest, to the rows of the walk, as
# L2 does), so the limit counts only fragments that satisfy it: filtered afterwards, the many matches of another topic
# would fill it and hide the few of the topic asked for.
CANDIDATES = 300
RECENT = 500
RARE_CANDIDATES = 200
SAMPLE = 200
TRIGRAM_CANDIDATES = 200
_NEWEST = newest_in_namespaces(
    "f.id, f.tsv, f.created_at, f.topic, f.type, f.expires_at, f.superseded_by, f.keywords, f.importance, f.is_anchor,"
    " f.case_id",
    "$3",
    "$7",
    "$8",
    "$9",
    "(SELECT hit FROM capped)",
)
# the filters every read applies: topic ($13), type ($14), any of the tags ($16), recall's narrowing ($17), and no
# expired or (unless $15) superseded row
_TOPIC_TYPE = (
    "($13::text IS NULL OR {0}.topic = $13) AND ($14::text IS NULL OR {0}.type = $14) AND "
    + live("{0}", "$15")
    + " AND "
    + tagged("{0}", "$16")
    + " AND "
    + narrowed("{0}", "$17")
)
_SEARCH = f"""
WITH any_term AS MATERIALIZED (
    SELECT f.id, f.tsv, f.created_at FROM agent_memory.fragments f
    WHERE f.tenant_id = $7 AND f.workspace = $8
      AND f.tsv @@ to_tsquery('simple', $1) AND ($3::text[] IS NULL OR f.agent_id = ANY($3))
      AND {_TOPIC_TYPE.format("f")} LIMIT $5),
capped AS MATERIALIZED (SELECT count(*) >= $5 AS hit FROM any_term),
all_terms AS MATERIALIZED (
    SELECT f.id, f.tsv, f.created_at FROM agent_memory.fragments f
    WHERE f.tenant_id = $7 AND f.workspace = $8 AND (SELECT hit FROM capped)
      AND f.tsv @@ to_tsquery('simple', $2) AND ($3::text[] IS NULL OR f.agent_id = ANY($3))
      AND {_TOPIC_TYPE.format("f")} LIMIT $5),
sample AS MATERIALIZED (SELECT tsv FROM any_term ORDER BY id LIMIT $12),
terms AS MATERIALIZED (
    SELECT t.term, t.q, ln(((SELECT count(*) FROM sample) + 1)::float8 / (n.in_sample + 1)) AS weight, n.in_sample
    FROM (SELECT term, to_tsquery('simple', term) AS q FROM unnest($6::text[]) term) t
    CROSS JOIN LATERAL (SELECT count(*) AS in_sample FROM sample s WHERE s.tsv @@ t.q) n),
rare AS MATERIALIZED (
    SELECT f.id, f.tsv, f.created_at FROM agent_memory.fragments f
    WHERE f.tenant_id = $7 AND f.workspace = $8 AND (SELECT hit FROM capped)
      AND f.tsv @@ (SELECT to_tsquery('simple', string_agg(term, ' | ')) FROM terms WHERE in_sample <= $10)
      AND ($3::text[] IS NULL OR f.agent_id = ANY($3)) AND {_TOPIC_TYPE.format("f")} LIMIT $11),
recent AS MATERIALIZED (
    SELECT r.id, r.tsv, r.created_at FROM {_NEWEST} r
    WHERE r.tsv @@ to_tsquery('simple', $1) AND {_TOPIC_TYPE.format("r")}),
pool AS (
    SELECT * FROM any_term
    UNION ALL SELECT * FROM recent r WHERE NOT EXISTS (SELECT 1 FROM any_term s WHERE s.id = r.id)
    UNION ALL SELECT * FROM rare r WHERE NOT EXISTS (SELECT 1 FROM any_term s WHERE s.id = r.id)
        AND NOT EXISTS (SELECT 1 FROM recent n WHERE n.id = r.id))
SELECT id, pass FROM (
    SELECT *, 0 AS pass, 0::float8 AS weight FROM all_terms
    UNION ALL SELECT r.*, 0, 0 FROM recent r
    WHERE r.tsv @@ to_tsquery('simple', $2) AND NOT EXISTS (SELECT 1 FROM all_terms a WHERE a.id = r.id)
    UNION ALL
    SELECT p.*, 1 AS pass,
        coalesce((SELECT sum(t.weight) FROM terms t WHERE p.tsv @@ t.q), 0)
    FROM pool p WHERE (SELECT count(*) FROM all_terms) < $4) c
ORDER BY pass, weight DESC, ts_rank_cd(tsv, to_tsquery('simple', $1), 32) DESC, created_at DESC, id LIMIT $4
"""


async def search(
    conn: asyncpg.Connection,
    text: str,
    scope: Scope,
    agents: list[str] | None,
    limit: int,
    candidates: int = CANDIDATES,
    recent: int = RECENT,
    filters: Filters = NO_FILTERS,
    stems: bool = True,
) -> list[str]:
    """Up to `limit` ids of the caller's fragments that pass `filters` and match `text`'s words (or, with `stems`,
    their stems), best first."""
    words = query_terms(terms(text)) if stems else terms(text)
    if not words:
        return []
    sample = min(SAMPLE, candidates)
    rows = await conn.fetch(
        _SEARCH,
        " | ".join(words),
        " & ".join(words),
        agents,
        2 * limit,
        candidates,
        words,
        scope.tenant_id,
        scope.workspace,
        recent,
        sample // 100,  # "rare": in at most 1 % of the sample
        RARE_CANDIDATES,
        sample,
        *filters.values(),
    )
    ids = list(dict.fromkeys(r["id"] for r in rows))[:limit]  # a fragment can come from both passes
    identifier = identifier_in(text)
    if len(ids) < limit and identifier:
        # identifiers that full text under-serves: trigram word similarity catches partial and punctuated matches.
        # Only as a fallback, only for the query's most specific identifier (the whole question's trigrams are
        # common ones: 0.8-1 s at a million fragments for "steps before a release 2"), and capped: a common token's
        # trigrams match tens of thousands of rows in a large store, and ranking all of them by distance took
        # seconds at a million fragments.
        trigram = await conn.fetch(
            f"WITH m AS MATERIALIZED (SELECT f.id, f.content FROM agent_memory.fragments f WHERE f.tenant_id = $4"
            f" AND f.workspace = $5 AND $1 <% f.content AND ($2::text[] IS NULL OR f.agent_id = ANY($2))"
            " AND ($6::text IS NULL OR f.topic = $6) AND ($7::text IS NULL OR f.type = $7)"
            f" AND {live('f', '$8')} AND {tagged('f', '$9')} AND {narrowed('f', '$10')} LIMIT {TRIGRAM_CANDIDATES})"
            " SELECT id FROM m ORDER BY $1 <<-> content LIMIT $3",
            identifier,
            agents,
            limit,
            scope.tenant_id,
            scope.workspace,
            *filters.values(),
        )
        ids += [r["id"] for r in trigram if r["id"] not in ids]
    return ids


_WORD = re.compile(r"[0-9A-Za-z가-힣_][0-9A-Za-z가-힣_.:/\-]*[0-9A-Za-z가-힣_]")


def identifier_in(text: str) -> str | None:
    """The query's longest identifier-like word (`ERR_CONN_RESET`, `pg_hba.conf`, `v2.3.1`, `billing-worker`), if any:
    punctuation inside it or letters mixed with digits, 4 to 64 characters."""
    found = [
        w
        for w in _WORD.findall(text)
        if 4 <= len(w) <= 64 and (re.search(r"[_.:/\-]", w) or (re.search(r"\d", w) and re.search(r"[^\d]", w)))
    ]
    return max(found, key=len) if found else None

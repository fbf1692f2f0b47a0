"""SQL for seed 001's documents: items, versions, chunks and the idempotency keys of writes. Every query runs under
the caller's RLS principal and names the tenant and workspace."""

from __future__ import annotations

from typing import Any

import asyncpg

from memento_memory_api.uow import Scope
from memento_shared.text.keywords import STOPWORDS

ITEM_COLUMNS = "id, kind, title, canonical_key, doc_class, is_canonical, status, pinned, tags, created_at, updated_at"


async def answered(conn: asyncpg.Connection, scope: Scope, key: str) -> asyncpg.Record | None:
    """A write's earlier answer under this idempotency key (the key's row locked for the rest of the transaction)."""
    return await conn.fetchrow(
        "SELECT tool, request_hash, answer FROM agent_memory.doc_commits WHERE tenant_id = $1 AND workspace = $2"
        " AND idempotency_key = $3 FOR UPDATE",
        scope.tenant_id,
        scope.workspace,
        key,
    )


async def claim_key(conn: asyncpg.Connection, scope: Scope, key: str, tool: str, request_hash: str) -> bool:
    """Take the key for this request (False: a concurrent call holds it; its answer is read after it commits)."""
    return bool(
        await conn.fetchval(
            "INSERT INTO agent_memory.doc_commits (tenant_id, workspace, idempotency_key, tool, request_hash, answer)"
            " VALUES ($1, $2, $3, $4, $5, 'null'::jsonb) ON CONFLICT DO NOTHING RETURNING true",
            scope.tenant_id,
            scope.workspace,
            key,
            tool,
            request_hash,
        )
    )


async def keep_answer(conn: asyncpg.Connection, scope: Scope, key: str, answer: dict[str, Any]) -> None:
    await conn.execute(
        "UPDATE agent_memory.doc_commits SET answer = $4 WHERE tenant_id = $1 AND workspace = $2"
        " AND idempotency_key = $3",
        scope.tenant_id,
        scope.workspace,
        key,
        answer,  # the pool's jsonb codec encodes it
    )


async def canonical(conn: asyncpg.Connection, scope: Scope, key: str, *, lock: bool = False) -> asyncpg.Record | None:
    return await conn.fetchrow(
        f"SELECT {ITEM_COLUMNS} FROM agent_memory.doc_items WHERE tenant_id = $1 AND workspace = $2"
        f" AND canonical_key = $3{' FOR UPDATE' if lock else ''}",
        scope.tenant_id,
        scope.workspace,
        key,
    )


async def insert_item(conn: asyncpg.Connection, scope: Scope, item: dict[str, Any]) -> asyncpg.Record:
    return await conn.fetchrow(
        "INSERT INTO agent_memory.doc_items (id, tenant_id, workspace, kind, title, canonical_key, doc_class,"
        f" is_canonical, tags) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING {ITEM_COLUMNS}",
        item["id"],
        scope.tenant_id,
        scope.workspace,
        item["kind"],
        item["title"],
        item["canonical_key"],
        item["doc_class"],
        item["is_canonical"],
        item["tags"],
    )


async def update_item(conn: asyncpg.Connection, item_id: str, title: str, doc_class: str, tags: list[str]) -> None:
    await conn.execute(
        "UPDATE agent_memory.doc_items SET title = $2, doc_class = $3, tags = $4, updated_at = now() WHERE id = $1",
        item_id,
        title,
        doc_class,
        tags,
    )


async def version(conn: asyncpg.Connection, item_id: str, num: int | None = None) -> asyncpg.Record | None:
    """A version of the item (the latest when `num` is None)."""
    return await conn.fetchrow(
        "SELECT version_num, content, content_hash, created_at FROM agent_memory.doc_versions WHERE item_id = $1"
        " AND ($2::int IS NULL OR version_num = $2) ORDER BY version_num DESC LIMIT 1",
        item_id,
        num,
    )


async def add_version(
    conn: asyncpg.Connection,
    scope: Scope,
    item_id: str,
    num: int,
    content: str,
    content_hash: str,
    chunks: list,
    commit_id: str | None = None,
) -> None:
    """The version and its chunks (their full-text vectors are generated columns), in the caller's transaction."""
    await conn.execute(
        "INSERT INTO agent_memory.doc_versions (tenant_id, workspace, item_id, version_num, content, content_hash,"
        " commit_id) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        scope.tenant_id,
        scope.workspace,
        item_id,
        num,
        content,
        content_hash,
        commit_id,
    )
    await conn.executemany(
        "INSERT INTO agent_memory.doc_chunks (tenant_id, workspace, item_id, version_num, chunk_index, text,"
        " heading_path, anchor, start_char, end_char, token_estimate) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9,"
        " $10, $11)",
        [
            (
                scope.tenant_id,
                scope.workspace,
                item_id,
                num,
                c.index,
                c.text,
                c.heading_path,
                c.anchor,
                c.start,
                c.end,
                c.token_estimate,
            )
            for c in chunks
        ],
    )


async def page(conn: asyncpg.Connection, scope: Scope, after: tuple | None, limit: int) -> list[asyncpg.Record]:
    """Active items, pinned first, then newest (then id), from after the (pinned, updated_at, id) `after`."""
    pinned, updated, item_id = after if after else (None, None, None)
    return await conn.fetch(
        "SELECT id, title, kind, canonical_key, pinned, updated_at FROM agent_memory.doc_items"
        " WHERE tenant_id = $1 AND workspace = $2 AND status = 'active'"
        " AND ($3::boolean IS NULL OR (pinned, updated_at, id) < ($3::boolean, $4::timestamptz, $5::text))"
        " ORDER BY pinned DESC, updated_at DESC, id DESC LIMIT $6",
        scope.tenant_id,
        scope.workspace,
        pinned,
        updated,
        item_id,
        limit,
    )


async def item(conn: asyncpg.Connection, item_id: str) -> asyncpg.Record | None:
    return await conn.fetchrow(f"SELECT {ITEM_COLUMNS} FROM agent_memory.doc_items WHERE id = $1", item_id)


async def latest_items(
    conn: asyncpg.Connection, scope: Scope, kinds: list[str] | None, limit: int
) -> list[asyncpg.Record]:
    """Active items with their latest version, newest first (then id, for a stable order)."""
    return await conn.fetch(
        "SELECT i.id, i.kind, i.title, i.canonical_key, i.is_canonical, i.pinned, i.updated_at, v.version_num,"
        " v.content FROM agent_memory.doc_items i JOIN LATERAL (SELECT version_num, content FROM"
        " agent_memory.doc_versions WHERE item_id = i.id ORDER BY version_num DESC LIMIT 1) v ON true"
        " WHERE i.tenant_id = $1 AND i.workspace = $2 AND i.status = 'active'"
        " AND ($3::text[] IS NULL OR i.kind = ANY($3)) ORDER BY i.updated_at DESC, i.id LIMIT $4",
        scope.tenant_id,
        scope.workspace,
        kinds,
        limit,
    )


# A new latest version replaces the previous one in the corpus statistics: its chunks' terms leave each term's
# chunk count, the new chunks' terms join it, and the corpus's chunk and token totals follow.
_STATS = """
WITH old AS (SELECT tsv, token_estimate FROM agent_memory.doc_chunks WHERE item_id = $3 AND version_num = $4),
new AS (SELECT tsv, token_estimate FROM agent_memory.doc_chunks WHERE item_id = $3 AND version_num = $5),
delta AS (
    SELECT term, sum(d)::int AS d FROM (
        SELECT unnest(tsvector_to_array(tsv)) AS term, -1 AS d FROM old
        UNION ALL SELECT unnest(tsvector_to_array(tsv)), 1 FROM new) x
    GROUP BY term),
terms AS (
    INSERT INTO agent_memory.doc_term_stats (tenant_id, workspace, term, df)
    SELECT $1, $2, term, d FROM delta WHERE d <> 0
    ON CONFLICT (tenant_id, workspace, term) DO UPDATE SET df = agent_memory.doc_term_stats.df + EXCLUDED.df
    RETURNING 1),
corpus AS (
    INSERT INTO agent_memory.doc_corpus (tenant_id, workspace, chunks, tokens)
    SELECT $1, $2, (SELECT count(*) FROM new) - (SELECT count(*) FROM old),
        (SELECT coalesce(sum(token_estimate), 0) FROM new) - (SELECT coalesce(sum(token_estimate), 0) FROM old)
    ON CONFLICT (tenant_id, workspace) DO UPDATE SET chunks = agent_memory.doc_corpus.chunks + EXCLUDED.chunks,
        tokens = agent_memory.doc_corpus.tokens + EXCLUDED.tokens
    RETURNING 1)
UPDATE agent_memory.doc_items SET latest_version = $5 WHERE id = $3
"""


async def make_latest(conn: asyncpg.Connection, scope: Scope, item_id: str, old: int | None, new: int) -> None:
    await conn.execute(_STATS, scope.tenant_id, scope.workspace, item_id, old, new)


_LIVE_CHUNK = (
    "JOIN agent_memory.doc_items i ON i.id = c.item_id AND c.version_num = i.latest_version"
    " AND ($3::text[] IS NULL OR i.kind = ANY($3)) AND ($4 OR i.status = 'active')"
)
BM25_K1, BM25_B = 1.2, 0.75

# BM25 over the latest versions' chunks: the query's terms are what Postgres's parser makes of it ($5, less the
# stopwords $6), each weighing idf = ln(1 + (N - df + 0.5) / (df + 0.5)) from the
# workspace's statistics, and a chunk scores the sum over the terms it holds of idf x tf (k1 + 1) / (tf + k1 (1 - b +
# b len / avglen)), len its token estimate. The matches scored are at most 2000 (the GIN index finds them).
_BM25 = f"""
WITH q AS (SELECT DISTINCT t AS term FROM unnest(tsvector_to_array(to_tsvector('simple', $5))) t
           WHERE NOT (t = ANY($6::text[]))),
query AS (SELECT to_tsquery('simple', string_agg(quote_literal(term), ' | ')) AS tsq FROM q),
corpus AS (SELECT greatest(chunks, 1) AS n, greatest(tokens::float8 / greatest(chunks, 1), 1) AS avglen
                FROM agent_memory.doc_corpus WHERE tenant_id = $1 AND workspace = $2),
idf AS (SELECT q.term, ln(1 + ((SELECT n FROM corpus) - coalesce(s.df, 0) + 0.5) / (coalesce(s.df, 0) + 0.5)) AS w
        FROM q LEFT JOIN agent_memory.doc_term_stats s
          ON s.tenant_id = $1 AND s.workspace = $2 AND s.term = q.term),
cand AS MATERIALIZED (
    SELECT c.item_id, c.version_num, c.chunk_index, c.tsv, c.token_estimate FROM agent_memory.doc_chunks c {_LIVE_CHUNK}
    WHERE c.tenant_id = $1 AND c.workspace = $2 AND c.tsv @@ (SELECT tsq FROM query) LIMIT 2000)
SELECT cand.item_id, cand.version_num, cand.chunk_index,
       sum(idf.w * (t.tf * ({BM25_K1} + 1)) / (t.tf + {BM25_K1} * (1 - {BM25_B} + {BM25_B}
           * greatest(cand.token_estimate, 1) / (SELECT avglen FROM corpus)))) AS score,
       (sum(idf.w) / nullif((SELECT sum(w) FROM idf), 0))::float8 AS coverage
FROM cand CROSS JOIN LATERAL (
    SELECT u.lexeme, coalesce(array_length(u.positions, 1), 1) AS tf FROM unnest(cand.tsv) u) t
JOIN idf ON idf.term = t.lexeme
GROUP BY 1, 2, 3 ORDER BY score DESC, 1, 3 LIMIT $7
"""


async def bm25(
    conn: asyncpg.Connection, scope: Scope, text: str, kinds, archived: bool, limit: int
) -> tuple[list[tuple], list[float]]:
    """The chunks `text` matches, best first, and the share of the query's weight (its terms' summed idf) each one
    holds. Its terms come from Postgres's own parser, as the chunks' do (a query's `ERR_QUEUE_STALLED` is err,
    queue, stalled there too), less the stopwords."""
    rows = await conn.fetch(_BM25, scope.tenant_id, scope.workspace, kinds, archived, text, sorted(STOPWORDS), limit)
    keys = [(r["item_id"], r["version_num"], r["chunk_index"]) for r in rows]
    return keys, [float(r["coverage"] or 0.0) for r in rows]


async def trigram(
    conn: asyncpg.Connection, scope: Scope, identifier: str, kinds, archived: bool, limit: int
) -> list[tuple]:
    rows = await conn.fetch(
        "WITH m AS MATERIALIZED (SELECT c.item_id, c.version_num, c.chunk_index, c.text FROM agent_memory.doc_chunks c"
        f" {_LIVE_CHUNK} WHERE c.tenant_id = $1 AND c.workspace = $2 AND $5 <% c.text LIMIT 200)"
        " SELECT item_id, version_num, chunk_index FROM m ORDER BY $5 <<-> text, item_id, chunk_index LIMIT $6",
        scope.tenant_id,
        scope.workspace,
        kinds,
        archived,
        identifier,
        limit,
    )
    return [(r["item_id"], r["version_num"], r["chunk_index"]) for r in rows]


async def nearest_scored(
    conn: asyncpg.Connection,
    scope: Scope,
    profile_id: str,
    dimension: int,
    vector: Any,
    kinds,
    archived: bool,
    limit: int,
) -> list[tuple[tuple, float]]:
    """The chunks nearest the query vector in the active profile, with their cosine distance (HNSW with an iterative
    scan, so chunks of other workspaces or old versions the index meets first do not leave the list short)."""
    if not profile_id.replace("_", "").isalnum():
        raise ValueError(f"bad profile id {profile_id!r}")
    await conn.execute(
        "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true),"
        f" set_config('hnsw.ef_search', '{max(40, 2 * limit)}', true)"
    )
    # Ordered over the vectors alone, so the walk is the profile's HNSW index (joined to the chunks, the planner
    # scanned every chunk of the workspace and sorted them all: bench.documents_scale's plans); whether a chunk is
    # of its item's latest version, of the kinds asked and not archived is checked per candidate, and the iterative
    # scan goes on until `limit` pass.
    candidates = (
        f"SELECT e.item_id, e.version_num, e.chunk_index, e.embedding::vector({int(dimension)}) <=> $5 AS distance"
        f" FROM agent_memory.chunk_embeddings e WHERE e.profile_id = '{profile_id}'"
        " AND e.tenant_id = $1 AND e.workspace = $2"
        " AND EXISTS (SELECT 1 FROM agent_memory.doc_items i WHERE i.id = e.item_id"
        " AND i.latest_version = e.version_num AND ($3::text[] IS NULL OR i.kind = ANY($3))"
        " AND ($4 OR i.status = 'active'))"
    )
    args = (scope.tenant_id, scope.workspace, kinds, archived, vector, limit)
    rows = await conn.fetch(f"{candidates} ORDER BY e.embedding::vector({int(dimension)}) <=> $5 LIMIT $6", *args)
    if len(rows) < limit:
        # the index holds every workspace's chunks: a small workspace's few may be past what the walk visits
        # (hnsw.max_scan_tuples). Short, the list is recomputed exactly over the workspace's own vectors (the
        # fence keeps the planner off the index), which for so few is cheap
        rows = await conn.fetch(f"SELECT * FROM ({candidates} OFFSET 0) c ORDER BY distance LIMIT $6", *args)
    # relaxed_order may hand a candidate back a little out of order: the list is sorted by distance here
    rows = sorted(rows, key=lambda r: (r["distance"], r["item_id"], r["chunk_index"]))
    return [((r["item_id"], r["version_num"], r["chunk_index"]), float(r["distance"])) for r in rows]


async def nearest(
    conn: asyncpg.Connection,
    scope: Scope,
    profile_id: str,
    dimension: int,
    vector: Any,
    kinds,
    archived: bool,
    limit: int,
) -> list[tuple]:
    """The keys of `nearest_scored`'s chunks, nearest first."""
    scored = await nearest_scored(conn, scope, profile_id, dimension, vector, kinds, archived, limit)
    return [key for key, _ in scored]


async def fresh_chunks(
    conn: asyncpg.Connection, scope: Scope, profile_id: str, kinds, archived: bool, items: int
) -> list[asyncpg.Record]:
    """The chunks of the latest versions of the workspace's `items` most recently written documents (pinned and not,
    each walked newest first through doc_items_scope_idx) that have no vector in the profile yet, of the kinds and
    status a search reads; newest document first, then in document order (memory-api recall.fresh_chunks)."""
    if not profile_id.replace("_", "").isalnum():
        raise ValueError(f"bad profile id {profile_id!r}")
    newest = (
        "SELECT id, kind, status, is_canonical, latest_version, updated_at FROM agent_memory.doc_items"
        " WHERE tenant_id = $1 AND workspace = $2 AND pinned = {pinned} ORDER BY updated_at DESC LIMIT $5"
    )
    return await conn.fetch(
        "SELECT c.item_id, c.version_num, c.chunk_index, c.text, c.heading_path, c.token_estimate, i.is_canonical"
        f" FROM (SELECT * FROM (({newest.format(pinned='true')}) UNION ALL ({newest.format(pinned='false')})) n"
        " ORDER BY updated_at DESC LIMIT $5) i"
        " JOIN agent_memory.doc_chunks c ON c.item_id = i.id AND c.version_num = i.latest_version AND c.tenant_id = $1"
        " WHERE ($3::text[] IS NULL OR i.kind = ANY($3)) AND ($4 OR i.status = 'active')"
        " AND NOT EXISTS (SELECT 1 FROM agent_memory.chunk_embeddings e WHERE e.item_id = c.item_id"
        f" AND e.version_num = c.version_num AND e.chunk_index = c.chunk_index AND e.profile_id = '{profile_id}'"
        " AND e.tenant_id = $1) ORDER BY i.updated_at DESC, c.item_id, c.chunk_index",
        scope.tenant_id,
        scope.workspace,
        kinds,
        archived,
        items,
    )


async def chunks_indexed(
    conn: asyncpg.Connection, scope: Scope, item_id: str, version_num: int, profile_id: str
) -> bool:
    """Whether every chunk of the version has its vector in the profile (a write's `indexed`)."""
    return not await conn.fetchval(
        "SELECT EXISTS (SELECT 1 FROM agent_memory.doc_chunks c WHERE c.item_id = $1 AND c.version_num = $2"
        " AND c.tenant_id = $4 AND NOT EXISTS (SELECT 1 FROM agent_memory.chunk_embeddings e"
        " WHERE e.item_id = c.item_id AND e.version_num = c.version_num AND e.chunk_index = c.chunk_index"
        " AND e.profile_id = $3 AND e.tenant_id = $4))",
        item_id,
        version_num,
        profile_id,
        scope.tenant_id,
    )


# A chunk's vector as the embedder writes it (ON CONFLICT DO NOTHING: a version's chunks never change), for a chunk
# that still exists
STORE_CHUNK_SQL = (
    "INSERT INTO agent_memory.chunk_embeddings (tenant_id, workspace, item_id, version_num, chunk_index, profile_id,"
    " embedding) SELECT tenant_id, workspace, item_id, version_num, chunk_index, $4, $6 FROM agent_memory.doc_chunks"
    " WHERE item_id = $1 AND version_num = $2 AND chunk_index = $3 AND tenant_id = $5 ON CONFLICT DO NOTHING"
)


async def chunk_rows(conn: asyncpg.Connection, keys: list[tuple]) -> dict[tuple, asyncpg.Record]:
    rows = await conn.fetch(
        "SELECT c.item_id, c.version_num, c.chunk_index, c.text, c.heading_path, c.anchor, i.title, i.kind,"
        " i.is_canonical FROM unnest($1::text[], $2::int[], $3::int[]) k(item_id, version_num, chunk_index)"
        " JOIN agent_memory.doc_chunks c USING (item_id, version_num, chunk_index)"
        " JOIN agent_memory.doc_items i ON i.id = c.item_id",
        [k[0] for k in keys],
        [k[1] for k in keys],
        [k[2] for k in keys],
    )
    return {(r["item_id"], r["version_num"], r["chunk_index"]): r for r in rows}

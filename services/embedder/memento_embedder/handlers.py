"""Embedder event handlers: embed fragments into every profile that needs them (the active one, and the one being
built during a switch), idempotently: a fragment whose current content already has a vector is skipped, so a
re-delivered event, a replay or a backfill of something already done costs one query and no model call."""

from __future__ import annotations

import asyncio
from typing import Any

from memento_embedder.batching import Batcher
from memento_embedder.registry import store_vectors
from memento_shared.db.rls import system_transaction
from memento_shared.text.chunking import chunk_text
from memento_shared.worker import Runtime

# (fragment, profile) pairs without a vector for the fragment's current content, in the profiles that take writes
_MISSING_SQL = (
    "SELECT f.id, f.content, f.content_hash, p.id AS profile_id FROM agent_memory.fragments f"
    " CROSS JOIN agent_memory.embedding_profiles p"
    " LEFT JOIN agent_memory.fragment_embeddings e ON e.fragment_id = f.id AND e.profile_id = p.id"
    " WHERE f.id = ANY($1::text[]) AND p.status IN ('active', 'building') AND ($2::text IS NULL OR p.id = $2)"
    " AND e.content_hash IS DISTINCT FROM f.content_hash"
)


async def embed_fragments(fragment_ids: list[str], rt: Runtime) -> int:
    """Embed and store what is missing for these fragments; returns how many vectors were written."""
    registry = rt.state.get("registry")
    only = None if registry else rt.state["profile_id"]  # a runtime wired with one fixed profile (tests)
    async with rt.pool.acquire() as conn, system_transaction(conn):
        rows = await conn.fetch(_MISSING_SQL, fragment_ids, only)
    if not rows:
        return 0  # deleted since, or already embedded: a re-delivered event is a no-op
    jobs = []
    for row in rows:
        batcher = await registry.batcher(row["profile_id"]) if registry else rt.state["batcher"]
        jobs.append(_embed_one(batcher, row, rt, registry is None))
    await asyncio.gather(*jobs)
    return len(rows)


async def _embed_one(batcher: Batcher, row: Any, rt: Runtime, write_here: bool) -> None:
    key = (row["id"], row["content_hash"])
    if not write_here:
        await batcher.embed_document(row["content"], key)  # the batcher writes the whole batch at once
        return
    vector = await batcher.embed_document(row["content"])
    await store_vectors(rt.pool, row["profile_id"], [key], vector[None, :])


async def embed_fragment(envelope: dict[str, Any], rt: Runtime) -> None:
    await embed_fragments([envelope["payload"]["fragment_id"]], rt)


async def embed_requested(envelope: dict[str, Any], rt: Runtime) -> None:
    """Consolidation's backfill (stage 9): a batch of fragment ids."""
    await embed_fragments(list(envelope["payload"]["fragment_ids"]), rt)


# The chunks of a document version without a vector in the profiles that take writes. Offline each chunk is embedded
# with its heading path ahead of its text (seed 001 Part 3: a chunk alone loses the context its headings give).
_MISSING_CHUNKS_SQL = (
    "SELECT c.item_id, c.version_num, c.chunk_index, c.text, c.heading_path, c.start_char, c.end_char, c.tenant_id,"
    " c.workspace, i.is_canonical, v.content, p.id AS profile_id FROM agent_memory.doc_chunks c"
    " JOIN agent_memory.doc_items i ON i.id = c.item_id"
    " JOIN agent_memory.doc_versions v ON v.item_id = c.item_id AND v.version_num = c.version_num"
    " CROSS JOIN agent_memory.embedding_profiles p"
    " LEFT JOIN agent_memory.chunk_embeddings e ON e.item_id = c.item_id AND e.version_num = c.version_num"
    "   AND e.chunk_index = c.chunk_index AND e.profile_id = p.id"
    " WHERE c.item_id = $1 AND c.version_num = $2 AND p.status IN ('active', 'building') AND e.item_id IS NULL"
    " ORDER BY p.id, c.chunk_index"
)
STORE_CHUNK_SQL = (
    "INSERT INTO agent_memory.chunk_embeddings (tenant_id, workspace, item_id, version_num, chunk_index, profile_id,"
    " embedding) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING"
)


async def embed_document_version(envelope: dict[str, Any], rt: Runtime) -> None:
    """A document version's chunks, in every profile that takes writes. A canonical document's chunks go to a provider
    that embeds in context (Voyage, Jina) together, each as its own span without the overlap; otherwise, and offline,
    each chunk is embedded alone with its heading path ahead of its text (seed 001 Part 3)."""
    payload = envelope["payload"]
    async with rt.pool.acquire() as conn, system_transaction(conn):
        rows = await conn.fetch(_MISSING_CHUNKS_SQL, payload["item_id"], int(payload["version_num"]))
    registry = rt.state.get("registry")
    stored = []
    for profile_id in dict.fromkeys(r["profile_id"] for r in rows):
        chunks = [r for r in rows if r["profile_id"] == profile_id]
        batcher = await registry.batcher(profile_id) if registry else rt.state["batcher"]
        vectors = None
        if chunks[0]["is_canonical"]:
            vectors = await batcher.embed_in_context([r["content"][r["start_char"] : r["end_char"]] for r in chunks])
        if vectors is None:
            jobs = [batcher.embed_document(chunk_text(list(r["heading_path"]), r["text"])) for r in chunks]
            vectors = await asyncio.gather(*jobs)
        stored += [
            (r["tenant_id"], r["workspace"], r["item_id"], r["version_num"], r["chunk_index"], profile_id, v)
            for r, v in zip(chunks, vectors, strict=True)
        ]
    if stored:
        async with rt.pool.acquire() as conn, system_transaction(conn):
            await conn.executemany(STORE_CHUNK_SQL, stored)


HANDLERS = {
    "fragment.stored": embed_fragment,
    "fragment.amended": embed_fragment,
    "embedding.requested": embed_requested,
    "document.versioned": embed_document_version,
}

"""Embedder event handlers: embed fragments into every profile that needs them (the active one, and the one being
built during a switch), idempotently: a fragment whose current content already has a vector is skipped, so a
re-delivered event, a replay or a backfill of something already done costs one query and no model call."""

from __future__ import annotations

import asyncio

from memento_embedder.registry import store_vectors
from memento_shared.db.rls import system_transaction
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


async def _embed_one(batcher, row, rt: Runtime, write_here: bool) -> None:
    key = (row["id"], row["content_hash"])
    if not write_here:
        await batcher.embed_document(row["content"], key)  # the batcher writes the whole batch at once
        return
    vector = await batcher.embed_document(row["content"])
    await store_vectors(rt.pool, row["profile_id"], [key], vector[None, :])


async def embed_fragment(envelope: dict, rt: Runtime) -> None:
    await embed_fragments([envelope["payload"]["fragment_id"]], rt)


async def embed_requested(envelope: dict, rt: Runtime) -> None:
    """Consolidation's backfill (stage 9): a batch of fragment ids."""
    await embed_fragments(list(envelope["payload"]["fragment_ids"]), rt)


HANDLERS = {
    "fragment.stored": embed_fragment,
    "fragment.amended": embed_fragment,
    "embedding.requested": embed_requested,
}

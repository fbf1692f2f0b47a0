"""Seed 002 tools (the `simple` profile), on the rows every dialect shares (docs/dialects.md "simple").

store_memory never overwrites: it stores the new fact and answers with what it may outdate (`similar`) and the exact
call that would mark one outdated; the agent decides and calls supersede_memory. The new memory's vector is computed
on the request path and written in the same transaction, so it is searchable by meaning at once."""

from __future__ import annotations

from typing import Any

from memento_memory_api import render
from memento_memory_api.context import ToolContext
from memento_memory_api.recall import engine, similar
from memento_memory_api.repositories import fragments as repo
from memento_memory_api.store import new_row, store_fragment, supersede
from memento_memory_api.tools.common import vector_now, whole_text
from memento_memory_api.tools.registry import handles
from memento_shared.errors import ErrorCode, MementoError, invalid, not_found
from memento_shared.text.keywords import extract_keywords
from memento_shared.tools.simple import (
    ListRecentMemoriesArgs,
    SearchMemoriesArgs,
    StoreMemoryArgs,
    SupersedeMemoryArgs,
)

TOPIC = "general"  # seed 002 has no topic; seed 000's recall can still filter these rows by it
# "explicit" facts (the user asked) rank with seed 000's decisions, extracted ones with its facts
IMPORTANCE = {"explicit": 0.8, "extracted": 0.5}


def action_for(old_id: str, new_id: str) -> str:
    return f'Call supersede_memory("{old_id}", "{new_id}") to mark the old memory as outdated.'


@handles("store_memory")
async def store_memory(ctx: ToolContext, args: StoreMemoryArgs) -> dict[str, Any]:
    content = whole_text(args.content, "content", ctx)
    vector = await vector_now(ctx, content)
    fragment = new_row(
        ctx,
        content,
        topic=TOPIC,
        keywords=extract_keywords(content),
        type="fact",
        importance=IMPORTANCE[args.source],
        source=args.source,
        # a seed-002 memory holds until the agent supersedes it: seed 000's TTL stages never expire it
        ttl_tier="permanent",
        confidence=args.confidence,
    )
    async with ctx.uow(ctx.scope) as uow:
        memory_id, created = await store_fragment(ctx, uow, fragment)
        if not created and not repo.is_current(await repo.get(uow.conn, memory_id)):
            # stored again after it was superseded: the fact holds again (the agent may now supersede the other)
            await repo.revive(uow.conn, memory_id)
        if vector is not None:
            await repo.store_vector(uow.conn, ctx.profile.id, memory_id, fragment["content_hash"], vector)
        found = await _similar(ctx, uow.conn, content, vector, memory_id)
        row = await repo.get(uow.conn, memory_id)
        indexed = bool(await repo.indexed(uow.conn, ctx.scope, ctx.profile.id, [memory_id]))
    return {
        "created": render.memory(row),
        "similar": found,
        "action_required": " ".join(action_for(m["id"], memory_id) for m in found) or None,
        "duplicate": not created,
        "indexed": indexed,
    }


async def _similar(ctx: ToolContext, conn: Any, content: str, vector: Any, memory_id: str) -> list[dict[str, Any]]:
    """Up to five current memories of the caller's scope that `content` may outdate, most similar first: by cosine to
    its vector, or by shared words without one, each above its calibrated cut-off."""
    # Room for the memory itself (written first, it is its own nearest) and for superseded rows, which the vector
    # search drops after finding the k nearest (recall.vector._with_rows)
    wanted = 4 * (similar.LIMIT + 1)
    if vector is not None:
        found = await engine.find(ctx, conn, engine.Query(vector=vector, lexical=False, limit=wanted))
        scored = found.similarity
        floor = similar.cutoff(ctx.profile.id, ctx.settings.similar_min_score)
    else:
        found = await engine.find(ctx, conn, engine.Query(text=content, limit=wanted))
        scored = {i: similar.lexical_relevance(content, row["content"]) for i, row in found.rows.items()}
        floor = similar.cutoff(similar.LEXICAL, ctx.settings.similar_min_score)
    ranked = sorted((i for i in scored if i != memory_id and scored[i] >= floor), key=lambda i: -scored[i])
    return [render.memory(found.rows[i], round(scored[i], 4)) for i in ranked[: similar.LIMIT]]


@handles("supersede_memory")
async def supersede_memory(ctx: ToolContext, args: SupersedeMemoryArgs) -> dict[str, Any]:
    old_id, new_id = args.old_memory_id, args.new_memory_id
    if old_id == new_id:
        raise invalid("new_memory_id", "must differ from old_memory_id: a memory cannot supersede itself")
    async with ctx.uow(ctx.scope) as uow:
        rows = await repo.lock_pair(uow.conn, old_id, new_id)
        for field, wanted in (("old_memory_id", old_id), ("new_memory_id", new_id)):
            if wanted not in rows:
                raise not_found(f"{field}: memory {wanted!r}")
        current = rows[old_id]["superseded_by"]
        if current != new_id:
            if current is not None:
                raise MementoError(
                    ErrorCode.CONFLICT,
                    f"old_memory_id: memory {old_id} is already superseded by {current}",
                    field="old_memory_id",
                )
            chain = await repo.successors(uow.conn, new_id)
            if old_id in chain:
                raise MementoError(
                    ErrorCode.CONFLICT,
                    f"new_memory_id: memory {new_id} is already superseded by {chain[0]}, which {old_id} leads to;"
                    " superseding it would close a cycle",
                    field="new_memory_id",
                )
            # seed 000's view of the same fact: an edge old -superseded_by-> new (amend's supersedes makes the same)
            await supersede(uow, rows[old_id], new_id)
    return {"success": True, "message": f"Memory {old_id} marked as superseded by {new_id}"}


@handles("search_memories")
async def search_memories(ctx: ToolContext, args: SearchMemoriesArgs) -> dict[str, Any]:
    async with engine.searching(ctx, engine.Query(text=args.query)) as (_, found):
        best = found.best_score()
        ranked = found.fused()[: args.limit]
    # relevance_score: the fused score as a share of a memory ranked first by every search, in (0, 1]
    memories = [render.memory(found.rows[i], round(score / best, 4)) for i, score in ranked]
    ctx.access.record(ctx.scope, [m["id"] for m in memories])
    return {"memories": memories} | ({"meaning_search": "partial"} if found.partial else {})


@handles("list_recent_memories")
async def list_recent_memories(ctx: ToolContext, args: ListRecentMemoriesArgs) -> dict[str, Any]:
    async with ctx.uow(ctx.scope) as uow:
        rows = await repo.recent(uow.conn, ctx.scope, ctx.visible_agents(), args.limit)
    memories = [render.memory(row) for row in rows]
    ctx.access.record(ctx.scope, [m["id"] for m in memories])
    return {"memories": memories}

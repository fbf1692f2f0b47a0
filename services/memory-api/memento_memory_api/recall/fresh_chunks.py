"""Read your own writes by meaning in documents (issue 47): memory.search also ranks, by meaning, the chunks of the
workspace's newest written documents whose vectors the embedder has not written yet (recall.fresh does the same for
fragments, and says why).

A document is the workspace's, not an agent's: the chunks read are those of the latest versions of the workspace's
RECALL_FRESH_ROWS most recently written documents that have no vector in the active profile, newest document first
and in document order, embedded up to RECALL_FRESH_TOKENS tokens (the first always; a chunk is up to ~600 tokens, so
one chunk costs about a second of this machine's model). Each is embedded as the embedder embeds it alone (its
heading path ahead of its text), scored by its exact cosine, merged into the semantic list where its distance puts
it, and written back off the request path. A canonical document's chunks under a provider that embeds them in context
(Voyage, Jina) are left to the embedder: a chunk embedded alone would rank other than it will.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from memento_memory_api.context import ToolContext
from memento_memory_api.recall.fresh import cosine, passages
from memento_memory_api.repositories import documents as docs
from memento_shared.text.chunking import chunk_text

IN_CONTEXT = ("voyage", "jina")  # providers that embed a canonical document's chunks together (embedder handlers)


@dataclass
class FreshChunks:
    rows: list[Any] = field(default_factory=list)
    vectors: asyncio.Task[Any] | None = None  # their vectors, in `rows`' order, or None when unavailable
    left_out: int = 0  # chunks found by their words only: past the token budget, or embedded in context later
    partial: bool = False  # set by `nearest`: a fresh chunk went without its meaning

    def cancel(self) -> None:
        if self.vectors is not None and not self.vectors.done():
            self.vectors.cancel()


async def start(ctx: ToolContext, conn: asyncpg.Connection, kinds: Any, archived: bool) -> FreshChunks | None:
    """Read the fresh chunks (a few index entries and their chunks) and start embedding them; None when off."""
    settings = ctx.settings
    if settings.recall_fresh_rows <= 0:
        return None
    rows = await docs.fresh_chunks(conn, ctx.scope, ctx.profile.id, kinds, archived, settings.recall_fresh_rows)
    fresh, used = FreshChunks(), 0
    for row in rows:
        in_context = row["is_canonical"] and ctx.profile.provider in IN_CONTEXT
        if in_context or (fresh.rows and used + row["token_estimate"] > settings.recall_fresh_tokens):
            fresh.left_out += 1
            continue
        used += row["token_estimate"]
        fresh.rows.append(row)
    if fresh.rows:
        texts = [chunk_text(list(r["heading_path"]), r["text"]) for r in fresh.rows]
        fresh.vectors = asyncio.create_task(passages(ctx, texts))
    return fresh


async def nearest(
    ctx: ToolContext,
    conn: asyncpg.Connection,
    query_vector: Any,
    fresh: FreshChunks | None,
    kinds: Any,
    archived: bool,
    limit: int,
) -> list[tuple[Any, ...]]:
    """memory.search's semantic list: the index's nearest chunks with the fresh ones at their exact distance, nearest
    first (ties by key, as docs.nearest orders them), at most `limit`; the fresh vectors go to the write-back."""
    scope = ctx.scope
    found = await docs.nearest_scored(conn, scope, ctx.profile.id, ctx.profile.dimension, query_vector, kinds,
                                      archived, limit)  # fmt: skip
    if fresh is None:
        return [key for key, _ in found]
    vectors = await fresh.vectors if fresh.vectors is not None else None
    fresh.partial = fresh.left_out > 0 or (bool(fresh.rows) and vectors is None)
    if not vectors:
        return [key for key, _ in found]
    keys = [(r["item_id"], r["version_num"], r["chunk_index"]) for r in fresh.rows]
    scored = [(key, 1.0 - cosine(query_vector, v)) for key, v in zip(keys, vectors, strict=True)]
    known = set(keys)
    scored += [(key, distance) for key, distance in found if key not in known]
    scored.sort(key=lambda pair: (pair[1], pair[0][0], pair[0][2]))
    if ctx.write_back is not None:
        batch = [(*key, ctx.profile.id, scope.tenant_id, v) for key, v in zip(keys, vectors, strict=True)]
        ctx.write_back.write(scope, docs.STORE_CHUNK_SQL, batch)
    return [key for key, _ in scored[:limit]]

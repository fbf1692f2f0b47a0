"""The skip list's meaning match (seed 003 `memento_skip_check`, `memento_context`'s warnings): which entries the
text an agent is about to act on is about, by the cosine of the text's query vector and each entry's document vector,
at or above the profile's calibrated cut-off (recall.similar.SKIP_CUTOFFS). An entry with no vector in the active
profile (added while the embedder was away, or under another profile) has it made here: all such entries in one
embedder call, kept in one statement when the caller may write."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import numpy as np

from memento_memory_api.context import ToolContext
from memento_memory_api.embedding_client import EmbeddingUnavailable
from memento_memory_api.repositories import working_memory as wm

log = logging.getLogger(__name__)


async def closest(ctx: ToolContext, rows: list[Any], query: Any, cutoff: float, keep: bool) -> list[Any]:
    """The entries of `rows` whose vector is at `cutoff` or closer to `query` (the text's query vector), closest
    first; with `keep`, the vectors made for entries that had none are stored."""
    vectors = await _vectors(ctx, rows, keep)
    scores = {i: similarity(query, v) for i, v in vectors.items()}
    return sorted((r for r in rows if scores.get(r["id"], -1.0) >= cutoff), key=lambda r: -scores[r["id"]])


def similarity(a: Any, b: Any) -> float:
    """The cosine of two vectors (numpy arrays or pgvector values), in single precision as the skip list has it."""
    x, y = (np.asarray(v.to_numpy() if hasattr(v, "to_numpy") else v, dtype=np.float32) for v in (a, b))
    norms = float(np.linalg.norm(x) * np.linalg.norm(y))
    return float(x @ y) / norms if norms else 0.0


async def _vectors(ctx: ToolContext, rows: list[Any], keep: bool) -> dict[str, Any]:
    """Each entry's vector in the active profile: stored, or made now for those without one (in one call; left out
    when the embedder cannot answer in time)."""
    profile = ctx.profile
    vectors = {r["id"]: r["embedding"] for r in rows if r["profile_id"] == profile.id and r["embedding"] is not None}
    missing = [r for r in rows if r["id"] not in vectors]
    if not missing:
        return vectors
    made = await _embedded(ctx, [r["item"] for r in missing])
    if made is None:
        return vectors
    fresh = {r["id"]: v for r, v in zip(missing, made, strict=True) if len(v) == profile.dimension}
    if keep and fresh:
        async with ctx.uow(ctx.scope) as uow:
            await wm.set_skip_vectors(uow.conn, profile.id, fresh)
    return vectors | fresh


async def _embedded(ctx: ToolContext, texts: list[str]) -> list[Any] | None:
    """The entries' document vectors from one embedder call on the request path, or None when it fails or takes
    longer than INLINE_EMBEDDING_TIMEOUT_SECONDS."""
    try:
        async with asyncio.timeout(ctx.settings.inline_embedding_timeout_s):
            return list(await ctx.embedder.embed_passages(texts, ctx.profile.id))
    except (EmbeddingUnavailable, TimeoutError) as exc:
        log.warning("embedding.deferred", extra={"error_type": type(exc).__name__})
        return None

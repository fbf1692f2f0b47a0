"""Seed 003's recall ranking, which memento_recall (memories.py) and memento_context (working.py) both answer with:
memories through the one engine, scored by relevance and decay, and each as the reference server shows it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from memento_memory_api.context import ToolContext
from memento_memory_api.recall import engine
from memento_memory_api.recall.filters import Filters
from memento_shared.domain.decay import decayed

PARTIAL_NOTE = "(Meaning search was partial: no embedding model answered, so some memories were matched by words only.)"


async def ranked_memories(
    ctx: ToolContext, query: str, limit: int, tags: list[str] | None = None, mtype: str | None = None
) -> tuple[list[tuple[Any, float]], bool]:
    """Seed 003's recall through the one engine: hybrid relevance (the fused score as a share of the best possible)
    × recency × access boosts, best first, and whether meaning search was partial (engine.Found.partial). Expired
    and consolidated (superseded) memories are never candidates."""
    # the whole text for the words, its question for the meaning (the engine embeds recall.question's part)
    wanted = engine.Query(
        text=query,
        filters=Filters(tags=tags or None, type=mtype),
        limit=max(engine.CANDIDATES, limit),
    )
    async with engine.searching(ctx, wanted) as (_, found):
        fused, best = found.fused(), found.best_score()
    now = datetime.now(UTC)
    scored = []
    for memory_id, score in fused:
        row = found.rows[memory_id]
        scored.append((row, score / best * decayed(row["created_at"], row["access_count"], row["accessed_at"], now)))
    scored.sort(key=lambda pair: (-pair[1], -pair[0]["created_at"].timestamp()))
    chosen = scored[:limit]
    if ctx.scope.workspace == ctx.principal.workspace:  # a peek at another workspace leaves its counts alone
        # written before the answer, as the reference server does: the next recall already shows (and ranks by) it
        await ctx.access.record_now(ctx.scope, [row["id"] for row, _ in chosen])
    return chosen, found.partial


def recalled(row: Any, score: float) -> dict[str, Any]:
    return {
        "id": row["id"],
        "content": row["content"],
        "type": row["type"],
        "tags": list(row["keywords"]),
        "score": round(score, 4),
        "created_at": row["created_at"].isoformat(),
        "expires_at": iso(row["expires_at"]),
        "access_count": row["access_count"],
        "last_accessed_at": iso(row["accessed_at"]),
        "linkages": list(row["linkages"]),
    }


def iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None

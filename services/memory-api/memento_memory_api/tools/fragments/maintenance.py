"""Seed 000 maintenance tools: memory_stats (§6.10), memory_consolidate (§6.11), graph_explore (§6.12)."""

from __future__ import annotations

import uuid
from typing import Any

from memento_memory_api import render
from memento_memory_api.context import ToolContext
from memento_memory_api.repositories import fragments as repo
from memento_memory_api.tools.registry import handles
from memento_shared.consolidation import JOB_NAME as CONSOLIDATE_JOB
from memento_shared.consolidation import STAGES, progress_key
from memento_shared.enqueue import wake
from memento_shared.errors import ErrorCode, MementoError, not_found
from memento_shared.events import queue_key
from memento_shared.tools.fragments import GraphExploreArgs, NoArgs

CAUSAL = ["caused_by", "resolved_by"]


@handles("memory_stats")
async def memory_stats(ctx: ToolContext, args: NoArgs) -> dict[str, Any]:
    agents = ctx.visible_agents()
    async with ctx.uow(ctx.scope) as uow:
        counts = await repo.stats(uow.conn, uow.scope, agents, ctx.profile.id)
    total = counts["total"]
    return {
        "totalFragments": total,
        "byTtlTier": dict.fromkeys(("hot", "warm", "cold", "permanent"), 0) | counts["by_tier"],
        "byType": counts["by_type"],
        "anchors": counts["anchors"],
        "embeddingCoverage": round(counts["embedded"] / total, 4) if total else 1.0,
        "embeddingProfile": ctx.profile.id,
        "embeddingBacklog": counts["embedding_backlog"],
        "embeddingBacklogOldestSeconds": (
            round(counts["embedding_backlog_oldest_s"], 1) if counts["embedding_backlog_oldest_s"] is not None else None
        ),
        "meanUtility": round(float(counts["utility"]), 4) if counts["utility"] is not None else None,
        "meanImportance": round(float(counts["importance"]), 4) if counts["importance"] is not None else None,
        "links": counts["links"],
        "outboxBacklog": counts["backlog"],
        "deadLetters": counts["dead_letters"],
        "lastConsolidation": _run(counts["last_consolidation"]),
        "consolidationRunning": await _running_consolidation(ctx),
    }


def _run(row) -> dict[str, Any] | None:
    if row is None:
        return None
    return {
        "trigger": row["trigger"],
        "startedAt": row["started_at"].isoformat(),
        "finishedAt": row["finished_at"].isoformat(),
        # jsonb keeps object keys in its own order: the stages are given back in the pipeline's
        "stages": {name: row["stages"][name] for name in STAGES if name in (row["stages"] or {})},
    }


async def _running_consolidation(ctx: ToolContext) -> dict[str, int | str] | None:
    """The consolidator's progress hash for this workspace (memento_shared.consolidation), while a run is going.
    Best effort: without Redis the stats still answer, without this part."""
    if ctx.redis is None:
        return None
    try:
        raw = await ctx.redis.hgetall(progress_key(ctx.scope.tenant_id, ctx.scope.workspace))
        progress = {k.decode(): v.decode() for k, v in raw.items()}
        if not progress or progress.get("stage") in ("done", "failed"):
            return None
        return {"stage": progress["stage"], "done": int(progress["done"]), "total": int(progress["total"])}
    except Exception:  # Redis away or slow (REDIS_TIMEOUT_SECONDS), or a hash of another shape
        return None


@handles("memory_consolidate")
async def memory_consolidate(ctx: ToolContext, args: NoArgs) -> dict[str, Any]:
    """Runs on the consolidator worker (serialised per tenant there); this call waits for its per-stage counts. The
    worker reports each finished stage on the call's progress channel (memento_shared.progress), if it has one."""
    if ctx.queue is None:
        raise MementoError(ErrorCode.RESOURCE_BUSY, "the job queue is unavailable; try again")
    job = await ctx.queue.enqueue_job(
        CONSOLIDATE_JOB,
        ctx.scope.tenant_id,
        ctx.scope.workspace,
        # only when there is one: a consolidator from before progress ids takes no such argument (rolling upgrade)
        **({"progress_id": ctx.progress_id} if ctx.progress_id else {}),
        _queue_name=queue_key("consolidator"),
        _job_id=f"consolidate:{uuid.uuid4()}",
    )
    await wake(ctx.queue, queue_key("consolidator"))
    try:
        result = await job.result(timeout=ctx.settings.consolidate_timeout_s, poll_delay=0.1)
    except TimeoutError:
        raise MementoError(
            ErrorCode.RESOURCE_BUSY, "consolidation is still running; its counts will be in memory_stats later"
        ) from None
    except Exception as exc:
        if "is running" in str(exc) or type(exc).__name__ == "ConsolidationBusy":
            raise MementoError(
                ErrorCode.RESOURCE_BUSY, "a consolidation of this workspace is already running; retry later"
            ) from None
        raise MementoError(ErrorCode.STORAGE_ERROR, f"consolidation failed ({type(exc).__name__})") from None
    return {
        "success": True,
        "stages": result["stages"],
        "contradictions": result.get("contradictions", []),
        "stats": result.get("stats", {}),
        "duration_ms": int(result.get("duration_ms", 0)),
    }


@handles("graph_explore")
async def graph_explore(ctx: ToolContext, args: GraphExploreArgs) -> dict[str, Any]:
    async with ctx.uow(ctx.scope) as uow:
        origin = await repo.get(uow.conn, args.startId)
        if origin is None:
            raise not_found(f"fragment {args.startId!r}")
        edges = await repo.edges(uow.conn, args.startId, CAUSAL)
        neighbour_ids = list(dict.fromkeys(e["to_id"] if e["from_id"] == args.startId else e["from_id"] for e in edges))
        rows = {r["id"]: r for r in await repo.rows_by_ids(uow.conn, neighbour_ids)}
    visible_edges = [e for e in edges if e["from_id"] in rows or e["to_id"] in rows]  # RLS hid the others' ends
    return {
        "origin": render.fragment(origin),
        "edges": [
            {"fromId": e["from_id"], "toId": e["to_id"], "relationType": e["relation_type"]} for e in visible_edges
        ],
        "nodes": [render.fragment(rows[i]) for i in neighbour_ids if i in rows],
    }

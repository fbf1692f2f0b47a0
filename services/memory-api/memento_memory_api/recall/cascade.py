"""The recall cascade (seed 000 §4): what the engine finds at L1 Redis sets → L2 GIN → L3 vector + lexical fused by
RRF, then seed 000's ranking, the token budget and one-hop links."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from opentelemetry import trace

from memento_memory_api import render
from memento_memory_api.context import ToolContext
from memento_memory_api.recall import engine
from memento_memory_api.repositories import fragments as repo
from memento_shared.telemetry.metrics import RECALL_TIER_HITS
from memento_shared.text.keywords import normalise_keywords
from memento_shared.tools.fragments import RecallArgs

DEFAULT_LINK_TYPES = ["caused_by", "resolved_by", "related"]


async def recall(ctx: ToolContext, args: RecallArgs) -> dict[str, Any]:
    query = engine.Query(
        keywords=normalise_keywords(args.keywords or []),
        text=args.text,
        topic=args.topic,
        type=args.type,
        threshold=args.threshold,
        superseded=args.includeSuperseded,
    )
    agents = ctx.visible_agents()
    async with engine.searching(ctx, query) as (uow, found):
        conn, rows = uow.conn, found.rows
        composite = not args.text and len(rows) > 1 and await _store_is_large(ctx, conn, agents)  # one row: no order
        order = _order(ctx, found, composite)
        chosen, used = _within_budget(order, rows, args.tokenBudget)
        linked_rows: list[Any] = []
        if args.includeLinks and chosen:
            relations = [args.linkRelationType] if args.linkRelationType else DEFAULT_LINK_TYPES
            limit = int(ctx.settings.memory_config.get("linkedFragmentLimit", 10))
            for row in await repo.linked(conn, chosen, relations, limit, superseded=args.includeSuperseded):
                if row["id"] in rows and row["id"] in chosen:
                    continue
                if used + row["estimated_tokens"] > args.tokenBudget:
                    continue
                used += row["estimated_tokens"]
                linked_rows.append(row)

    for tier in found.tiers.values():
        RECALL_TIER_HITS.labels(tier).inc()
    # for whoever reads a slow recall's trace: which tiers found its candidates (never what was asked)
    trace.get_current_span().set_attribute("memento.recall.tiers", sorted(set(found.tiers.values())))
    result = [render.fragment(rows[i], found.tiers.get(i), found.similarity.get(i)) for i in chosen]
    result += [render.fragment(r, "link", None, linked=True) for r in linked_rows]
    ctx.access.record(ctx.scope, [f["id"] for f in result])
    return {"fragments": result, "count": len(result), "totalTokens": used, "tokenBudget": args.tokenBudget}


async def _store_is_large(ctx: ToolContext, conn: Any, agents: list[str] | None) -> bool:
    """Seed 000 §4.4: composite ranking applies once the caller's store holds more than activationThreshold
    fragments; a smaller one answers newest first. The verdict is kept a while (PartitionVerdicts), so a keyword
    recall on a large store does not count anything."""
    threshold = int(ctx.settings.memory_config["ranking"].get("activationThreshold", 100))
    scope = ctx.scope
    key = ("ranking", scope.tenant_id, scope.workspace, tuple(agents) if agents is not None else None, threshold)
    known = ctx.partition_verdicts.get(key) if ctx.partition_verdicts is not None else None
    if known is not None:
        return known
    large = await repo.count_up_to(conn, scope, agents, threshold + 1) > threshold
    if ctx.partition_verdicts is not None:
        ctx.partition_verdicts.put(key, large)
    return large


def _order(ctx: ToolContext, found: engine.Found, composite: bool) -> list[str]:
    """Text: by relevance (the ranked lists, which only a recall by text has, fused by RRF). Otherwise §4.4: newest
    first in a small store, composite rank (MEMORY_CONFIG.ranking's weights) in a large one."""
    rows = found.rows
    ids = list(rows)
    if found.ranked:
        fused = [i for i, _ in found.fused()]
        return fused + [i for i in ids if i not in set(fused)]
    if not composite:
        return sorted(ids, key=lambda i: rows[i]["created_at"], reverse=True)
    ranking = ctx.settings.memory_config["ranking"]
    now = datetime.now(UTC)

    def rank(i: str) -> float:
        age_days = (now - rows[i]["created_at"]).total_seconds() / 86400
        recency = 1.0 / (1.0 + age_days / 30)
        return ranking["importanceWeight"] * rows[i]["importance"] + ranking["recencyWeight"] * recency

    return sorted(ids, key=lambda i: -rank(i))


def _within_budget(order: list[str], rows: dict[str, Any], budget: int) -> tuple[list[str], int]:
    chosen, used = [], 0
    for i in order:
        tokens = rows[i]["estimated_tokens"]
        if used + tokens > budget:
            break
        chosen.append(i)
        used += tokens
    return chosen, used

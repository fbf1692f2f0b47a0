"""The recall cascade (seed 000 §4): L1 Redis sets → L2 GIN → L3 vector + lexical fused by RRF,
then ranking, the token budget and one-hop links."""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import UTC, datetime
from typing import Any

from opentelemetry import trace

from memento_memory_api import render
from memento_memory_api.context import ToolContext
from memento_memory_api.embedding_client import EmbeddingUnavailable
from memento_memory_api.recall import l1, lexical, vector
from memento_memory_api.recall.fusion import rrf
from memento_memory_api.repositories import fragments as repo
from memento_shared.telemetry.metrics import RECALL_TIER_HITS, SEARCH_LATENCY
from memento_shared.text.keywords import normalise_keywords
from memento_shared.tools.fragments import RecallArgs

log = logging.getLogger(__name__)
CANDIDATES = 50
DEFAULT_LINK_TYPES = ["caused_by", "resolved_by", "related"]


async def recall(ctx: ToolContext, args: RecallArgs) -> dict[str, Any]:
    scope = ctx.scope
    agents = ctx.visible_agents()
    keywords = normalise_keywords(args.keywords or [])
    # Started before the transaction and awaited inside it: the query embedding (the model's tens of ms) runs while
    # Postgres does the lexical and keyword work, and the L1 read while the transaction opens.
    embedding = asyncio.create_task(_query_vector(ctx, args.text)) if args.text else None
    l1_read = None
    # L1 is keyed by agent namespace (admin reads span every agent), and skipped while a lost write may have left it
    # out of step or a read has just failed (recall.l1.L1Keeper): L2 answers meanwhile
    if keywords and agents is not None and ctx.l1_trusted():
        l1_read = asyncio.create_task(
            l1.lookup(ctx.redis, scope.tenant_id, scope.workspace, agents, keywords, CANDIDATES, ctx.l1_read_failed)
        )
    try:
        async with ctx.uow(scope) as uow:
            return await _recall_in(ctx, args, uow.conn, keywords, agents, embedding, l1_read)
    finally:
        for task in (embedding, l1_read):
            if task is not None and not task.done():
                task.cancel()


async def _query_vector(ctx: ToolContext, text: str) -> Any:
    try:
        return await ctx.embedder.embed_query(text, ctx.profile.id)
    except EmbeddingUnavailable as exc:
        log.warning("recall.embedding_unavailable", extra={"error_type": str(exc)})
        return None


async def _recall_in(
    ctx: ToolContext,
    args: RecallArgs,
    conn: Any,
    keywords: list[str],
    agents: list[str] | None,
    embedding: asyncio.Task | None,
    l1_read: asyncio.Task | None,
) -> dict[str, Any]:
    scope = ctx.scope
    tiers: dict[str, str] = {}
    similarity: dict[str, float] = {}
    ranked_lists: list[list[str]] = []
    rows: dict[str, Any] = {}
    if keywords:
        l1_ids = await l1_read if l1_read is not None else None
        if l1_ids:
            for row in await repo.fetch_by_ids(conn, l1_ids, args.topic, args.type):
                rows[row["id"]] = row
                tiers.setdefault(row["id"], "L1")
        # L2 adds partial matches (any keyword) and covers L1 being down or still rebuilding; for one keyword
        # and no filter, a ready L1 already holds exactly what L2 would find.
        l1_complete = l1_ids is not None and len(keywords) == 1 and args.topic is None and args.type is None
        if not l1_complete and len(rows) < CANDIDATES:
            for row in await repo.by_keywords(conn, keywords, scope, agents, args.topic, args.type, CANDIDATES):
                rows.setdefault(row["id"], row)
                tiers.setdefault(row["id"], "L2")
        if args.text:  # one of the lists text's fusion ranks by; otherwise _order ranks the rows themselves
            ranked_lists.append(sorted(rows, key=lambda i: (tiers[i] != "L1", -rows[i]["importance"])))

    if embedding is not None:
        started = time.perf_counter()
        # Everything that does not need the query vector runs while the model computes it: the lexical search, its
        # rows, and the vector plan's choice; after it, one statement returns the nearest fragments' rows. Both
        # searches apply topic and type themselves, so each returns up to CANDIDATES fragments that satisfy them.
        lexical_ids = await lexical.search(
            conn, args.text, scope, agents, CANDIDATES, topic=args.topic, ftype=args.type
        )
        await _fetch_missing(conn, args, lexical_ids, rows, tiers)
        strategy = await vector.choose(
            conn,
            ctx.profile.id,
            ctx.profile.dimension,
            scope.tenant_id,
            scope.workspace,
            agents,
            CANDIDATES,
            ctx.settings.vector_exact_max_rows,
            ctx.partition_verdicts,
            topic=args.topic,
            ftype=args.type,
        )
        trace.get_current_span().set_attribute("memento.recall.vector_plan", strategy.name)
        query_vector = await embedding
        if query_vector is not None:
            hits = await vector.search(conn, strategy, query_vector)
            hits = [r for r in hits if args.threshold is None or r["similarity"] >= args.threshold]
            for row in hits:
                rows.setdefault(row["id"], row)
                tiers.setdefault(row["id"], "L3")
                similarity[row["id"]] = float(row["similarity"])
            ranked_lists.append([r["id"] for r in hits])
        else:
            await vector.release(conn, strategy)
        ranked_lists.append(lexical_ids)
        SEARCH_LATENCY.labels("hybrid" if query_vector is not None else "lexical").observe(
            time.perf_counter() - started
        )

    if not keywords and not args.text:
        for row in await repo.recent(conn, scope, agents, args.topic, args.type, CANDIDATES):
            rows[row["id"]] = row
            tiers.setdefault(row["id"], "L2")

    composite = not args.text and len(rows) > 1 and await _store_is_large(ctx, conn, agents)  # one row: no order
    order = _order(ctx, rows, ranked_lists, composite)
    chosen, used = _within_budget(order, rows, args.tokenBudget)
    linked_rows: list[Any] = []
    if args.includeLinks and chosen:
        relations = [args.linkRelationType] if args.linkRelationType else DEFAULT_LINK_TYPES
        limit = int(ctx.settings.memory_config.get("linkedFragmentLimit", 10))
        for row in await repo.linked(conn, chosen, relations, limit):
            if row["id"] in rows and row["id"] in chosen:
                continue
            if used + row["estimated_tokens"] > args.tokenBudget:
                continue
            used += row["estimated_tokens"]
            linked_rows.append(row)

    for tier in tiers.values():
        RECALL_TIER_HITS.labels(tier).inc()
    # for whoever reads a slow recall's trace: which tiers found its candidates (never what was asked)
    trace.get_current_span().set_attribute("memento.recall.tiers", sorted(set(tiers.values())))
    result = [render.fragment(rows[i], tiers.get(i), similarity.get(i)) for i in chosen]
    result += [render.fragment(r, "link", None, linked=True) for r in linked_rows]
    ctx.access.record(scope, [f["id"] for f in result])
    return {"fragments": result, "count": len(result), "totalTokens": used, "tokenBudget": args.tokenBudget}


async def _fetch_missing(conn: Any, args: RecallArgs, ids: list[str], rows: dict, tiers: dict[str, str]) -> None:
    # the lexical search already kept to topic and type; the filter here is only a safety net
    missing = [i for i in ids if i not in rows]
    if missing:
        for row in await repo.fetch_by_ids(conn, missing, args.topic, args.type):
            rows[row["id"]] = row
            tiers.setdefault(row["id"], "L3")


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


def _order(ctx: ToolContext, rows: dict[str, Any], ranked_lists: list[list[str]], composite: bool) -> list[str]:
    """Text: by relevance (the ranked lists, which only a recall by text has, fused by RRF). Otherwise §4.4: newest
    first in a small store, composite rank (MEMORY_CONFIG.ranking's weights) in a large one."""
    ids = list(rows)
    if ranked_lists:
        fused = [i for i, _ in rrf([[i for i in r if i in rows] for r in ranked_lists])]
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

"""The recall cascade (seed 000 §4): what the engine finds at L1 Redis sets → L2 GIN → L3 vector + lexical fused by
RRF, then seed 000's ranking, the token budget and one-hop links; and what the reference project has added since:
filters by importance, anchors, case and creation time, recall as of an instant, pages and sparse fields."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

from opentelemetry import trace

from memento_memory_api import render
from memento_memory_api.context import ToolContext
from memento_memory_api.recall import engine, pages, seen
from memento_memory_api.recall.filters import Filters
from memento_memory_api.repositories import fragments as repo
from memento_shared.errors import invalid
from memento_shared.telemetry.metrics import RECALL_TIER_HITS
from memento_shared.text import dates
from memento_shared.text.keywords import normalise_keywords
from memento_shared.tools.fragments import RecallArgs

DEFAULT_LINK_TYPES = ["caused_by", "resolved_by", "related"]
PAGED_CANDIDATES = 500  # per list, when paging: a snapshot holds every match up to about this many
# Without pageSize, at most the reference project's default page (its pagination.defaultPageSize): the first page, and
# no cursor, as its recall answers a client that never sends one (docs/dialects/fragments.md "Pages")
DEFAULT_PAGE = 20


async def recall(ctx: ToolContext, args: RecallArgs) -> dict[str, Any]:
    if args.cursor is not None:
        return await _next_page(ctx, args)
    as_of = _instant(args.asOf) if args.asOf is not None else None
    paging = args.pageSize is not None
    query = engine.Query(
        keywords=normalise_keywords(args.keywords or []),
        text=args.text,
        filters=Filters(
            topic=args.topic,
            type=args.type,
            # as of an instant, what was superseded only later was not yet: every row is a candidate, then judged then
            superseded=args.includeSuperseded or as_of is not None,
            narrow=narrowing(args, as_of),
        ),
        threshold=args.threshold,
        limit=PAGED_CANDIDATES if paging else engine.CANDIDATES,
    )
    seen = await seen_ids(ctx) if args.excludeSeen else set()
    agents = ctx.visible_agents()
    async with engine.searching(ctx, query) as (uow, found):
        conn, rows = uow.conn, found.rows
        if as_of is not None:
            await _as_of(conn, rows, as_of, args.includeSuperseded)
        composite = not args.text and len(rows) > 1 and await _store_is_large(ctx, conn, agents)  # one row: no order
        order = [i for i in _order(ctx, found, composite) if i in rows and i not in seen]
        page_size = args.pageSize or DEFAULT_PAGE
        chosen, used = _within_budget(order, rows, args.tokenBudget, page_size, at_least_one=paging)
        next_cursor = None
        if paging and len(chosen) < len(order):
            options = {"superseded": args.includeSuperseded, "asOf": args.asOf, "includeLinks": args.includeLinks,
                       "linkRelationType": args.linkRelationType, "fields": args.fields, "pageSize": args.pageSize,
                       "tokenBudget": args.tokenBudget}  # fmt: skip
            next_cursor = pages.encode(await pages.open_snapshot(ctx, order, options), len(chosen))
        linked_rows, used = await _links(ctx, conn, args, chosen, rows, used, as_of)
    for tier, hits in Counter(found.tiers.values()).items():  # a label lookup per tier, not per row (~1 µs each)
        RECALL_TIER_HITS.labels(tier).inc(hits)
    # for whoever reads a slow recall's trace: which tiers found its candidates (never what was asked)
    trace.get_current_span().set_attribute("memento.recall.tiers", sorted(set(found.tiers.values())))
    result = [render.fragment(rows[i], found.tiers.get(i), found.similarity.get(i)) for i in chosen]
    result += [render.fragment(r, "link", None, linked=True) for r in linked_rows]
    answer = _answer(ctx, result, used, args.tokenBudget, args.fields, next_cursor)
    if found.partial:  # some rows were found by their words only (engine.Found.partial)
        answer["meaningSearch"] = "partial"
    return answer


async def _next_page(ctx: ToolContext, args: RecallArgs) -> dict[str, Any]:
    """The next page of a snapshot (pages.py): its ids from the cursor's position on, read as they are now. The
    first page's options apply; pageSize, tokenBudget and fields may be given anew."""
    token, offset, ids, options = await pages.read(ctx, args.cursor)
    given = args.model_fields_set
    page_size = args.pageSize if "pageSize" in given else options["pageSize"]  # a snapshot always has one
    budget = args.tokenBudget if "tokenBudget" in given else options["tokenBudget"]
    fields = args.fields if "fields" in given else options["fields"]
    as_of = _instant(options["asOf"]) if options["asOf"] else None
    window = ids[offset : offset + page_size]
    async with ctx.uow(ctx.scope) as uow:
        conn = uow.conn
        # a snapshot's matches stay its matches (superseded since, too); deleted and expired ones are gone
        rows = {r["id"]: r for r in await repo.fetch_by_ids(conn, window, Filters(superseded=True))}
        if as_of is not None:
            await _as_of(conn, rows, as_of, include_superseded=True)
        order = [i for i in window if i in rows]
        chosen, used = _within_budget(order, rows, budget, page_size, at_least_one=True)
        consumed = window.index(chosen[-1]) + 1 if chosen else len(window)  # the deleted ones on the way count too
        page_args = args.model_copy(update={"includeLinks": options["includeLinks"], "tokenBudget": budget,
                                            "linkRelationType": options["linkRelationType"],
                                            "includeSuperseded": options["superseded"]})  # fmt: skip
        linked_rows, used = await _links(ctx, conn, page_args, chosen, rows, used, as_of)
    position = offset + consumed
    next_cursor = pages.encode(token, position) if position < len(ids) else None
    result = [render.fragment(rows[i]) for i in chosen]
    result += [render.fragment(r, "link", None, linked=True) for r in linked_rows]
    return _answer(ctx, result, used, budget, fields, next_cursor)


async def _links(
    ctx: ToolContext,
    conn: Any,
    args: RecallArgs,
    chosen: list[str],
    rows: dict[str, Any],
    used: int,
    as_of: datetime | None = None,
) -> tuple[list[Any], int]:
    """One-hop linked fragments of the chosen ones, as long as the budget lasts (as of `as_of`, when given: none
    created after it, each as it read then)."""
    linked_rows: list[Any] = []
    if args.includeLinks and chosen:
        relations = [args.linkRelationType] if args.linkRelationType else DEFAULT_LINK_TYPES
        limit = int(ctx.settings.memory_config.get("linkedFragmentLimit", 10))
        neighbours = await repo.linked(
            conn, chosen, relations, limit, superseded=args.includeSuperseded or as_of is not None, created_by=as_of
        )
        if as_of is not None:
            then = {r["id"]: r for r in neighbours}
            await _as_of(conn, then, as_of, args.includeSuperseded)
            neighbours = list(then.values())
        for row in neighbours:
            if row["id"] in rows and row["id"] in chosen:
                continue
            if used + row["estimated_tokens"] > args.tokenBudget:
                continue
            used += row["estimated_tokens"]
            linked_rows.append(row)
    return linked_rows, used


def _answer(
    ctx: ToolContext,
    result: list[dict[str, Any]],
    used: int,
    budget: int,
    fields: list[str] | None,
    next_cursor: str | None,
) -> dict[str, Any]:
    ctx.access.record(ctx.scope, [f["id"] for f in result])
    if fields is not None:
        keep = {"id", *fields}
        result = [{k: v for k, v in f.items() if k in keep} for f in result]
    answer = {"fragments": result, "count": len(result), "totalTokens": used, "tokenBudget": budget}
    if next_cursor is not None:
        answer["nextCursor"] = next_cursor
    return answer


def _instant(text: str) -> datetime:
    try:
        at = datetime.fromisoformat(text)
        at = (at if at.tzinfo is not None else at.replace(tzinfo=UTC)).astimezone(UTC)
        at + timedelta(microseconds=1)  # the bound narrowing() takes: an instant at the calendar's end has none
    except (ValueError, OverflowError):
        raise invalid("asOf", "must be an ISO 8601 instant, such as 2026-05-01T12:00:00Z") from None
    return at


def narrowing(args: RecallArgs, as_of: datetime | None) -> dict[str, Any] | None:
    """recall's optional filters as the engine's `narrow` (repositories.fragments.narrowed): importance, anchors,
    the case, and the creation range from timeRange (its words resolved in UTC against now) and asOf."""
    narrow: dict[str, Any] = {}
    if args.minImportance is not None:
        narrow["min_importance"] = args.minImportance
    if args.isAnchor is not None:
        narrow["is_anchor"] = args.isAnchor
    if args.caseId is not None:
        narrow["case_id"] = args.caseId
    if args.timeRange is not None:
        now = datetime.now(UTC)
        for name, bound in (("from", args.timeRange.from_), ("to", args.timeRange.to)):
            if bound is None:
                continue
            period = dates.resolve(bound, now)
            if period is None:
                raise invalid(
                    f"timeRange.{name}",
                    "is not a date recall understands: an ISO date or instant, or an expression such as "
                    "'3 days ago', 'last week', '지난 주', '어제'",
                )
            key, value = ("created_from", period.start) if name == "from" else ("created_to", period.end)
            narrow[key] = value
        if "created_from" in narrow and "created_to" in narrow and narrow["created_from"] >= narrow["created_to"]:
            raise invalid("timeRange", "from must come before to")
    if as_of is not None:  # nothing created after it
        end = as_of + timedelta(microseconds=1)
        narrow["created_to"] = min(narrow.get("created_to", end), end)
    for key in ("created_from", "created_to"):
        if key in narrow:
            narrow[key] = narrow[key].astimezone(UTC).isoformat()
    return narrow or None


async def _as_of(conn: Any, rows: dict[str, Any], at: datetime, include_superseded: bool) -> None:
    """Turn `rows` (in place) into what they were at `at`: each one's content, topic, keywords, type and importance
    from the state its first amend after `at` archived (none: as it is now); and, unless superseded ones are asked
    for, without those whose successor already existed then."""
    if not rows:
        return
    if not include_superseded:
        successors = [r["superseded_by"] for r in rows.values() if r["superseded_by"]]
        born = await repo.created_times(conn, successors) if successors else {}
        for fragment_id in [i for i, r in rows.items() if r["superseded_by"] in born]:
            if born[rows[fragment_id]["superseded_by"]] <= at:
                del rows[fragment_id]
    for fragment_id, state in (await repo.states_at(conn, list(rows), at)).items():
        rows[fragment_id] = {**dict(rows[fragment_id]), **dict(state)}


async def seen_ids(ctx: ToolContext) -> set[str]:
    """What a context call of this session loaded (excludeSeen)."""
    if not ctx.scope.session_id:
        raise invalid("excludeSeen", "needs an MCP session (the gateway supplies it)")
    return await seen.ids(ctx, ctx.scope.session_id)


async def _store_is_large(ctx: ToolContext, conn: Any, agents: list[str] | None) -> bool:
    """Seed 000 §4.4: composite ranking applies once the caller's store holds more than activationThreshold
    fragments; a smaller one answers newest first. The verdict is kept a while (PartitionVerdicts), so a keyword
    recall on a large store does not count anything."""
    threshold = int(ctx.settings.memory_config["ranking"].get("activationThreshold", 100))
    scope = ctx.scope
    key = ("ranking", scope.tenant_id, scope.workspace, tuple(agents) if agents is not None else None, threshold)
    known = ctx.partition_verdicts.get(key) if ctx.partition_verdicts is not None else None
    if known is not None:
        return bool(known)
    large: bool = await repo.count_up_to(conn, scope, agents, threshold + 1) > threshold
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
        ranked = set(fused)  # built once: built per row, it was ~0.3 ms a recall by text of ~180 rows
        return fused + [i for i in ids if i not in ranked]
    if not composite:
        return sorted(ids, key=lambda i: rows[i]["created_at"], reverse=True)
    ranking = ctx.settings.memory_config["ranking"]
    now = datetime.now(UTC)

    def rank(i: str) -> float:
        age_days = (now - rows[i]["created_at"]).total_seconds() / 86400
        recency = 1.0 / (1.0 + age_days / 30)
        return float(ranking["importanceWeight"] * rows[i]["importance"] + ranking["recencyWeight"] * recency)

    return sorted(ids, key=lambda i: -rank(i))


def _within_budget(
    order: list[str], rows: dict[str, Any], budget: int, most: int | None = None, at_least_one: bool = False
) -> tuple[list[str], int]:
    """The first of `order` while the budget lasts (and at most `most`). A page holds at least one fragment even
    over the budget (`at_least_one`): otherwise a fragment larger than it would stop the pages there."""
    chosen: list[str] = []
    used = 0
    for i in order:
        if most is not None and len(chosen) >= most:
            break
        tokens = rows[i]["estimated_tokens"]
        if used + tokens > budget and not (at_least_one and not chosen):
            break
        chosen.append(i)
        used += tokens
    return chosen, used

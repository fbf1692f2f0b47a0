"""Seed 004's turn tools (the `lifecycle` profile): memory_before_turn and memory_after_turn, so a client keeps memory
with two calls a turn. Facts are rows of the one store (recall and search_memories find them); the session's record
is its own tables (repository.py). Errors answer in seed 004's codes (ToolSpec.error_codes)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import secrets
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from memento_memory_api import distill, turns
from memento_memory_api.context import ToolContext
from memento_memory_api.recall import engine
from memento_memory_api.recall.lexical import terms
from memento_memory_api.recall.question import last_message
from memento_memory_api.repositories import fragments as repo
from memento_memory_api.store import new_row, store_fragment, unindex_after_commit
from memento_memory_api.tools.lifecycle import repository as sessions
from memento_memory_api.tools.lifecycle.common import TIERS, busy, scoped
from memento_memory_api.tools.registry import handles
from memento_memory_api.uow import UnitOfWork
from memento_shared import sessions as shared_sessions
from memento_shared.errors import invalid
from memento_shared.telemetry.metrics import (
    MEMORY_AFTER_TURN,
    MEMORY_AFTER_TURN_DURATION,
    MEMORY_BEFORE_TURN,
    MEMORY_FACT_WRITES,
    MEMORY_IDEMPOTENCY_CONFLICTS,
)
from memento_shared.text.keywords import extract_keywords
from memento_shared.text.redaction import redact_pii
from memento_shared.text.tokenizer import count_tokens
from memento_shared.tools.lifecycle import AfterTurnArgs, BeforeTurnArgs

TOPIC = "lifecycle"
CONTEXT_LINE_CHARS = 2000  # a recent item's text in the recall block, at most


# --- memory_before_turn -----------------------------------------------------------------------------------------
def current_input(args: BeforeTurnArgs) -> list[dict[str, Any]]:
    """This turn's input from whichever of the three forms the client used (exactly one)."""
    given = [
        name
        for name in ("current_input", "current_input_text", "conversation_items")
        if getattr(args, name) is not None
    ]
    if len(given) != 1:
        raise invalid("current_input", "give exactly one of current_input, current_input_text, conversation_items")
    if args.current_input is not None:
        return [turns.as_dict(i) for i in args.current_input]
    if args.current_input_text is not None:
        return [turns.message("user", args.current_input_text)]
    return turns.conversation_window(args)


@handles("memory_before_turn")
async def memory_before_turn(ctx: ToolContext, args: BeforeTurnArgs) -> dict[str, Any]:
    settings = ctx.settings
    for field in ("current_input", "conversation_items"):
        turns.check_limits(field, getattr(args, field), settings)
    if args.current_input_text is not None and len(args.current_input_text) > settings.memory_max_part_chars:
        raise invalid("current_input_text", f"more than {settings.memory_max_part_chars} characters")
    ctx = scoped(ctx, args.project)
    status = "error"
    early: asyncio.Task[None] | None = None
    try:
        current = turns.without_recall(current_input(args))  # a replayed recall block is never nested
        said = [turns.text_of(i) for i in current if i.get("role") in ("user", None)]
        asked = "\n".join(said).strip()
        facts: list[tuple[str, str]] = []
        partial = False
        searched = bool(asked and settings.memory_recall_facts_limit)
        if searched:  # its question's vector while the session's items are read: the search joins that call
            embedded = engine.embedded_text(ctx, engine.Query(text=asked[:2000], embed_text=last_message(said)))
            early = asyncio.create_task(_vector_early(ctx, embedded))
        async with ctx.uow(ctx.scope) as uow:
            events, earlier = await _session_items(ctx, uow, args.session_id, asked)
        if searched:
            # the whole turn for the words, the question of its last message for the meaning (recall.question):
            # the model's time grows with every token it reads. The session's own items go back to the model word
            # for word, so a fact they state that has no vector yet needs no meaning scored (recall.fresh)
            query = engine.Query(
                text=asked[:2000],
                embed_text=last_message(said),
                limit=max(engine.CANDIDATES, settings.memory_recall_facts_limit),
                shown="\n".join(turns.text_of(e["item"]) for e in [*earlier, *events]),
            )
            async with engine.searching(ctx, query) as (_, found):
                fused = found.fused()[: settings.memory_recall_facts_limit]
                facts = [(i, found.rows[i]["content"]) for i, _ in fused]
                partial = found.partial
        # older items that match the question first (seed §9.3 search_limit), then the recent ones, oldest first
        context = [_line(e) for e in sorted(earlier, key=lambda e: e["id"]) if turns.text_of(e["item"]).strip()]
        context += [_line(e) for e in events if turns.text_of(e["item"]).strip()]
        fixed = turns.tokens(current) + (count_tokens(args.base_instructions) if args.base_instructions else 0)
        budget = int(args.max_input_tok * settings.memory_compact_threshold)
        kept_facts, kept_context, dropped = turns.fit([text for _, text in facts], context, fixed, budget)
        recall = turns.message("developer", turns.recall_block(kept_facts, kept_context, dropped))
        items = [recall, *current]
        recalled_ids = [fact_id for fact_id, text in facts if text in kept_facts]
        ctx.access.record(ctx.scope, recalled_ids)
        status = "ok"
        answer = {
            "input_items": items,
            "recall_fact_ids": recalled_ids,
            "recall_insight_ids": [],
            "context_token_count": turns.tokens(items),
            "turn_id": args.turn_id or turns.default_turn_id(),
        }
        if partial:  # some facts were found by their words only (engine.Found.partial)
            answer["meaning_search"] = "partial"
        return answer
    finally:
        if early is not None and status != "ok":  # failed before its search used the vector: not wanted now
            early.cancel()
        MEMORY_BEFORE_TURN.labels(status).inc()


async def _vector_early(ctx: ToolContext, text: str) -> None:
    """Embed `text` as the search will (the embedding client shares a call in progress and keeps the vector a
    while); a failure is the search's to meet and report."""
    with contextlib.suppress(Exception):  # EmbeddingUnavailable or worse: the search meets it again and answers
        await ctx.embedder.embed_query(text, ctx.profile.id)


async def _session_items(ctx: ToolContext, uow: UnitOfWork, session_id: str, asked: str) -> tuple[list, list]:
    """The session's newest items, and up to MEMORY_SEARCH_LIMIT older ones that match the question."""
    settings = ctx.settings
    events = await shared_sessions.recent_events(uow.conn, ctx.scope, session_id, settings.memory_recent_context_items)
    oldest = events[0]["id"] if events else 2**62
    earlier = await sessions.earlier_events(
        uow.conn, ctx.scope, session_id, oldest, terms(asked), settings.memory_search_limit
    )
    return events, earlier


def _line(event: Any) -> str:
    role = event["role"] or event["item"].get("type", "item")
    return f"{role}: {turns.text_of(event['item'])[:CONTEXT_LINE_CHARS]}"


# --- memory_after_turn ------------------------------------------------------------------------------------------
@handles("memory_after_turn")
async def memory_after_turn(ctx: ToolContext, args: AfterTurnArgs) -> dict[str, Any]:
    settings = ctx.settings
    for field in ("conversation_items", "input_items", "output_items"):
        turns.check_limits(field, getattr(args, field), settings)
    if args.input_items is None:  # the reference's other form: the turn's input as a window of the conversation
        if args.conversation_items is None:
            raise invalid("input_items", "is required (or conversation_items with current_input_start and count)")
        turns.conversation_window(args)
        start, count = args.current_input_start, args.current_input_count
        args = args.model_copy(update={"input_items": args.conversation_items[start : start + count]})
    if args.turn_id is None:  # the contract's default (seed 004's reference): a new turn each call
        args = args.model_copy(update={"turn_id": turns.default_turn_id()})
    ctx = scoped(ctx, args.project)
    started, status = time.perf_counter(), "error"
    claim = secrets.token_hex(8)
    try:
        async with ctx.uow(ctx.scope) as uow:  # the claim commits on its own, so a concurrent duplicate sees it
            claimed = await sessions.claim_turn(
                uow.conn, ctx.scope, args.session_id, args.turn_id, claim, settings.memory_turn_stale_seconds
            )
        if claimed == "done":
            status = "duplicate"
            return {"ok": True}
        if claimed != "claimed":
            status = "busy"
            MEMORY_IDEMPOTENCY_CONFLICTS.inc()
            raise busy(f"turn_id: turn {args.turn_id!r} is being committed by another call; retry")
        try:
            indexed, new_items, interim = await _commit(ctx, args, claim)
        except BaseException:
            async with ctx.uow(ctx.scope) as uow:  # give the claim back (only ours), so a retry can go at once
                await sessions.release_turn(uow.conn, ctx.scope, args.session_id, args.turn_id, claim)
            raise
        status = "ok"
        if new_items and _model_on(ctx):
            _ask_the_model_later(ctx, args.session_id, new_items, interim)
        return {"ok": True, "indexed": indexed}
    finally:
        MEMORY_AFTER_TURN.labels(status).inc()
        MEMORY_AFTER_TURN_DURATION.observe((time.perf_counter() - started) * 1000)


async def _commit(ctx: ToolContext, args: AfterTurnArgs, claim: str) -> tuple[bool, list[dict[str, Any]], set[str]]:
    """The turn's writes, once: its new items as events and the facts the offline extractor finds in them, under the
    session's lock, and only while this call still holds the turn (a claim taken over as stale writes nothing).
    Returns whether every fact it stored already has its vector (a new one never has), the items the facts came
    from, and the ids of the facts it created (a model asked after the answer replaces them)."""
    settings = ctx.settings
    items = turns.without_recall([turns.as_dict(i) for i in args.input_items])
    outputs = [turns.as_dict(i) for i in args.output_items]
    async with ctx.uow(ctx.scope) as uow:  # what is new, to find its facts before the lock
        known = await _known_hashes(uow, ctx, args.session_id, len(items) + len(outputs))
    new_items = _delta(items, known) + outputs
    candidates = _offline_facts(new_items)
    async with ctx.uow(ctx.scope) as uow:
        try:
            await shared_sessions.lock_session(uow.conn, ctx.scope, args.session_id, settings.memory_lock_timeout_s)
        except asyncpg.LockNotAvailableError:
            raise busy("session_id: the session is locked by another commit or maintenance; retry") from None
        if not await sessions.holds_turn(uow.conn, ctx.scope, args.session_id, args.turn_id, claim):
            raise busy(f"turn_id: turn {args.turn_id!r} was taken over by another call; retry")
        known = await _known_hashes(uow, ctx, args.session_id, len(items) + len(outputs))
        await _store_events(uow, ctx, args, _delta(items, known) + outputs)
        stored, created = await _store_facts(ctx, uow, candidates)
        indexed = stored <= await repo.indexed(uow.conn, ctx.scope, ctx.profile.id, sorted(stored))
        await sessions.touch_meta(uow.conn, ctx.scope, args.session_id, args.user_id)
        await sessions.finish_turn(uow.conn, ctx.scope, args.session_id, args.turn_id, claim)
    return indexed, new_items, created


async def _known_hashes(uow: UnitOfWork, ctx: ToolContext, session_id: str, extra: int) -> set[str]:
    window = ctx.settings.memory_recent_context_items * 2 + extra
    return {e["item_hash"] for e in await shared_sessions.recent_events(uow.conn, ctx.scope, session_id, window)}


def _delta(items: list[dict[str, Any]], known: set[str]) -> list[dict[str, Any]]:
    """The input items this turn adds. A client may send back what the session already holds (its history) ahead of
    the new input, so the leading run of items the session holds is left out, but never the last item, which is the
    turn's own input even when it repeats an earlier one (a user may well say "yes" twice); from the first new item
    on, everything is kept."""
    for index, item in enumerate(items):
        if index == len(items) - 1 or turns.item_hash(item) not in known:
            return items[index:]
    return []


async def _store_events(uow: UnitOfWork, ctx: ToolContext, args: AfterTurnArgs, items: list[dict]) -> None:
    events = []
    for item in items:
        masked = _masked(item)
        events.append((item.get("role"), masked, turns.item_hash(item), turns.tokens([masked])))
    await sessions.add_events(uow.conn, ctx.scope, args.session_id, args.turn_id, events)


def _masked(value: Any) -> Any:
    """The item as stored: PII masked in every text it carries, tool arguments and outputs included (seed §8:
    secrets never reach memory)."""
    if isinstance(value, str):
        return redact_pii(value)
    if isinstance(value, dict):
        return {k: _masked(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked(v) for v in value]
    return value


def _ask_the_model_later(ctx: ToolContext, session_id: str, items: list[dict[str, Any]], interim: set[str]) -> None:
    """The heuristic's model reads the turn after the answer (issue 46: no model work on the request path that can
    wait): the turn is acknowledged with its offline facts, which the model's replace when it answers."""
    if ctx.after_ack is not None:
        ctx.after_ack.submit(
            "turn_facts", functools.partial(_replace_with_model_facts, ctx, session_id, items, interim)
        )


def _model_on(ctx: ToolContext) -> bool:
    """Seed §9.3's heuristic is enabled and has a model to ask."""
    return ctx.heuristic is not None and ctx.heuristic.model is not None


def _offline_facts(items: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The facts a turn states, found without a model: every statement the user makes, and the assistant's
    decisions, instructions and plain facts (a sentence both said is one candidate)."""
    said, answered = _texts(items)
    found = [*distill.candidates(said, "statements"), *distill.candidates(answered, "distill")]
    once: dict[str, tuple[str, str]] = {}
    for content, kind in found:
        once.setdefault(content.lower(), (content, kind))
    return list(once.values())


def _texts(items: list[dict[str, Any]]) -> tuple[str, str]:
    """What the user said and what the assistant answered, each as one text."""
    said = "\n".join(turns.text_of(i) for i in items if i.get("role") == "user").strip()
    answered = "\n".join(turns.text_of(i) for i in items if i.get("role") == "assistant").strip()
    return said, answered


async def _model_facts(ctx: ToolContext, items: list[dict[str, Any]]) -> list[tuple[str, str]] | None:
    """The facts the heuristic's model finds in a turn (the OpenAI Responses API), None when it does not answer."""
    said, answered = _texts(items)
    if not said and not answered:
        return None
    transcript = f"user: {said}\nassistant: {answered}"[:100_000]
    prompt = distill.extract_prompt(transcript, [])
    written = await ctx.heuristic.complete(
        distill.EXTRACT_SYSTEM, prompt, ctx.settings.memory_heuristic_max_output_tokens
    )
    return distill.parse_extracted(written) if written else None


async def _replace_with_model_facts(
    ctx: ToolContext, session_id: str, items: list[dict[str, Any]], interim: set[str]
) -> None:
    """After the answer (memento_memory_api.after_ack): the model's facts for an acknowledged turn are stored as the
    offline ones were, and the offline facts the turn created that the model did not state again are deleted, so the
    tiers hold what the model found. A model that does not answer leaves the offline facts as the turn's facts; so
    does a process that stops first (what the acknowledgement promised, the items and those facts, was committed)."""
    found = await _model_facts(ctx, items)
    if found is None:
        return
    # Two transactions, each locking its rows in one id-ordered pass as every writer does (two passes in one could
    # deadlock with a turn of another session restating the same facts). A maintenance run or a commit holding the
    # session past the timeout fails the job: the offline facts stay.
    async with ctx.uow(ctx.scope) as uow:
        await shared_sessions.lock_session(uow.conn, ctx.scope, session_id, ctx.settings.memory_lock_timeout_s)
        # a model fact in the words of one of the turn's own offline facts is that fact: not said again
        stored, _ = await _store_facts(ctx, uow, found, said_now=interim)
    async with ctx.uow(ctx.scope) as uow:
        await shared_sessions.lock_session(uow.conn, ctx.scope, session_id, ctx.settings.memory_lock_timeout_s)
        # still daily-tier facts (not said again by a later turn meanwhile)
        rows = await uow.conn.fetch(
            "SELECT id, agent_id, keywords FROM agent_memory.fragments WHERE id = ANY($1::text[]) AND source = $2"
            " ORDER BY id FOR UPDATE",
            sorted(interim - stored),
            TIERS["l1"],
        )
        deleted = set(await repo.delete(uow.conn, [r["id"] for r in rows])) if rows else set()
        unindex_after_commit(uow, ctx, [r for r in rows if r["id"] in deleted])


async def _store_facts(
    ctx: ToolContext,
    uow: UnitOfWork,
    candidates: list[tuple[str, str]],
    said_now: frozenset[str] | set[str] = frozenset(),
) -> tuple[set[str], set[str]]:
    """New facts go to the daily tier (L1); a fact stated again moves up to the weekly tier (L2); one already weekly
    is left as it is (not rewritten); one in `said_now` (the same turn's offline facts) is not said again. Returns the
    ids of the turn's facts, new and said again, and of the new ones."""
    settings, now = ctx.settings, datetime.now(UTC)
    rows = []
    for content, kind in candidates[:20]:
        content = redact_pii(content)[: ctx.settings.memory_max_chars]
        rows.append(
            new_row(
                ctx,
                content,
                topic=TOPIC,
                keywords=extract_keywords(content),
                type=kind if kind in ("fact", "decision", "instruction", "observation") else "fact",
                importance=0.5,
                source=TIERS["l1"],
                ttl_tier="permanent",  # their end is their tier's expiry, not seed 000's TTL stages
                expires_at=now + timedelta(days=settings.memory_l1_retention_days),
            )
        )
    # written in one order whatever order the turn said them in: two turns stating the same facts in other orders
    # (two sessions of one workspace) each waited for the other's uncommitted insert of the same words: a deadlock.
    # The facts said again are moved after every insert, in id order, as every writer that locks several rows does
    # (the access flush deadlocked with a turn moving them in its words' order)
    again, stored, new = [], set(), set()
    for row in sorted(rows, key=lambda r: r["content_hash"]):
        fact_id, created = await store_fragment(ctx, uow, row)
        stored.add(fact_id)
        if created:
            new.add(fact_id)
            MEMORY_FACT_WRITES.labels("l1").inc()
        elif fact_id not in said_now:
            again.append(fact_id)
    for fact_id in sorted(set(again)):
        existing = await repo.get(uow.conn, fact_id)
        if existing is None or existing["source"] not in TIERS.values():
            continue  # another dialect's memory with these words: it is not this dialect's to change
        if existing["source"] == TIERS["l1"] or not repo.is_current(existing):
            # said again: up to (or, expired, back into) the weekly tier; a current weekly fact is left as it is
            await uow.conn.execute(
                "UPDATE agent_memory.fragments SET source = $2, expires_at = $3, superseded_by = NULL,"
                " updated_at = now() WHERE id = $1",
                fact_id,
                TIERS["l2"],
                now + timedelta(days=settings.memory_l2_retention_days),
            )
            MEMORY_FACT_WRITES.labels("l2").inc()
    return stored, new

"""Seed 000 tools (the `fragments` profile)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from memento_memory_api.context import ToolContext
from memento_memory_api.recall import l1
from memento_memory_api.recall.cascade import recall as run_recall
from memento_memory_api.repositories import fragments as repo
from memento_memory_api.text.annotate import annotate
from memento_memory_api.tools.common import in_workspace
from memento_memory_api.tools.registry import handles
from memento_memory_api.uow import UnitOfWork
from memento_shared import l1 as l1_layout
from memento_shared import working_memory
from memento_shared.domain.fragments import DEFAULT_IMPORTANCE, content_hash, infer_ttl, new_fragment_id, truncate
from memento_shared.errors import MementoError, invalid, not_found, unavailable
from memento_shared.text.keywords import extract_keywords, normalise_keywords
from memento_shared.text.redaction import redact_pii
from memento_shared.text.tokenizer import count_tokens
from memento_shared.tools.fragments import (
    BatchRememberArgs,
    FragmentFields,
    RecallArgs,
    RememberArgs,
)
from memento_shared.tools.spec import parse_entry


def new_row(ctx: ToolContext, content: str, **fields: Any) -> dict[str, Any]:
    """A new row of the one store in the caller's namespace, for stored (already masked) `content`: its id, hash and
    token count; `fields` give the rest (topic, keywords, type, importance, source, ttl_tier, is_anchor and, for the
    other dialects, confidence, expires_at, linkages)."""
    return {
        "id": new_fragment_id(),
        "tenant_id": ctx.scope.tenant_id,
        "workspace": ctx.scope.workspace,
        "agent_id": ctx.scope.agent_id,
        "content": content,
        "content_hash": content_hash(content),
        "estimated_tokens": count_tokens(content),
        "is_anchor": False,
        **annotation_fields(content, fields.get("source"), ctx.scope.session_id),
        **fields,
    }


ANNOTATION = ("thread", "seq", "event_from", "event_to", "event_said", "expansion")


def annotation_fields(
    content: str, source: str | None, session_id: str | None, written_at: datetime | None = None
) -> dict[str, Any]:
    """Its thread and place, the time it is about and the words searched beside it (issue 28; text.annotate), as of
    `written_at` (default now). Keyphrases stay out of the expansion: they are the content's own words, and counting
    them again cost BM25 recall on LoCoMo."""
    written_at = written_at or datetime.now(UTC)
    noted = annotate(content, source=source, session_id=session_id, written_at=written_at, keyphrases=False)
    return {
        "thread": noted.thread,
        "seq": noted.seq,
        "event_from": noted.event_from,
        "event_to": noted.event_to,
        "event_said": noted.event_said,
        "expansion": noted.expansion or None,
    }


def build_fragment(args: FragmentFields, ctx: ToolContext) -> dict[str, Any]:
    """FragmentFactory (§6.2): mask PII, truncate, hash, keywords, importance, TTL tier, tokens."""
    content = truncate(redact_pii(args.content))
    keywords = normalise_keywords(args.keywords) if args.keywords else extract_keywords(content)
    importance = args.importance if args.importance is not None else DEFAULT_IMPORTANCE[args.type]
    return new_row(
        ctx,
        content,
        topic=args.topic.strip(),
        keywords=keywords,
        type=args.type,
        importance=float(importance),
        source=args.source,
        ttl_tier=infer_ttl(args.type, importance),
        is_anchor=args.isAnchor,
        case_id=args.caseId,
        keywords_given=bool(args.keywords),
    )


async def store_fragment(
    ctx: ToolContext, uow: UnitOfWork, fragment: dict[str, Any], linked_to: list[str] | None = None
) -> tuple[str, bool]:
    """Insert a built fragment (or find its duplicate), link it, emit its event, index it in L1 after commit."""
    new_id = await repo.insert(uow.conn, fragment)
    if new_id is None:
        existing = await repo.id_by_hash(
            uow.conn, fragment["tenant_id"], fragment["workspace"], fragment["agent_id"], fragment["content_hash"]
        )
        return existing, False
    for target in dict.fromkeys(linked_to or []):
        visible, _ = await repo.add_link(uow.conn, fragment, new_id, target, "related")
        if target not in visible:  # nothing was linked to it; raising rolls back the fragment and earlier links
            raise not_found(f"linkedTo fragment {target!r}")
    uow.emit(
        "fragment.stored",
        {"fragment_id": new_id, "content_hash": fragment["content_hash"], "agent_id": fragment["agent_id"]},
    )

    async def index_l1() -> None:
        score = l1_layout.score(fragment["importance"], datetime.now(UTC), ctx.l1_weights())
        await l1.index(
            ctx.l1_for_write(),
            fragment["tenant_id"],
            fragment["workspace"],
            fragment["agent_id"],
            new_id,
            fragment["keywords"],
            score,
            on_failure=ctx.l1_write_failed,
        )

    uow.after_commit.append(index_l1)
    return new_id, True


@handles("remember")
async def remember(ctx: ToolContext, args: RememberArgs) -> dict[str, Any]:
    ctx = in_workspace(ctx, args.workspace)
    fragment = build_fragment(args, ctx)
    if args.scope == "session":
        return await _remember_in_session(ctx, fragment, args.linkedTo or [])
    async with ctx.uow(ctx.scope) as uow:
        fragment_id, created = await store_fragment(ctx, uow, fragment, args.linkedTo)
        indexed = not created and bool(await repo.indexed(uow.conn, ctx.scope, ctx.profile.id, [fragment_id]))
    return {"success": True, "id": fragment_id, "created": created, "indexed": indexed}


@handles("batch_remember")
async def batch_remember(ctx: ToolContext, args: BatchRememberArgs) -> dict[str, Any]:
    """Each entry checked and built on its own (a bad one is answered with its error, never stopping the others);
    the good ones stored in one transaction, as remember stores one: a storage failure stores none."""
    ctx = in_workspace(ctx, args.workspace)
    results: list[dict[str, Any]] = []
    built: list[tuple[int, dict[str, Any]]] = []
    for index, entry in enumerate(args.fragments):
        try:
            built.append((index, build_fragment(parse_entry(FragmentFields, entry, f"fragments.{index}"), ctx)))
        except MementoError as exc:
            results.append({"index": index, "error": exc.to_body()["error"]})
    async with ctx.uow(ctx.scope) as uow:
        # in content-hash order: two batches holding the same contents in other orders would otherwise each wait
        # on the other's first insert (a deadlock); a repeat within the batch follows its first, created: false
        for index, fragment in sorted(built, key=lambda pair: (pair[1]["content_hash"], pair[0])):
            fragment_id, created = await store_fragment(ctx, uow, fragment)
            results.append({"index": index, "id": fragment_id, "created": created})
        # a new row's vector comes later (the embedder); a duplicate's may be there already
        again = [r["id"] for r in results if r.get("created") is False]
        indexed = await repo.indexed(uow.conn, ctx.scope, ctx.profile.id, again)
    for r in results:
        if "id" in r:
            r["indexed"] = r["id"] in indexed
    results.sort(key=lambda r: r["index"])
    created = sum(1 for r in results if r.get("created"))
    failed = sum(1 for r in results if "error" in r)
    return {
        "success": True,  # the call ran: each entry says how it went
        "results": results,
        "created": created,
        "duplicates": len(results) - created - failed,
        "failed": failed,
    }


async def _remember_in_session(ctx: ToolContext, fragment: dict[str, Any], linked_to: list[str]) -> dict[str, Any]:
    """Working memory (§5.2 scope "session"): a Redis list that expires with the MCP session (the gateway slides its
    expiry with the session's and deletes it when the session ends: memento_shared.working_memory). Like a durable
    write, the same content in one namespace is stored once (`created: false` and the first one's id), and linkedTo
    must name fragments the caller can see, stored or in this session's working memory."""
    if not ctx.scope.session_id:
        raise invalid("scope", "'session' needs an MCP session (the gateway supplies it)")
    if ctx.redis is None:
        raise unavailable("working memory needs Redis, which is unavailable")
    key = working_memory.key(ctx.scope.tenant_id, ctx.scope.session_id)
    linked_to = list(dict.fromkeys(linked_to))
    if linked_to:
        await _check_session_links(ctx, key, linked_to)
    # the annotation is for the store's search (its times are no JSON); an entry kept later is annotated then
    entry = {k: v for k, v in fragment.items() if k != "tenant_id" and k not in ANNOTATION} | {
        "linked_to": linked_to,
        "created_at": time.time(),
    }
    ttl_s = ctx.settings.session_ttl_minutes * 60
    stored_id = await working_memory.append(ctx.redis, key, entry, ttl_s)
    # the session id is returned so the agent can pass it to `context` later
    # working memory is never searched by meaning: `indexed` is false
    return {"success": True, "id": stored_id, "created": stored_id == entry["id"], "indexed": False,
            "sessionId": ctx.scope.session_id}  # fmt: skip


async def _check_session_links(ctx: ToolContext, key: str, targets: list[str]) -> None:
    in_session = {
        entry["id"]
        for entry in await working_memory.entries(ctx.redis, key, holding=targets)
        if working_memory.visible(entry, ctx.scope.workspace, ctx.visible_agents())
    }
    stored = [t for t in targets if t not in in_session]
    if stored:
        async with ctx.uow(ctx.scope) as uow:
            found = await repo.visible_ids(uow.conn, stored)
        for target in stored:
            if target not in found:
                raise not_found(f"linkedTo fragment {target!r}")


@handles("recall")
async def recall(ctx: ToolContext, args: RecallArgs) -> dict[str, Any]:
    return await run_recall(in_workspace(ctx, args.workspace), args)

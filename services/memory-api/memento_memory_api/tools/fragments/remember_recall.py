"""Seed 000's remember (durable, or in the session's working memory), batch_remember and recall (the `fragments`
profile)."""

from __future__ import annotations

import time
from typing import Any

from memento_memory_api.context import ToolContext
from memento_memory_api.recall.cascade import recall as run_recall
from memento_memory_api.repositories import fragments as repo
from memento_memory_api.store import ANNOTATION, store_fragment
from memento_memory_api.tools.common import in_workspace
from memento_memory_api.tools.fragments.factory import build_fragment
from memento_memory_api.tools.registry import handles
from memento_shared import working_memory
from memento_shared.errors import MementoError, invalid, not_found, unavailable
from memento_shared.tools.fragments import (
    BatchRememberArgs,
    FragmentFields,
    RecallArgs,
    RememberArgs,
)
from memento_shared.tools.spec import parse_entry


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

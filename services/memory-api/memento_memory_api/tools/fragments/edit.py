"""Seed 000 storage tools beyond remember: forget (§6.4), link (§6.5), amend (§6.6), and fragment_history, the
reading of what amend archives."""

from __future__ import annotations

from typing import Any

import asyncpg

from memento_memory_api import render
from memento_memory_api.context import ToolContext
from memento_memory_api.repositories import fragments as repo
from memento_memory_api.store import annotation_fields, reindex_after_commit, supersede_with_new, unindex_after_commit
from memento_memory_api.tools.registry import handles
from memento_memory_api.uow import UnitOfWork
from memento_shared.domain.fragments import content_hash, infer_ttl, truncate
from memento_shared.errors import ErrorCode, MementoError, invalid, not_found
from memento_shared.text.keywords import extract_keywords, normalise_keywords
from memento_shared.text.redaction import redact_pii
from memento_shared.text.tokenizer import count_tokens
from memento_shared.tools.fragments import AmendArgs, ForgetArgs, FragmentHistoryArgs, LinkArgs


def _protected(row: Any) -> bool:
    return row["ttl_tier"] == "permanent" or row["is_anchor"]


@handles("forget")
async def forget(ctx: ToolContext, args: ForgetArgs) -> dict[str, Any]:
    if (args.id is None) == (args.topic is None):
        raise invalid("id", "give exactly one of id or topic")
    async with ctx.uow(ctx.scope) as uow:
        if args.id is not None:
            row = await repo.get(uow.conn, args.id, for_update=True)
            if row is None:
                raise not_found(f"fragment {args.id!r}")
            if _protected(row) and not args.force:
                raise MementoError(
                    ErrorCode.CONFLICT,
                    f"fragment {args.id!r} is permanent-tier or an anchor; pass force: true to delete it",
                    field="force",
                )
            rows = [row]
        else:
            rows = await repo.by_topic(uow.conn, uow.scope, args.topic, ctx.visible_agents())
        targets = [r for r in rows if args.force or not _protected(r)]
        deleted = await repo.delete(uow.conn, [r["id"] for r in targets]) if targets else []
        gone = set(deleted)  # sets built once: a topic's thousands of rows made these lists' tests quadratic
        unindex_after_commit(uow, ctx, [r for r in targets if r["id"] in gone])
    targeted = {r["id"] for r in targets}
    skipped = [r["id"] for r in rows if r["id"] not in targeted]
    return {"success": True, "deleted": deleted, "count": len(deleted), "skipped": skipped}


@handles("link")
async def link(ctx: ToolContext, args: LinkArgs) -> dict[str, Any]:
    if args.fromId == args.toId:
        raise invalid("toId", "a fragment cannot link to itself")
    owner = {"tenant_id": ctx.scope.tenant_id, "workspace": ctx.scope.workspace, "agent_id": ctx.scope.agent_id}
    async with ctx.uow(ctx.scope) as uow:
        visible, inserted = await repo.add_link(uow.conn, owner, args.fromId, args.toId, args.relationType)
        for field_name, fragment_id in (("fromId", args.fromId), ("toId", args.toId)):
            if fragment_id not in visible:
                raise not_found(f"{field_name} fragment {fragment_id!r}")
        if not inserted:
            raise MementoError(ErrorCode.CONFLICT, f"a link from {args.fromId!r} to {args.toId!r} already exists")
    return {"success": True, "fromId": args.fromId, "toId": args.toId, "relationType": args.relationType}


def _changes(args: AmendArgs, row: Any) -> dict[str, Any]:
    """The new column values, re-deriving what §6.6 says follows from them (masking, hash, keywords, tokens)."""
    changes: dict[str, Any] = {}
    if args.content is not None:
        content = truncate(redact_pii(args.content))
        changes.update(content=content, content_hash=content_hash(content), estimated_tokens=count_tokens(content))
        if args.keywords is None and not row["keywords_given"]:  # the caller's own keywords stay
            changes["keywords"] = extract_keywords(content)
        # the time it is about and its words again; its place in its thread stays
        noted = annotation_fields(content, row["source"], None)
        changes.update({k: v for k, v in noted.items() if k not in ("thread", "seq")})
    if args.keywords is not None:
        changes.update(keywords=normalise_keywords(args.keywords), keywords_given=True)
    if args.topic is not None:
        changes["topic"] = args.topic.strip()
    if args.type is not None:
        changes["type"] = args.type
    if args.importance is not None:
        changes["importance"] = float(args.importance)
    if args.isAnchor is not None:
        changes["is_anchor"] = args.isAnchor
    if "type" in changes or "importance" in changes:
        changes["ttl_tier"] = infer_ttl(changes.get("type", row["type"]), changes.get("importance", row["importance"]))
    return {k: v for k, v in changes.items() if v != row[k]}


@handles("amend")
async def amend(ctx: ToolContext, args: AmendArgs) -> dict[str, Any]:
    given = {"content", "topic", "keywords", "type", "importance", "isAnchor"} & args.model_fields_set
    if not given:
        raise invalid("content", "give at least one of content, topic, keywords, type, importance, isAnchor")
    async with ctx.uow(ctx.scope) as uow:
        row = await repo.get(uow.conn, args.id, for_update=True)
        if row is None:
            raise not_found(f"fragment {args.id!r}")
        changes = _changes(args, row)
        if args.supersedes:
            return await _supersede(ctx, uow, row, changes)
        if not changes:
            version = await uow.conn.fetchval(
                "SELECT count(*) FROM agent_memory.fragment_versions WHERE fragment_id = $1", row["id"]
            )
            indexed = bool(await repo.indexed(uow.conn, ctx.scope, ctx.profile.id, [row["id"]]))
            return {"success": True, "id": row["id"], "version": version, "supersededId": None, "indexed": indexed}
        version = await repo.archive_version(uow.conn, row, ctx.scope.agent_id)
        # the content's uniqueness in the namespace is checked by the UPDATE itself; refusing rolls the whole call
        # back, the archived version included
        try:
            updated = await repo.update(uow.conn, row["id"], changes)
        except asyncpg.UniqueViolationError as exc:  # a write of the same content committed meanwhile
            if exc.constraint_name != "fragments_content_hash_key":
                raise
            updated = False
        if not updated:
            raise _duplicate_content()
        if "content_hash" in changes:
            uow.emit(
                "fragment.amended",
                {"fragment_id": row["id"], "content_hash": changes["content_hash"], "agent_id": row["agent_id"]},
            )
        # new content waits for its vector; other changes keep the one it has (if it has one)
        indexed = "content_hash" not in changes and bool(
            await repo.indexed(uow.conn, ctx.scope, ctx.profile.id, [row["id"]])
        )
        if "keywords" in changes or "importance" in changes:  # the L1 score follows importance
            reindex_after_commit(
                uow,
                ctx,
                row,
                row["id"],
                changes.get("keywords", list(row["keywords"])),
                changes.get("importance", row["importance"]),
            )
    return {"success": True, "id": row["id"], "version": version, "supersededId": None, "indexed": indexed}


def _duplicate_content() -> MementoError:
    return MementoError(
        ErrorCode.CONFLICT, "another fragment in this namespace already has that content", field="content"
    )


async def _supersede(ctx: ToolContext, uow: UnitOfWork, row: Any, changes: dict[str, Any]) -> dict[str, Any]:
    """The amended version becomes a new fragment; the original stays, linked original -superseded_by-> new."""
    if "content_hash" not in changes:
        raise invalid("content", "supersedes needs new content")
    if await repo.id_by_hash(uow.conn, row["tenant_id"], row["workspace"], row["agent_id"], changes["content_hash"]):
        raise _duplicate_content()
    new_id, version = await supersede_with_new(ctx, uow, row, changes)
    return {"success": True, "id": new_id, "version": version, "supersededId": row["id"], "indexed": False}


STATE = ("content", "topic", "keywords", "type", "importance")


def _state(row: Any) -> dict[str, Any]:
    state = {k: row[k] for k in STATE}
    return state | {"keywords": list(row["keywords"]), "importance": round(float(row["importance"]), 4)}


@handles("fragment_history")
async def fragment_history(ctx: ToolContext, args: FragmentHistoryArgs) -> dict[str, Any]:
    """Each archived state (fragment_versions, one per amend) is the `before` of that amend; its `after` is the next
    archived state, or the fragment as it is now. Unknown and invisible ids alike are not found (RLS)."""
    async with ctx.uow(ctx.scope) as uow:
        row = await repo.get(uow.conn, args.id)
        if row is None:
            raise not_found(f"fragment {args.id!r}")
        versions = await repo.versions(uow.conn, row["id"])
        older = await repo.predecessors(uow.conn, row["id"])
        newer = await repo.successors(uow.conn, row["id"])
        visible = await repo.visible_ids(uow.conn, newer) if newer else set()
    states = [_state(v) for v in versions] + [_state(row)]
    return {
        "current": render.fragment(row),
        "history": [
            {
                "version": n,
                "changed_at": v["amended_at"].isoformat(),
                "amended_by": v["amended_by"],
                "before": states[n - 1],
                "after": states[n],
            }
            for n, v in enumerate(versions, start=1)
        ],
        "supersedes": older,
        "supersededBy": [i for i in newer if i in visible],
    }

"""Seed 001's canonical documents (the `documents` profile): upsert with versions and idempotency keys, get by
version, outline and sections by anchor (DIALECTS.md "documents"). A write is one transaction: the item, its new
version (only when the content changed) and its chunks with their full-text vectors, so the outline, sections and
full-text search see it at once. Not built yet: chunk embeddings, memory.commit / search / restore, context packs,
MCP resources."""

from __future__ import annotations

import hashlib
import json
import secrets
from typing import Any

from memento_memory_api.context import ToolContext
from memento_memory_api.repositories import documents as docs
from memento_memory_api.tools.registry import handles
from memento_shared.errors import ErrorCode, MementoError, not_found, unavailable
from memento_shared.text.chunking import chunk_markdown, outline
from memento_shared.text.keywords import normalise_keywords
from memento_shared.text.redaction import redact_pii
from memento_shared.tools.documents import GetArgs, GetSectionArgs, UpsertArgs

KIND = {"app_spec": "spec", "feature_spec": "spec", "implementation_plan": "plan"}


def _request_hash(args: UpsertArgs) -> str:
    request = args.model_dump(exclude={"idempotencyKey"})
    return hashlib.sha256(json.dumps(request, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


@handles("canonical.upsert")
async def canonical_upsert(ctx: ToolContext, args: UpsertArgs) -> dict[str, Any]:
    size = len(args.contentMarkdown.encode())
    if size > ctx.settings.document_max_bytes:
        raise MementoError(
            ErrorCode.PAYLOAD_TOO_LARGE,
            f"contentMarkdown: {size} bytes, more than the {ctx.settings.document_max_bytes} allowed",
            field="contentMarkdown",
        )
    content = redact_pii(args.contentMarkdown)
    request = _request_hash(args)
    async with ctx.uow(ctx.scope) as uow:
        conn, scope = uow.conn, ctx.scope
        if not await docs.claim_key(conn, scope, args.idempotencyKey, "canonical.upsert", request):
            earlier = await docs.answered(conn, scope, args.idempotencyKey)
            if earlier is None:
                raise unavailable("idempotencyKey: its first call did not finish; retry")
            if earlier["tool"] != "canonical.upsert" or earlier["request_hash"] != request:
                raise MementoError(
                    ErrorCode.CONFLICT,
                    "idempotencyKey: already used for another request; use a new key for new content",
                    field="idempotencyKey",
                )
            return earlier["answer"]  # the first answer; nothing written
        tags = normalise_keywords(args.tags or [])
        item = await docs.canonical(conn, scope, args.canonicalKey, lock=True)
        if item is None:
            item = await docs.insert_item(
                conn,
                scope,
                {
                    "id": "doc-" + secrets.token_hex(8),
                    "kind": KIND[args.docClass],
                    "title": args.title,
                    "canonical_key": args.canonicalKey,
                    "doc_class": args.docClass,
                    "is_canonical": True,
                    "tags": tags,
                },
            )
        else:
            await docs.update_item(conn, item["id"], args.title, args.docClass, tags)
        latest = await docs.version(conn, item["id"])
        content_hash = hashlib.sha256(content.encode()).hexdigest()
        if latest is not None and latest["content_hash"] == content_hash:
            answer = {"itemId": item["id"], "versionNum": latest["version_num"], "created": False}
        else:
            num = latest["version_num"] + 1 if latest else 1
            chunks = chunk_markdown(content)
            await docs.add_version(conn, scope, item["id"], num, content, content_hash, chunks)
            answer = {"itemId": item["id"], "versionNum": num, "created": True}
        await docs.keep_answer(conn, scope, args.idempotencyKey, answer)
    return answer


async def _document(ctx: ToolContext, key: str, num: int | None) -> tuple[Any, Any]:
    async with ctx.uow(ctx.scope) as uow:
        item = await docs.canonical(uow.conn, ctx.scope, key)
        found = await docs.version(uow.conn, item["id"], num) if item is not None else None
    if found is None:
        what = f"canonicalKey: document {key!r}" + (f" version {num}" if num else "")
        raise not_found(what)
    return item, found


@handles("canonical.get")
async def canonical_get(ctx: ToolContext, args: GetArgs) -> dict[str, Any]:
    item, found = await _document(ctx, args.canonicalKey, args.versionNum)
    return {
        "itemId": item["id"],
        "canonicalKey": item["canonical_key"],
        "docClass": item["doc_class"],
        "title": item["title"],
        "tags": list(item["tags"]),
        "versionNum": found["version_num"],
        "contentMarkdown": found["content"],
        "createdAt": item["created_at"].isoformat(),
        "updatedAt": found["created_at"].isoformat(),
    }


@handles("canonical.outline")
async def canonical_outline(ctx: ToolContext, args: GetArgs) -> dict[str, Any]:
    _, found = await _document(ctx, args.canonicalKey, args.versionNum)
    sections = [
        {"anchor": s.anchor, "headingPath": list(s.heading_path), "level": s.level, "title": s.title}
        for s in outline(found["content"])
    ]
    return {"canonicalKey": args.canonicalKey, "versionNum": found["version_num"], "sections": sections}


@handles("canonical.get_section")
async def canonical_get_section(ctx: ToolContext, args: GetSectionArgs) -> dict[str, Any]:
    _, found = await _document(ctx, args.canonicalKey, None)
    content = found["content"]
    # anchors come from the headings' words; two headings whose paths slug alike share one, and the first in
    # document order answers for it
    section = next((s for s in outline(content) if s.anchor == args.sectionAnchor), None)
    if section is None:
        raise not_found(f"sectionAnchor: section {args.sectionAnchor!r} of {args.canonicalKey!r}")
    return {
        "canonicalKey": args.canonicalKey,
        "versionNum": found["version_num"],
        "anchor": section.anchor,
        "headingPath": list(section.heading_path),
        "title": section.title,
        "contentMarkdown": content[section.start : section.end],
    }

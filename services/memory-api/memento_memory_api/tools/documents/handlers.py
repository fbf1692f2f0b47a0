"""Seed 001's documents (the `documents` profile): commits and canonical upserts with versions and idempotency keys,
get by version, outline, sections by anchor, context packs and restore bundles (docs/dialects.md "documents"). A write
is one transaction: the item, its new version (only when the content changed) and its chunks with their full-text
vectors, so every read sees it at once; the embedder adds the chunks' vectors from the version's event."""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import secrets
import time
import uuid
from typing import Any

from opentelemetry import trace

from memento_memory_api.context import ToolContext
from memento_memory_api.recall import documents as ranking
from memento_memory_api.recall import fresh_chunks
from memento_memory_api.recall.lexical import identifier_in, terms
from memento_memory_api.repositories import documents as docs
from memento_memory_api.tools.common import vector_now
from memento_memory_api.tools.registry import handles
from memento_memory_api.uow import UnitOfWork
from memento_shared.errors import ErrorCode, MementoError, not_found, unavailable
from memento_shared.telemetry.metrics import SEARCH_LATENCY
from memento_shared.text.chunking import chunk_markdown, outline
from memento_shared.text.keywords import normalise_keywords
from memento_shared.text.redaction import redact_pii
from memento_shared.tools.documents import (
    CommitArgs,
    ContextPackArgs,
    GetArgs,
    GetSectionArgs,
    RestoreArgs,
    SearchArgs,
    UpsertArgs,
)
from memento_shared.tools.spec import Args

tracer = trace.get_tracer("memento.memory_api")
KIND = {"app_spec": "spec", "feature_spec": "spec", "implementation_plan": "plan"}


def _request_hash(args: Args) -> str:
    request = args.model_dump(exclude={"idempotencyKey"})
    return hashlib.sha256(json.dumps(request, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def _within_limit(ctx: ToolContext, content: str, field: str) -> str:
    size = len(content.encode())
    if size > ctx.settings.document_max_bytes:
        raise MementoError(
            ErrorCode.PAYLOAD_TOO_LARGE,
            f"{field}: {size} bytes, more than the {ctx.settings.document_max_bytes} allowed",
            field=field,
        )
    return redact_pii(content)


async def _once(ctx: ToolContext, tool: str, args: Args, write) -> dict[str, Any]:
    """Run `write(conn)` once per idempotency key, in one transaction with the key: the same key and request again
    answers the first answer and writes nothing; the same key with another request is CONFLICT."""
    request = _request_hash(args)
    async with ctx.uow(ctx.scope) as uow:
        conn, scope = uow.conn, ctx.scope
        if not await docs.claim_key(conn, scope, args.idempotencyKey, tool, request):
            earlier = await docs.answered(conn, scope, args.idempotencyKey)
            if earlier is None:
                raise unavailable("idempotencyKey: its first call did not finish; retry")
            if earlier["tool"] != tool or earlier["request_hash"] != request:
                raise MementoError(
                    ErrorCode.CONFLICT,
                    "idempotencyKey: already used for another request; use a new key for new content",
                    field="idempotencyKey",
                )
            return earlier["answer"]
        answer = await write(uow)
        await docs.keep_answer(conn, scope, args.idempotencyKey, answer)
    return answer


async def _write(
    uow: UnitOfWork, ctx: ToolContext, item: Any, content: str, commit_id: str | None = None
) -> dict[str, Any]:
    """A new version of `item` with its chunks, unless its latest version holds this content already; the corpus
    statistics follow, and the embedder is told to embed its chunks (the outbox, in the same transaction)."""
    conn = uow.conn
    latest = await docs.version(conn, item["id"])
    content_hash = hashlib.sha256(content.encode()).hexdigest()
    if latest is not None and latest["content_hash"] == content_hash:
        indexed = await docs.chunks_indexed(conn, ctx.scope, item["id"], latest["version_num"], ctx.profile.id)
        return {"itemId": item["id"], "versionNum": latest["version_num"], "created": False, "indexed": indexed}
    num = latest["version_num"] + 1 if latest else 1
    await docs.add_version(conn, ctx.scope, item["id"], num, content, content_hash, chunk_markdown(content), commit_id)
    await docs.make_latest(conn, ctx.scope, item["id"], latest["version_num"] if latest else None, num)
    uow.emit("document.versioned", {"item_id": item["id"], "version_num": num})
    return {"itemId": item["id"], "versionNum": num, "created": True, "indexed": False}  # the embedder's to do


async def _canonical_item(conn: Any, ctx: ToolContext, key: str, kind: str, title: str, doc_class, tags) -> Any:
    item = await docs.canonical(conn, ctx.scope, key, lock=True)
    if item is None:
        return await docs.insert_item(
            conn,
            ctx.scope,
            {
                "id": new_item_id(),
                "kind": kind,
                "title": title,
                "canonical_key": key,
                "doc_class": doc_class,
                "is_canonical": True,
                "tags": tags,
            },
        )
    await docs.update_item(conn, item["id"], title, doc_class or item["doc_class"], tags)
    return item


def new_item_id() -> str:
    return "doc-" + secrets.token_hex(8)


@handles("canonical.upsert")
async def canonical_upsert(ctx: ToolContext, args: UpsertArgs) -> dict[str, Any]:
    content = _within_limit(ctx, args.contentMarkdown, "contentMarkdown")
    tags = normalise_keywords(args.tags or [])

    async def write(uow: UnitOfWork) -> dict[str, Any]:
        item = await _canonical_item(
            uow.conn, ctx, args.canonicalKey, KIND[args.docClass], args.title, args.docClass, tags
        )
        return await _write(uow, ctx, item, content)

    return await _once(ctx, "canonical.upsert", args, write)


@handles("memory.commit")
async def memory_commit(ctx: ToolContext, args: CommitArgs) -> dict[str, Any]:
    contents = [_within_limit(ctx, e.content, f"entries.{i}.content") for i, e in enumerate(args.entries)]
    commit_id = str(uuid.uuid4())

    # canonical documents are locked in key order whatever order the entries give (then the rest): two commits
    # naming the same two documents in other orders each held one and waited for the other, a deadlock
    keys = [e.canonicalKey for e in args.entries]
    order = sorted(range(len(keys)), key=lambda n: (keys[n] is None, keys[n] or "", n))

    async def write(uow: UnitOfWork) -> dict[str, Any]:
        items: list[Any] = [None] * len(order)
        for n in order:
            entry, content = args.entries[n], contents[n]
            tags = normalise_keywords(entry.tags or [])
            if entry.canonicalKey:
                item = await _canonical_item(uow.conn, ctx, entry.canonicalKey, entry.kind, entry.title, None, tags)
            else:
                item = await docs.insert_item(
                    uow.conn,
                    ctx.scope,
                    {
                        "id": new_item_id(),
                        "kind": entry.kind,
                        "title": entry.title,
                        "canonical_key": None,
                        "doc_class": None,
                        "is_canonical": False,
                        "tags": tags,
                    },  # fmt: skip
                )
            items[n] = await _write(uow, ctx, item, content, commit_id)
        return {"commitId": commit_id, "items": items}

    return await _once(ctx, "memory.commit", args, write)


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


def _terms(text: str) -> set[str]:
    return set(terms(text))


def _relevance(goal: set[str], texts: list[str]) -> list[float]:
    """Each text's relevance to the goal's words: the summed rarity (an inverse document frequency over `texts`) of
    the goal words it holds, so a section naming the goal's rare words outranks one sharing only common ones."""
    held = [_terms(t) for t in texts]
    n = len(texts)
    idf = {w: math.log((n + 1) / (sum(w in h for h in held) + 0.5)) for w in goal}
    return [math.fsum(idf[w] for w in goal & h) for h in held]  # exact: a set's order changes with the process


def _own_sections(content: str) -> list[tuple[Any, str]]:
    """Each section with its own text (up to the next heading of any level: subsections are sections of their own)."""
    sections = sorted(outline(content), key=lambda s: s.start)
    out = []
    for i, section in enumerate(sections):
        end = sections[i + 1].start if i + 1 < len(sections) else section.end
        out.append((section, content[section.start : max(end, section.start)].rstrip()))
    return out


def _pack(content: str, goal: set[str], max_chars: int) -> tuple[list[tuple[Any, str]], int]:
    """The document's sections most relevant to the goal's words, in document order, within `max_chars` (sections
    joined by a blank line); with the characters they take."""
    sections = [(s, text) for s, text in _own_sections(content) if text.strip()]
    scores = _relevance(goal, [text for _, text in sections])
    ranked = sorted(range(len(sections)), key=lambda i: (-scores[i], sections[i][0].start))
    chosen, used = set(), 0
    for i in ranked:
        size = len(sections[i][1]) + (2 if chosen else 0)  # the blank line that joins it to the others
        if scores[i] <= 0 or used + size > max_chars:
            continue
        chosen.add(i)
        used += size
    return [section for i, section in enumerate(sections) if i in chosen], used


@handles("canonical.context_pack")
async def canonical_context_pack(ctx: ToolContext, args: ContextPackArgs) -> dict[str, Any]:
    _, found = await _document(ctx, args.canonicalKey, None)
    packed, used = _pack(found["content"], _terms(args.goal), args.maxChars)
    return {
        "canonicalKey": args.canonicalKey,
        "versionNum": found["version_num"],
        "sections": [
            {"anchor": s.anchor, "headingPath": list(s.heading_path), "title": s.title, "contentMarkdown": text}
            for s, text in packed
        ],
        "totalChars": used,
    }


TROUBLESHOOTING_DAYS, TROUBLESHOOTING_LIMIT = 30, 5  # seed 001 Part 8's restore defaults
PACK_CHARS = 8000  # a goal's canonical document in a restore bundle: its sections, as canonical.context_pack's default
CUT = "\n[…cut to fit maxChars]\n"


@handles("memory.restore")
async def memory_restore(ctx: ToolContext, args: RestoreArgs) -> dict[str, Any]:
    """A bundle that is the same, byte for byte, for the same store and arguments: pinned canonical documents (by
    key), the latest snapshot (the newest note), troubleshooting of the last 30 days (newest 5), then the items most
    relevant to the goal: canonical documents first, each as the sections that answer the goal (canonical.context_pack
    within PACK_CHARS and the room left, so a long document's answer is never cut away behind its opening), then the
    others whole. Each group in a fixed order, within maxItems and maxChars (a last whole block that does not fit is
    cut to the room left, and marked so)."""
    async with ctx.uow(ctx.scope) as uow:
        rows = await docs.latest_items(uow.conn, ctx.scope, args.kinds, 1000)
        now = await uow.conn.fetchval("SELECT now()")
    picked: list[tuple[Any, str]] = []

    def take(candidates: list[Any], reason: str) -> None:
        for row in candidates:
            if all(row["id"] != p["id"] for p, _ in picked):
                picked.append((row, reason))

    if args.includeCanonical:
        take(sorted((r for r in rows if r["pinned"] and r["is_canonical"]), key=lambda r: r["canonical_key"]), "pinned")
    notes = [r for r in rows if r["kind"] == "note"]
    take(notes[:1], "latest_snapshot")
    if args.includeRecentTroubleshooting:
        recent = [
            r for r in rows if r["kind"] == "troubleshooting" and (now - r["updated_at"]).days < TROUBLESHOOTING_DAYS
        ]
        take(recent[:TROUBLESHOOTING_LIMIT], "recent_troubleshooting")
    goal = _terms(args.goal) if args.goal else set()
    if goal:
        scores = _relevance(goal, [f"{r['title']}\n{r['content']}" for r in rows])
        relevant = sorted((i for i in range(len(rows)) if scores[i] > 0), key=lambda i: (-scores[i], rows[i]["id"]))
        take([rows[i] for i in relevant if rows[i]["is_canonical"] and args.includeCanonical], "canonical")
        take([rows[i] for i in relevant if not rows[i]["is_canonical"]], "goal")
    head = "# Restored context\n"
    bundle, items = head, []
    for row, reason in picked[: args.maxItems]:
        room = args.maxChars - len(bundle)
        if room <= 0:
            break
        frame = f"\n---\n\n## {row['title']}\n<!-- {row['id']} v{row['version_num']} {row['kind']} -->\n\n"
        item = {"itemId": row["id"], "kind": row["kind"], "title": row["title"], "versionNum": row["version_num"]}
        if reason == "canonical":
            packed, _ = _pack(row["content"], goal, min(PACK_CHARS, room - len(frame) - 1))
            if not packed:
                continue  # no section of it fits the room left
            block = frame + "\n\n".join(text for _, text in packed) + "\n"
            item["sectionAnchors"] = [section.anchor for section, _ in packed]
        else:
            block = f"{frame}{row['content']}\n"
            if len(block) > room:
                if room <= len(CUT) + 40:
                    break
                block = block[: room - len(CUT)] + CUT
        bundle += block
        items.append({**item, "reason": reason})
    if len(bundle) > args.maxChars:  # only the header itself can be over a tiny maxChars
        bundle = bundle[: args.maxChars]
    return {"bundle": bundle, "items": items, "totalChars": len(bundle)}


@handles("memory.search")
async def memory_search(ctx: ToolContext, args: SearchArgs) -> dict[str, Any]:
    """Three ranked lists over the latest versions' chunks, fused by weighted RRF (Part 2): BM25 with the
    workspace's corpus statistics, the nearest chunk vectors (once the embedder has run) and, for a query holding an
    identifier, trigram similarity; canonical documents get the seed's virtual-rank boost; then, when
    DOCUMENT_NEIGHBOUR_LIFT is on, the best chunks lift the chunks beside them (recall.documents)."""
    settings = ctx.settings
    words = terms(args.query)
    identifier = identifier_in(args.query)
    # the query's vector is computed while Postgres runs the lexical and trigram lists (they come first below)
    embedding = asyncio.create_task(vector_now(ctx, args.query, side="query"))
    kinds = list(args.kinds) if args.kinds else None
    started = time.perf_counter()
    query_vector = None
    coverage = 0.0
    own = None  # the newest documents' chunks still without vectors (recall.fresh_chunks)
    try:
        async with ctx.uow(ctx.scope) as uow:
            conn = uow.conn
            own = await fresh_chunks.start(ctx, conn, kinds, args.includeArchived)

            async def lexical() -> list:
                nonlocal coverage
                found, covered = await docs.bm25(
                    conn, ctx.scope, args.query, kinds, args.includeArchived, ranking.LEXICAL_TOP_K
                )
                coverage = max(covered, default=0.0)
                return found

            searches = {
                "lexical": lexical,
                "trigram": lambda: docs.trigram(
                    conn, ctx.scope, identifier, kinds, args.includeArchived, ranking.TRIGRAM_TOP_K
                ),
                "semantic": lambda: fresh_chunks.nearest(
                    ctx, conn, query_vector, own, kinds, args.includeArchived, max(ranking.SEMANTIC_TOP_K, args.limit)
                ),
            }  # fmt: skip
            lists: dict[str, list] = {}
            for name, search in searches.items():
                if name == "semantic":  # awaited only now: the lists above ran while the model computed it
                    query_vector = await embedding
                wanted = {"lexical": bool(words), "trigram": bool(identifier), "semantic": query_vector is not None}
                if not wanted[name]:
                    lists[name] = []
                    continue
                # a span and a latency per list (seed 001 Part 7), so a slow search shows which list was slow
                with tracer.start_as_current_span(f"memory.search {name}"):
                    began = time.perf_counter()
                    lists[name] = await search()
                    SEARCH_LATENCY.labels(name).observe(time.perf_counter() - began)
            keys = list(dict.fromkeys(k for found in lists.values() for k in found))
            rows = await docs.chunk_rows(conn, keys) if keys else {}
            weights = ranking.Weights.of(settings)
            fused = ranking.fuse(lists, {key: row["is_canonical"] for key, row in rows.items()}, weights, coverage)
            # the best chunks' neighbours no list found: one statement by primary key (item, version, index), under
            # the same RLS; a neighbour is of the same version, so of the kinds and status the lists were held to
            unread = [key for key in ranking.lifted(fused, weights) if key not in rows]
            if unread:
                rows.update(await docs.chunk_rows(conn, unread))
    finally:
        embedding.cancel()  # done by now, unless the store failed first (no connection, a list's error)
        if own is not None:
            own.cancel()
    scores = dict(ranking.final(fused, rows, weights))
    SEARCH_LATENCY.labels("hybrid").observe(time.perf_counter() - started)
    ranked = list(scores)[: args.limit]
    partial = query_vector is None or (own is not None and own.partial)  # some chunks found by their words only
    return {
        "results": [
            {
                "itemId": key[0],
                "title": rows[key]["title"],
                "kind": rows[key]["kind"],
                "isCanonical": rows[key]["is_canonical"],
                "headingPath": list(rows[key]["heading_path"]),
                "sectionAnchor": rows[key]["anchor"],
                "excerpt": rows[key]["text"][:300],
                "score": round(scores[key], 6),
            }
            for key in ranked
        ]
    } | ({"meaningSearch": "partial"} if partial else {})

"""Seed 003 memory tools (the `protocol` profile): store / remember, recall, delete, consolidate, extract, graph.

A seed-003 memory is a fragment (docs/dialects.md "One store"): its tags are the row's keywords, its linkages the row's
JSON array (and graph edges where they name memories), and a consolidated source is a superseded row, hidden from
every dialect's searches and traceable to the memory that replaced it. Answers read like the reference server's."""

from __future__ import annotations

from collections import Counter
from typing import Any

from memento_memory_api import distill
from memento_memory_api.context import ToolContext
from memento_memory_api.recall import engine, similar
from memento_memory_api.repositories import fragments as repo
from memento_memory_api.repositories import working_memory as wm
from memento_memory_api.store import new_row, store_fragment, supersede, unindex_after_commit
from memento_memory_api.tools.common import in_workspace, parse_when, whole_text
from memento_memory_api.tools.protocol.ranked import PARTIAL_NOTE, iso, ranked_memories, recalled
from memento_memory_api.tools.registry import Answer, handles
from memento_memory_api.uow import UnitOfWork
from memento_shared.domain.fragments import DEFAULT_IMPORTANCE
from memento_shared.errors import ErrorCode, MementoError, invalid, not_found
from memento_shared.text.keywords import extract_keywords, normalise_keywords
from memento_shared.text.redaction import redact_pii
from memento_shared.tools.protocol import ConsolidateArgs, ExtractArgs, GraphArgs, IdArgs, RecallArgs, StoreArgs

TOPIC = "memory"  # seed 003 has no topic; seed 000's recall can still filter these rows by it
EXTRACT_MAX_CHARS = 100_000  # the reference server's cap on a transcript
DISTILL_TAG = "source:distill"


def memory_row(ctx: ToolContext, content: str, mtype: str, tags: list[str], **extra: Any) -> dict[str, Any]:
    """A seed-003 memory as a fragment row: tags are its keywords (its own words when it has none)."""
    return new_row(
        ctx,
        content,
        topic=TOPIC,
        keywords=tags or extract_keywords(content),
        type=mtype,
        importance=DEFAULT_IMPORTANCE.get(mtype, 0.5),
        source="memento_protocol",
        # seed 003 memories fade in score, never by seed 000's TTL stages; they end only at their own `expires`
        ttl_tier="permanent",
        **extra,
    )


def tag_text(tags: list[str]) -> str:
    return f" [{', '.join(tags)}]" if tags else ""


async def _store(ctx: ToolContext, args: StoreArgs) -> Answer:
    content = whole_text(args.content, "content", ctx)
    expires_at = parse_when(args.expires, "expires") if args.expires else None
    tags = normalise_keywords(args.tags or [])
    linkages = [link.model_dump(exclude_none=True) for link in args.linkages or []]
    for index, link in enumerate(linkages):
        needs = "path" if link["type"] == "file" else "id"
        if needs not in link:
            raise invalid(f"linkages.{index}.{needs}", f"a {link['type']} linkage needs its {needs}")
    row = memory_row(ctx, content, args.type, tags, expires_at=expires_at, linkages=linkages)
    async with ctx.uow(ctx.scope) as uow:
        memory_id, created = await store_fragment(ctx, uow, row)
        indexed = not created and bool(await repo.indexed(uow.conn, ctx.scope, ctx.profile.id, [memory_id]))
        if not created:  # the same content again: that memory, current again (with this call's expiry) if it was not
            stored = await repo.get(uow.conn, memory_id)
            if not repo.is_current(stored):
                await repo.revive(uow.conn, memory_id, expires_at)
            stored = await repo.get(uow.conn, memory_id)
            mtype, tags, expires_at = stored["type"], list(stored["keywords"]), stored["expires_at"]
        else:
            mtype = args.type
            await _link_memories(uow, row, memory_id, linkages)
    result = {"id": memory_id, "type": mtype, "tags": tags, "expires_at": iso(expires_at), "indexed": indexed}
    return Answer(result, f"Stored memory {memory_id} ({mtype}){tag_text(tags)}")


async def _link_memories(uow: UnitOfWork, row: dict[str, Any], memory_id: str, linkages: list[dict]) -> None:
    """Linkages to memories are graph edges too (seed 000's `related`); a memory the caller cannot see is refused."""
    for index, link in enumerate(linkages):
        if link["type"] == "memory" and link["id"] != memory_id:
            visible, _ = await repo.add_link(uow.conn, row, memory_id, link["id"], "related")
            if link["id"] not in visible:
                raise not_found(f"linkages.{index}.id: memory {link['id']!r}")


@handles("memento_store")
async def memento_store(ctx: ToolContext, args: StoreArgs) -> Answer:
    return await _store(ctx, args)


@handles("memento_remember")
async def memento_remember(ctx: ToolContext, args: StoreArgs) -> Answer:
    return await _store(ctx, args)


def _block(memory: dict[str, Any]) -> str:
    expires = f" (expires: {memory['expires_at']})" if memory["expires_at"] else ""
    links = ""
    if memory["linkages"]:
        shown = [
            f"{link['type']}:{link.get('path') if link['type'] == 'file' else link.get('id')}"
            + (f" ({link['label']})" if link.get("label") else "")
            for link in memory["linkages"]
        ]
        links = "\nLinks: " + ", ".join(shown)
    return f"**{memory['id']}** ({memory['type']}){tag_text(memory['tags'])}{expires}\n{memory['content']}{links}"


@handles("memento_recall")
async def memento_recall(ctx: ToolContext, args: RecallArgs) -> Answer:
    reading = in_workspace(ctx, args.workspace)
    tags = normalise_keywords(args.tags) if args.tags else None
    ranked, partial = await ranked_memories(reading, args.query, args.limit, tags, args.type)
    results = [recalled(r, s) for r, s in ranked]
    where = f' in workspace "{args.workspace}"' if args.workspace else ""
    # partial meaning search: a field and a last line, which the reference server's clients (an LLM) read past
    extra, note = ({"meaning_search": "partial"}, f"\n\n{PARTIAL_NOTE}") if partial else ({}, "")
    if not results:
        return Answer({"count": 0, "results": []} | extra, f'No memories found matching "{args.query}"{where}.{note}')
    n = len(results)
    head = f"Found {n} memor{'y' if n == 1 else 'ies'}{where}:\n\n"
    text = head + "\n\n---\n\n".join(_block(m) for m in results) + note
    return Answer({"count": n, "results": results} | extra, text)


@handles("memento_memory_delete")
async def memento_memory_delete(ctx: ToolContext, args: IdArgs) -> Answer:
    async with ctx.uow(ctx.scope) as uow:
        row = await repo.get(uow.conn, args.id, for_update=True)
        if row is None:
            raise not_found(f"id: memory {args.id!r}")
        await repo.delete(uow.conn, [args.id])
        unindex_after_commit(uow, ctx, [row])
    return Answer({"deleted": True, "id": args.id}, f"Memory {args.id} deleted.")


@handles("memento_consolidate")
async def memento_consolidate(ctx: ToolContext, args: ConsolidateArgs) -> Answer:
    ids = list(dict.fromkeys(args.source_ids))
    if len(ids) < 2:
        raise invalid("source_ids", "needs at least 2 different memories")
    async with ctx.uow(ctx.scope) as uow:
        sources = await _current(uow, ids, lock=False)
    # the summary (an LLM's, when one is configured) is written before the sources are locked: the model's seconds
    # must not hold them, so they are checked again below
    content = whole_text(args.content, "content", ctx) if args.content else await _summary(ctx, sources)
    async with ctx.uow(ctx.scope) as uow:
        sources = await _current(uow, ids, lock=True)
        tags = sorted({t for row in sources for t in row["keywords"]} | set(normalise_keywords(args.tags or [])))
        mtype = args.type or Counter(row["type"] for row in sources).most_common(1)[0][0]
        linkages = [{"type": "memory", "id": row["id"], "label": "consolidated-from"} for row in sources]
        row = memory_row(ctx, content, mtype, tags, linkages=linkages)
        new_id, created = await store_fragment(ctx, uow, row)
        if not created or new_id in ids:
            raise MementoError(
                ErrorCode.CONFLICT, "content: this namespace already holds a memory with that content", field="content"
            )
        for source in sources:  # kept, hidden from recall, traceable to what replaced them (its linkages name them)
            await supersede(uow, source, new_id, name_original=False)
    result = {"id": new_id, "sources": ids, "content": content}
    return Answer(result, f"Consolidated {len(ids)} memories into {new_id}. Sources: [{', '.join(ids)}]")


async def _current(uow: UnitOfWork, ids: list[str], lock: bool) -> list[Any]:
    """The visible, not yet replaced memories `ids`, in that order; else MEMORY_NOT_FOUND or CONFLICT. Locked in id
    order, so two consolidations of the same memories named in other orders cannot deadlock."""
    locked = {i: await repo.get(uow.conn, i, for_update=lock) for i in sorted(ids)}
    sources = [locked[i] for i in ids]
    missing = [i for i, row in zip(ids, sources, strict=True) if row is None]
    if missing:
        raise not_found(f"source_ids: memories {missing}")
    replaced = [row["id"] for row in sources if row["superseded_by"] is not None]
    if replaced:
        raise MementoError(
            ErrorCode.CONFLICT, f"source_ids: {replaced} already consolidated or superseded", field="source_ids"
        )
    return sources


async def _summary(ctx: ToolContext, sources: list[Any]) -> str:
    tags = sorted({t for row in sources for t in row["keywords"]})
    written = await ctx.llm.complete(distill.CONSOLIDATE_SYSTEM, distill.consolidate_prompt(sources), 600)
    if written and written.strip():
        return whole_text(written.strip()[: ctx.settings.memory_max_chars], "content", ctx)
    return distill.summary(sources, tags)


@handles("memento_extract")
async def memento_extract(ctx: ToolContext, args: ExtractArgs) -> Answer:
    if len(args.transcript) > EXTRACT_MAX_CHARS:
        raise MementoError(
            ErrorCode.PAYLOAD_TOO_LARGE, f"transcript: at most {EXTRACT_MAX_CHARS} characters", field="transcript"
        )
    transcript = redact_pii(args.transcript)
    limit = args.max_memories or (20 if args.mode == "distill" else 3)
    candidates, source = await _extracted(ctx, transcript, args.mode)
    stored: list[dict[str, Any]] = []
    async with ctx.uow(ctx.scope) as uow:
        for content, mtype in candidates:
            if len(stored) >= limit:
                break
            content = redact_pii(content)[: ctx.settings.memory_max_chars]
            if await _known(ctx, uow.conn, content):
                continue
            tags = normalise_keywords([*extract_keywords(content, 3), DISTILL_TAG])
            row = memory_row(ctx, content, mtype, tags)
            memory_id, created = await store_fragment(ctx, uow, row)
            if created:
                stored.append({"id": memory_id, "content": content, "type": mtype, "tags": tags})
    result = {"count": len(stored), "mode": args.mode, "source": source, "stored": stored}
    if not stored:
        return Answer(result, f"No novel memories found (mode: {args.mode}, source: {source}).")
    n = len(stored)
    lines = "\n".join(f"- **{m['id']}** ({m['type']}): {m['content']}" for m in stored)
    head = f"Extracted {n} memor{'y' if n == 1 else 'ies'} (mode: {args.mode}, source: {source}):"
    return Answer(result, f"{head}\n\n{lines}")


async def _extracted(ctx: ToolContext, transcript: str, mode: str) -> tuple[list[tuple[str, str]], str]:
    """The transcript's candidate memories and who found them: the LLM when one is configured and answers with the
    JSON asked for, the offline extractor otherwise. Either way they are checked against the workspace afterwards."""
    if ctx.llm.model is not None:
        async with ctx.uow(ctx.scope) as uow:
            existing = [r["content"] for r in await repo.recent(uow.conn, ctx.scope, ctx.visible_agents(), 20)]
        system = distill.EXTRACT_SYSTEM + (" " + distill.SEEDS if mode == "seeds" else "")
        written = await ctx.llm.complete(system, distill.extract_prompt(transcript, existing), 2000)
        parsed = distill.parse_extracted(written) if written else None
        if parsed is not None:
            return parsed, ctx.llm.source
    return distill.candidates(transcript, mode), "offline"


async def _known(ctx: ToolContext, conn: Any, content: str) -> bool:
    """Whether the workspace already holds this fact: its own words in an earlier memory (or one stored moments ago
    in this very call), by the lexical relevance `similar` uses, well above its cut-off."""
    found = await engine.find(ctx, conn, engine.Query(text=content, limit=10))
    return any(similar.lexical_relevance(content, row["content"]) >= distill.KNOWN for row in found.rows.values())


@handles("memento_memory_graph")
async def memento_memory_graph(ctx: ToolContext, args: GraphArgs) -> dict[str, Any]:
    """Breadth-first over linkages from one memory, `depth` hops: memories (both directions of their edges), items
    and files they link to (not followed further)."""
    async with ctx.uow(ctx.scope) as uow:
        start = await repo.get(uow.conn, args.id)
        if start is None:
            raise not_found(f"id: memory {args.id!r}")
        nodes: dict[str, dict[str, Any]] = {start["id"]: _memory_node(start, 0)}
        edges: dict[tuple, dict[str, str]] = {}
        frontier, items = [start], set()
        for depth in range(1, args.depth + 1):
            reached = []
            for row in frontier:
                for link in row["linkages"]:
                    if link["type"] == "file":
                        target = f"file:{link['path']}"
                        nodes.setdefault(target, {"id": target, "kind": "file", "path": link["path"], "depth": depth})
                    elif link["type"] == "item":
                        target = f"item:{link['id']}"
                        items.add(link["id"])
                    else:
                        continue  # memory linkages are edges below
                    edges.setdefault(
                        (row["id"], target), {"from": row["id"], "to": target, "label": link.get("label") or "related"}
                    )
                for edge in await repo.edges(
                    uow.conn,
                    row["id"],
                    ["related", "superseded_by", "part_of", "caused_by", "resolved_by", "contradicts"],
                ):
                    other = edge["to_id"] if edge["from_id"] == row["id"] else edge["from_id"]
                    label = _label(row, edge, other)
                    edges.setdefault(
                        (edge["from_id"], edge["to_id"]), {"from": edge["from_id"], "to": edge["to_id"], "label": label}
                    )
                    if other not in nodes:
                        neighbour = await repo.get(uow.conn, other)
                        if neighbour is not None:
                            nodes[other] = _memory_node(neighbour, depth)
                            reached.append(neighbour)
            frontier = reached
        titles = await wm.item_titles(uow.conn, sorted(items)) if items else {}
    for item_id in items:
        key = f"item:{item_id}"
        nodes[key] = {"id": key, "kind": "item", "title": titles.get(item_id), "depth": None}
    visible_edges = [e for e in edges.values() if e["from"] in nodes and e["to"] in nodes]
    return {"nodes": list(nodes.values()), "edges": visible_edges}


def _label(row: Any, edge: Any, other: str) -> str:
    for link in row["linkages"]:
        if link["type"] == "memory" and link.get("id") == other and link.get("label"):
            return link["label"]
    return edge["relation_type"]


def _memory_node(row: Any, depth: int) -> dict[str, Any]:
    return {
        "id": row["id"],
        "kind": "memory",
        "content": row["content"],
        "type": row["type"],
        "tags": list(row["keywords"]),
        "depth": depth,
    }

"""Seed 003 working memory (the `protocol` profile): markdown sections, structured items, the skip list, identity
crystals, the per-message context and health. These live in the workspace's own tables; the memories they draw on
are the one store's rows (memories.py). Answers read like the reference server's."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from memento_memory_api import distill
from memento_memory_api.context import ToolContext
from memento_memory_api.recall import similar, skips
from memento_memory_api.recall.lexical import terms
from memento_memory_api.repositories import fragments as repo
from memento_memory_api.repositories import working_memory as wm
from memento_memory_api.tools.common import in_workspace, parse_when, short_id, vector_now, whole_text
from memento_memory_api.tools.protocol.ranked import PARTIAL_NOTE, ranked_memories, recalled
from memento_memory_api.tools.registry import Answer, handles
from memento_shared.errors import invalid, not_found
from memento_shared.text.keywords import normalise_keywords
from memento_shared.text.tokenizer import count_tokens
from memento_shared.tools.protocol import (
    SECTIONS,
    ContextArgs,
    IdArgs,
    IdentityUpdateArgs,
    ItemCreateArgs,
    ItemListArgs,
    ItemUpdateArgs,
    NoArgs,
    ReadArgs,
    SkipAddArgs,
    SkipCheckArgs,
    UpdateArgs,
)

NO_IDENTITY = (
    "No identity crystal found for this workspace.\n\n"
    "An identity crystal is a first-person prose reflection — who you are, what you care about, what persists across "
    "sessions. It gets injected into your startup context so future versions of you wake up with continuity.\n\n"
    "**To create one:**\n"
    "- Write it yourself using memento_identity_update (recommended — earned identity > generated identity)\n"
    "- Or auto-generate one from your stored memories with memento_identity_crystallize"
)
CONTEXT_MEMORIES = 10


# --- sections -------------------------------------------------------------------------------------------------
def _section_key(section: str) -> str:
    """A section by key or by heading (any case), as the reference resolves it; anything else is refused."""
    wanted = section.strip().lower()
    for key, heading in wm.SECTION_HEADINGS.items():
        if wanted in (key, heading.lower()):
            return key
    raise invalid("section", f"unknown section {section!r}; valid sections: {', '.join(SECTIONS)}")


def _blank_sections(key: str | None) -> list[dict[str, Any]]:
    """A workspace's sections before their first write, for a reader that may not create them."""
    now = datetime.now(UTC)
    keys = [key] if key else list(wm.SECTION_HEADINGS)
    return [{"section_key": k, "heading": wm.SECTION_HEADINGS[k], "content": "", "updated_at": now} for k in keys]


def _section(row: Any) -> dict[str, str]:
    return {
        "key": row["section_key"],
        "heading": row["heading"],
        "content": row["content"],
        "updated_at": row["updated_at"].isoformat(),
    }


def _section_text(row: Any) -> str:
    return f"## {row['heading']}\n\n{row['content'] or '(empty)'}"


@handles("memento_init")
async def memento_init(ctx: ToolContext, args: NoArgs) -> Answer:
    async with ctx.uow(ctx.scope) as uow:
        created = await wm.ensure_sections(uow.conn, ctx.scope) > 0
    result = {"created": created, "sections": list(SECTIONS)}
    if created:
        return Answer(result, "Memento workspace initialized.\n\nRead working memory at the start of every session.")
    return Answer(result, "Workspace already exists. Use memento_read to load it.")


def _writes(ctx: ToolContext) -> bool:
    """Whether this call may write on the side of a read (create a workspace's sections, purge expired skip entries,
    keep a skip entry's vector): a read-only credential reads, and what it would have written is left for later."""
    return ctx.principal.has_scope("write")


@handles("memento_read")
async def memento_read(ctx: ToolContext, args: ReadArgs) -> Answer:
    key = _section_key(args.section) if args.section else None
    async with ctx.uow(ctx.scope) as uow:
        if _writes(ctx):
            await wm.ensure_sections(uow.conn, ctx.scope)  # created on a workspace's first use
        rows = await wm.sections(uow.conn, ctx.scope, key) or _blank_sections(key)
    result = {"sections": [_section(r) for r in rows]}
    if key:
        return Answer(result, _section_text(rows[0]))
    return Answer(result, "# Working Memory\n\n---\n\n" + "\n\n---\n\n".join(_section_text(r) for r in rows))


@handles("memento_update")
async def memento_update(ctx: ToolContext, args: UpdateArgs) -> Answer:
    key = _section_key(args.section)
    content = whole_text(args.content, "content", ctx) if args.content else ""
    async with ctx.uow(ctx.scope) as uow:
        await wm.ensure_sections(uow.conn, ctx.scope)
        await wm.replace_section(uow.conn, ctx.scope, key, content)
        rows = await wm.sections(uow.conn, ctx.scope, key)
    heading = rows[0]["heading"]
    return Answer({"sections": [_section(r) for r in rows]}, f'Updated section "{heading}" in working memory.')


# --- items ----------------------------------------------------------------------------------------------------
def _item(row: Any) -> dict[str, Any]:
    return {
        "id": row["id"],
        "category": row["category"],
        "title": row["title"],
        "content": row["content"],
        "status": row["status"],
        "priority": row["priority"],
        "tags": list(row["tags"]),
        "next_action": row["next_action"],
        "created_at": row["created_at"].isoformat(),
        "updated_at": row["updated_at"].isoformat(),
    }


def _tags(tags: list[str]) -> str:
    return f" [{', '.join(tags)}]" if tags else ""


@handles("memento_item_create")
async def memento_item_create(ctx: ToolContext, args: ItemCreateArgs) -> Answer:
    item = {
        "id": short_id("item"),
        "category": args.category,
        "title": whole_text(args.title, "title", ctx),
        "content": whole_text(args.content, "content", ctx) if args.content else "",
        "status": args.status,
        "priority": args.priority,
        "tags": normalise_keywords(args.tags or []),
        "next_action": whole_text(args.next_action, "next_action", ctx) if args.next_action else None,
    }
    async with ctx.uow(ctx.scope) as uow:
        row = await wm.insert_item(uow.conn, ctx.scope, item)
    text = f'Created item {row["id"]} in {row["category"]}: "{row["title"]}"{_tags(list(row["tags"]))}'
    return Answer(_item(row), text)


@handles("memento_item_update")
async def memento_item_update(ctx: ToolContext, args: ItemUpdateArgs) -> Answer:
    changes = args.model_dump(exclude_unset=True, exclude={"id"})
    if not changes:
        raise invalid("id", "give at least one field to change")
    for field in ("title", "category", "status", "priority"):
        if field in changes and changes[field] is None:
            raise invalid(field, "cannot be null")
    for field in ("title", "content", "next_action"):
        if changes.get(field):
            changes[field] = whole_text(changes[field], field, ctx)
    if "content" in changes and changes["content"] is None:
        changes["content"] = ""
    if "tags" in changes:
        changes["tags"] = normalise_keywords(changes["tags"] or [])
    async with ctx.uow(ctx.scope) as uow:
        row = await wm.update_item(uow.conn, args.id, changes)
    if row is None:
        raise not_found(f"id: item {args.id!r}")
    return Answer(_item(row), f'Updated item {row["id"]}: "{row["title"]}" ({row["status"]})')


@handles("memento_item_delete")
async def memento_item_delete(ctx: ToolContext, args: IdArgs) -> Answer:
    async with ctx.uow(ctx.scope) as uow:
        deleted = await wm.delete_item(uow.conn, args.id)
    if not deleted:
        raise not_found(f"id: item {args.id!r}")
    return Answer({"deleted": True, "id": args.id}, f"Deleted item {args.id}.")


@handles("memento_item_list")
async def memento_item_list(ctx: ToolContext, args: ItemListArgs) -> Answer:
    reading = in_workspace(ctx, args.workspace)
    statuses = [args.status] if args.status else ["active", "paused"]
    async with reading.uow(reading.scope) as uow:
        rows = await wm.items(uow.conn, reading.scope, args.category, statuses, args.query)
    items = [_item(r) for r in rows]
    result = {"total": len(items), "items": items}
    if not items:
        return Answer(result, "No working memory items found.")

    def line(item: dict[str, Any]) -> str:
        status = f" ({item['status']})" if item["status"] != "active" else ""
        after = f"\n  Next: {item['next_action']}" if item["next_action"] else ""
        return f"**{item['id']}** {item['category']}: {item['title']}{status}{_tags(item['tags'])}{after}"

    n = len(items)
    return Answer(result, f"Found {n} item{'' if n == 1 else 's'}:\n\n" + "\n\n".join(line(i) for i in items))


# --- skip list ------------------------------------------------------------------------------------------------
def _skip(row: Any) -> dict[str, str]:
    return {"id": row["id"], "item": row["item"], "reason": row["reason"], "expires": row["expires_at"].isoformat()}


def touches(entry: str, text: str, both_ways: bool) -> bool:
    """Whether `text` is about the skipped `entry` by its words: every meaningful word of the entry is in the text
    (or, both ways, every meaningful word of the text is in the entry)."""
    entry_words, text_words = set(terms(entry)), set(terms(text))
    if not entry_words or not text_words:
        return False
    return entry_words <= text_words or (both_ways and text_words <= entry_words)


async def skips_touched(ctx: ToolContext, rows: list[Any], text: str, both_ways: bool) -> list[Any]:
    """The entries `text` touches: by words first, then by meaning (the cosine of the text's query vector and the
    entry's vector at or above the profile's calibrated cut-off), closest first. Without a calibrated cut-off, or with
    the embedder away, by words alone. An entry whose vector is missing or of another profile gets one now."""
    by_words = [r for r in rows if touches(r["item"], text, both_ways)]
    rest = [r for r in rows if r not in by_words]
    cutoff = similar.skip_cutoff(ctx.profile.id, ctx.settings.skip_min_score)
    if not rest or cutoff is None:
        return by_words
    # its question, as the memories' search embeds it (vector_now): a context's two reads share one model call
    query = await vector_now(ctx, text, side="query")
    if query is None:
        return by_words
    return by_words + await skips.closest(ctx, rest, query, cutoff, keep=_writes(ctx))


@handles("memento_skip_add")
async def memento_skip_add(ctx: ToolContext, args: SkipAddArgs) -> Answer:
    expires_at = parse_when(args.expires, "expires")
    if expires_at <= datetime.now(UTC):
        raise invalid("expires", "must be in the future")
    item = whole_text(args.item, "item", ctx)
    reason = whole_text(args.reason, "reason", ctx)
    vector = await vector_now(ctx, item)  # for the meaning match; made later if the embedder is away now
    async with ctx.uow(ctx.scope) as uow:
        await wm.purge_expired_skips(uow.conn, ctx.scope)
        row = await wm.add_skip(uow.conn, ctx.scope, short_id("skip"), item, reason, expires_at, ctx.profile.id, vector)
    return Answer(_skip(row), f'Added to skip list: "{row["item"]}" (expires {args.expires})')


@handles("memento_skip_check")
async def memento_skip_check(ctx: ToolContext, args: SkipCheckArgs) -> Answer:
    async with ctx.uow(ctx.scope) as uow:
        if _writes(ctx):  # expired entries are purged before every answer; a reader skips them all the same
            await wm.purge_expired_skips(uow.conn, ctx.scope)
        rows = await wm.skips(uow.conn, ctx.scope)
    touched = await skips_touched(ctx, rows, args.query, both_ways=True)
    if not touched:
        return Answer({"match": None}, f'Not on skip list. Proceed with "{args.query}".')
    entry = _skip(touched[0])
    return Answer({"match": entry}, f'SKIP: "{entry["item"]}"\nReason: {entry["reason"]}\nExpires: {entry["expires"]}')


@handles("memento_skip_list")
async def memento_skip_list(ctx: ToolContext, args: NoArgs) -> Answer:
    async with ctx.uow(ctx.scope) as uow:
        if _writes(ctx):
            await wm.purge_expired_skips(uow.conn, ctx.scope)
        rows = await wm.skips(uow.conn, ctx.scope)
    entries = [_skip(r) for r in rows]
    result = {"total": len(entries), "entries": entries}
    if not entries:
        return Answer(result, "Skip list is empty.")
    n = len(entries)
    blocks = [f'**{e["id"]}** "{e["item"]}"\n  Reason: {e["reason"]}\n  Expires: {e["expires"]}' for e in entries]
    return Answer(result, f"{n} skip list entr{'y' if n == 1 else 'ies'}:\n\n" + "\n\n".join(blocks))


@handles("memento_skip_remove")
async def memento_skip_remove(ctx: ToolContext, args: IdArgs) -> Answer:
    async with ctx.uow(ctx.scope) as uow:
        await wm.purge_expired_skips(uow.conn, ctx.scope)
        removed = await wm.remove_skip(uow.conn, args.id)
    if not removed:
        raise not_found(f"id: skip entry {args.id!r}")
    return Answer({"deleted": True, "id": args.id}, f"Skip entry {args.id} removed.")


# --- identity -------------------------------------------------------------------------------------------------
def _identity(row: Any) -> dict[str, Any]:
    if row is None:
        return {"id": None, "crystal": None, "created_at": None}
    return {"id": row["id"], "crystal": row["crystal"], "created_at": row["created_at"].isoformat()}


@handles("memento_identity")
async def memento_identity(ctx: ToolContext, args: NoArgs) -> Answer:
    async with ctx.uow(ctx.scope) as uow:
        row = await wm.latest_identity(uow.conn, ctx.scope)
    return Answer(_identity(row), row["crystal"] if row else NO_IDENTITY)


@handles("memento_identity_update")
async def memento_identity_update(ctx: ToolContext, args: IdentityUpdateArgs) -> Answer:
    crystal = whole_text(args.crystal.strip(), "crystal", ctx)
    async with ctx.uow(ctx.scope) as uow:
        row = await wm.add_identity(uow.conn, ctx.scope, short_id("idn"), crystal, 0)
    return Answer(_identity(row), f"Identity crystal {row['id']} stored ({len(crystal)} chars).")


@handles("memento_identity_crystallize")
async def memento_identity_crystallize(ctx: ToolContext, args: NoArgs) -> Answer:
    agents = ctx.visible_agents()
    async with ctx.uow(ctx.scope) as uow:
        await wm.ensure_sections(uow.conn, ctx.scope)
        sections = await wm.sections(uow.conn, ctx.scope)
        memories = await repo.most_relevant(uow.conn, ctx.scope, agents, 30)
        merged = await repo.consolidations(uow.conn, ctx.scope, agents, 10)
    material = distill.crystal(sections, memories, merged, datetime.now(UTC).isoformat())
    written = await ctx.llm.complete(distill.CRYSTAL_SYSTEM, material, 1000)
    crystal = written.strip()[: ctx.settings.memory_max_chars] if written and written.strip() else material
    sources = sum(1 for s in sections if s["content"].strip()) + len(memories) + len(merged)
    async with ctx.uow(ctx.scope) as uow:
        row = await wm.add_identity(uow.conn, ctx.scope, short_id("idn"), crystal, sources)
    return Answer(_identity(row), f"Identity crystal {row['id']} auto-generated ({sources} sources).")


# --- context and health ---------------------------------------------------------------------------------------
@handles("memento_context")
async def memento_context(ctx: ToolContext, args: ContextArgs) -> Answer:
    wanted = set(args.include)
    result: dict[str, Any] = {}
    # the memories' search (the message's embedding its longest part) runs beside the working-memory reads
    memories = None
    if "memories" in wanted and args.message.strip():
        memories = asyncio.create_task(ranked_memories(ctx, args.message, CONTEXT_MEMORIES))
    try:
        await _working_memory_part(ctx, args, wanted, result)
    except BaseException:
        if memories is not None:
            memories.cancel()
        raise
    if "memories" in wanted:
        found, partial = await memories if memories is not None else ([], False)
        result["memories"] = {"matches": [recalled(row, score) for row, score in found]}
        if partial:
            result["memories"]["meaning_search"] = "partial"
    _within_budget(result, args.token_budget)
    return Answer(result, _context_text(result))


async def _working_memory_part(ctx: ToolContext, args: ContextArgs, wanted: set[str], result: dict) -> None:
    """Items, skip warnings and the identity crystal, into `result`."""
    entries: list[Any] = []
    async with ctx.uow(ctx.scope) as uow:
        if "working_memory" in wanted:
            rows = await wm.items(uow.conn, ctx.scope, None, ["active", "paused"], None)
            items = [_item(r) for r in rows]
            result["working_memory"] = {"items": items, "total_active": sum(i["status"] == "active" for i in items)}
        if "skip_list" in wanted:
            if _writes(ctx):
                await wm.purge_expired_skips(uow.conn, ctx.scope)
            entries = await wm.skips(uow.conn, ctx.scope) if args.message.strip() else []
        if "identity" in wanted:
            identity = await wm.latest_identity(uow.conn, ctx.scope)
            result["identity"] = identity["crystal"] if identity else None
    if "skip_list" in wanted:
        result["warnings"] = [_skip(r) for r in await skips_touched(ctx, entries, args.message, both_ways=False)]


def _within_budget(result: dict[str, Any], budget: int) -> None:
    """Keep the context within `budget` tokens: skip warnings always (they say what not to do), then the identity
    crystal, then items by priority and memories by score while each fits; what does not fit is counted in
    `omitted`, and a crystal larger than the budget is left out."""
    used = sum(count_tokens(f"{w['item']} {w['reason']}") for w in result.get("warnings") or [])
    if result.get("identity"):
        cost = count_tokens(result["identity"])
        if used + cost <= budget:
            used += cost
        else:
            result["identity"] = None
    omitted = 0
    for section, key, text in (
        ("working_memory", "items", lambda i: f"{i['title']} {i['content']} {i['next_action'] or ''}"),
        ("memories", "matches", lambda m: m["content"]),
    ):
        if section not in result:
            continue
        kept = []
        for entry in result[section][key]:
            cost = count_tokens(text(entry))
            if used + cost <= budget:
                kept.append(entry)
                used += cost
            else:
                omitted += 1
        result[section][key] = kept
    result["tokens"], result["omitted"] = used, omitted


def _context_text(result: dict[str, Any]) -> str:
    parts = []
    for warning in result.get("warnings") or []:
        parts.append(f'⚠ SKIP: "{warning["item"]}" — {warning["reason"]} (expires {warning["expires"]})')
    if "working_memory" in result:
        items = result["working_memory"]["items"]
        lines = [
            f"- **{i['id']}** {i['category']}: {i['title']}" + (f" ({i['status']})" if i["status"] != "active" else "")
            for i in items
        ]
        parts.append("## Working Memory\n\n" + ("\n".join(lines) if lines else "(no active items)"))
    if "memories" in result:
        matches = result["memories"]["matches"]
        lines = [f"- **{m['id']}** ({m['type']}, score {m['score']}): {m['content']}" for m in matches]
        parts.append("## Memories\n\n" + ("\n".join(lines) if lines else "(no matching memories)"))
        if result["memories"].get("meaning_search"):
            parts[-1] += f"\n\n{PARTIAL_NOTE}"
    if result.get("identity"):
        parts.append("## Identity\n\n" + result["identity"])
    return "\n\n".join(parts)


@handles("memento_health")
async def memento_health(ctx: ToolContext, args: NoArgs) -> Answer:
    async with ctx.uow(ctx.scope) as uow:
        counts = await wm.health(uow.conn, ctx.scope, ctx.visible_agents())
    last_decay = counts["last_decay"]
    memories = counts["memories"]
    active = memories["total"] - memories["expired"] - memories["consolidated"]
    items = counts["items"]
    skips = counts["skips"]
    updated = counts["sections_updated_at"]
    result = {
        "workspace": ctx.scope.workspace,
        "sections": counts["sections"],
        "sections_updated_at": updated.isoformat() if updated else None,
        "memories": {**{k: memories[k] for k in ("total", "expired", "consolidated", "accesses")}, "active": active},
        "items": items,
        "skip_list": {
            "total": skips["total"],
            "active": skips["total"] - skips["expired"],
            "expired": skips["expired"],
        },
        "identity_snapshots": counts["identities"],
        "last_decay_at": last_decay.isoformat() if last_decay else None,
    }
    lines = [
        "**Memento Health Report**",
        f"Workspace: {ctx.scope.workspace}",
        "",
        "**Working Memory**",
        f"  Sections: {counts['sections']}" if counts["sections"] else "  Status: EMPTY -- no sections found",
        f"  Last updated: {result['sections_updated_at'] or 'never'}",
        f"  Items: {sum(items.values())} ({', '.join(f'{n} {s}' for s, n in sorted(items.items())) or 'none'})",
        "",
        "**Stored Memories**",
        f"  Total: {memories['total']} ({active} active, {memories['expired']} expired,"
        f" {memories['consolidated']} consolidated)",
        f"  Last decay: {result['last_decay_at'] or 'never'}",
        "",
        "**Skip List**",
        f"  Total: {skips['total']} ({skips['total'] - skips['expired']} active, {skips['expired']} expired)",
        "",
        "**Access Log**",
        f"  Total accesses: {memories['accesses']}",
        "",
        "**Identity**",
        f"  Snapshots: {counts['identities']}",
    ]
    return Answer(result, "\n".join(lines))

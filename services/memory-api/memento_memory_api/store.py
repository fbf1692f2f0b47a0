"""The one store's write path, which every dialect's handlers use (docs/dialects.md "One store"): building a row,
storing it (its event, and its L1 keywords after the commit), superseding one row by another, and the L1 keyword
writes that follow a change or a deletion. Dialect-neutral: each dialect's handlers (tools/<dialect>/) decide what a
row holds and how they answer."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

from memento_memory_api.context import ToolContext
from memento_memory_api.recall import l1
from memento_memory_api.repositories import fragments as repo
from memento_memory_api.text.annotate import annotate
from memento_memory_api.uow import UnitOfWork
from memento_shared import l1 as l1_layout
from memento_shared.domain.fragments import content_hash, infer_ttl, new_fragment_id
from memento_shared.errors import not_found
from memento_shared.text.tokenizer import count_tokens

SUPERSEDED_IMPORTANCE_FACTOR = 0.5
ANNOTATION = ("thread", "seq", "event_from", "event_to", "event_said", "expansion", "entities")


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
        "entities": noted.entities,
    }


async def store_fragment(
    ctx: ToolContext, uow: UnitOfWork, fragment: dict[str, Any], linked_to: list[str] | None = None
) -> tuple[str, bool]:
    """Insert a built fragment (or find its duplicate), link it, emit its event, index it in L1 after commit."""
    new_id = await repo.insert(uow.conn, fragment)
    if new_id is None:
        existing = await repo.id_by_hash(
            uow.conn, fragment["tenant_id"], fragment["workspace"], fragment["agent_id"], fragment["content_hash"]
        )
        # None only if that duplicate was deleted meanwhile: answered as it always was, with no id
        return cast(str, existing), False
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


async def supersede(uow: UnitOfWork, old: Any, new_id: str, *, name_original: bool = True) -> None:
    """`old` (a row the caller holds locked) is superseded by the fragment `new_id`: hidden from every dialect's
    searches, traceable by its `superseded_by` column and an edge old -superseded_by-> new (seed 000's view of it).
    With `name_original` the new one's `supersedes` names it too (repositories.fragments.mark_superseded)."""
    await repo.mark_superseded(uow.conn, old["id"], new_id, name_original=name_original)
    await repo.add_link(uow.conn, old, old["id"], new_id, "superseded_by")


async def supersede_with_new(ctx: ToolContext, uow: UnitOfWork, row: Any, changes: dict[str, Any]) -> tuple[str, int]:
    """`row` with `changes` (new content among them) stored as a new fragment that supersedes it: the original stays,
    its state archived and its importance halved, linked original -superseded_by-> new; the new row's event is
    emitted and its keywords indexed in L1 after commit. Returns the new id and the archived version's number."""
    kept = ("content", "topic", "keywords", "type", "importance", "is_anchor", "keywords_given", "case_id", "thread",
            "seq", "event_from", "event_to", "event_said", "expansion", "entities")  # fmt: skip
    merged = {k: row[k] for k in kept} | changes
    fragment = {
        **merged,
        "id": new_fragment_id(),
        "tenant_id": row["tenant_id"],
        "workspace": row["workspace"],
        "agent_id": row["agent_id"],
        "keywords": list(merged["keywords"]),
        "content_hash": changes["content_hash"],
        "source": row["source"],
        "ttl_tier": changes.get("ttl_tier", infer_ttl(merged["type"], merged["importance"])),
        "estimated_tokens": changes.get("estimated_tokens", row["estimated_tokens"]),
    }
    new_id = cast(str, await repo.insert(uow.conn, fragment))  # the caller found no row with this content
    version = await repo.archive_version(uow.conn, row, ctx.scope.agent_id)
    await repo.update(
        uow.conn,
        row["id"],
        {
            "superseded_by": new_id,
            "importance": round(float(row["importance"]) * SUPERSEDED_IMPORTANCE_FACTOR, 4),
        },
    )
    await repo.add_link(uow.conn, row, row["id"], new_id, "superseded_by")
    uow.emit(
        "fragment.stored",
        {"fragment_id": new_id, "content_hash": fragment["content_hash"], "agent_id": row["agent_id"]},
    )
    reindex_after_commit(uow, ctx, row, new_id, fragment["keywords"], fragment["importance"])
    return new_id, version


def reindex_after_commit(
    uow: UnitOfWork, ctx: ToolContext, row: Any, new_id: str, keywords: list[str], importance: float
) -> None:
    """After the commit, `new_id` (`row` itself, or the fragment that supersedes it) goes into L1 under `keywords`,
    scored by `importance`; `row`'s old keywords leave it when it is the same fragment."""
    created_at = row["created_at"] if new_id == row["id"] else datetime.now(UTC)

    async def reindex() -> None:
        await l1.index(
            ctx.l1_for_write(),
            row["tenant_id"],
            row["workspace"],
            row["agent_id"],
            new_id,
            keywords,
            l1_layout.score(importance, created_at, ctx.l1_weights()),
            replacing=list(row["keywords"]) if new_id == row["id"] else [],
            on_failure=ctx.l1_write_failed,
        )

    uow.after_commit.append(reindex)


def unindex_after_commit(uow: UnitOfWork, ctx: ToolContext, rows: list[Any]) -> None:
    """`rows`, deleted in `uow`'s transaction, leave L1 once it commits."""

    async def after() -> None:
        await unindex(ctx, rows)

    uow.after_commit.append(after)


async def unindex(ctx: ToolContext, rows: list[Any]) -> None:
    """Deleted rows (id, agent_id, keywords) leave their L1 keyword sets (after their transaction committed)."""
    for row in rows:
        await l1.unindex(
            ctx.l1_for_write(),
            ctx.scope.tenant_id,
            ctx.scope.workspace,
            row["agent_id"],
            row["id"],
            list(row["keywords"]),
            on_failure=ctx.l1_write_failed,
        )

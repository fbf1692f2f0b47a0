"""Seed 004's maintenance and introspection (the `lifecycle` profile): memory_run_maintenance (retention, compaction,
summary refresh; each step in short transactions under the session lock, so a run cut short can simply run again)
and memory_list_dir_with_abstract over the session's canonical layout /memory/<session_id>/…"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from memento_memory_api import turns
from memento_memory_api.context import ToolContext
from memento_memory_api.repositories import sessions
from memento_memory_api.tools.fragments_edit import unindex_after_commit
from memento_memory_api.tools.lifecycle import TIERS, busy, scoped
from memento_memory_api.tools.registry import handles
from memento_memory_api.uow import UnitOfWork
from memento_shared.telemetry.metrics import MEMORY_COMPACTION, MEMORY_MAINTENANCE
from memento_shared.text.keywords import extract_keywords
from memento_shared.tools.lifecycle import ListDirArgs, MaintenanceArgs

SUMMARY_EVENTS = 50


async def _locked(ctx: ToolContext, uow: UnitOfWork, session_id: str) -> None:
    try:
        await sessions.lock_session(uow.conn, ctx.scope, session_id, ctx.settings.memory_lock_timeout_s)
    except asyncpg.LockNotAvailableError:
        raise busy("session_id: the session is locked by a commit or another maintenance run; retry") from None


@handles("memory_run_maintenance")
async def memory_run_maintenance(ctx: ToolContext, args: MaintenanceArgs) -> dict[str, Any]:
    ctx = scoped(ctx, args.project)
    settings, session = ctx.settings, args.session_id
    counts = {"expired_facts": 0, "compacted_events": 0, "archives": 0, "summaries_refreshed": 0}
    status = "error"
    try:
        async with ctx.uow(ctx.scope) as uow:  # retention, in UTC: the project's daily and weekly facts past their end
            await _locked(ctx, uow, session)
            gone = await uow.conn.fetch(
                "DELETE FROM agent_memory.fragments WHERE tenant_id = $1 AND workspace = $2 AND source = ANY($3)"
                " AND expires_at <= now() RETURNING id, agent_id, keywords",
                ctx.scope.tenant_id,
                ctx.scope.workspace,
                list(TIERS.values()),
            )
            unindex_after_commit(uow, ctx, gone)
            counts["expired_facts"] = len(gone)
        async with ctx.uow(ctx.scope) as uow:
            await _locked(ctx, uow, session)
            meta = await sessions.meta(uow.conn, ctx.scope, session)
            refreshed = meta["summary_refreshed_at"] if meta else None
            due = refreshed is None or refreshed < datetime.now(UTC) - timedelta(
                minutes=settings.memory_summary_refresh_interval_minutes
            )
            events = await sessions.recent_events(uow.conn, ctx.scope, session, SUMMARY_EVENTS) if due else []
            if events:
                abstract, overview = _summary(events, meta)
                await sessions.set_summary(uow.conn, ctx.scope, session, abstract, overview)
                counts["summaries_refreshed"] = 1
            counts["turn_guards_pruned"] = await sessions.prune_guards(
                uow.conn, ctx.scope, session, settings.memory_max_processed_turns
            )
        before = datetime.now(UTC) - timedelta(hours=settings.memory_compaction_min_age_hours)
        while True:  # one UTC day of old events per transaction
            async with ctx.uow(ctx.scope) as uow:
                await _locked(ctx, uow, session)
                moved = await sessions.compact_day(uow.conn, ctx.scope, session, before)
            if not moved:
                break
            counts["compacted_events"] += moved
            counts["archives"] += 1
            MEMORY_COMPACTION.inc(moved)
        async with ctx.uow(ctx.scope) as uow:
            await sessions.maintained(uow.conn, ctx.scope, session)
        status = "ok"
        return {"ok": True, **counts}
    finally:
        MEMORY_MAINTENANCE.labels(status).inc()


def _summary(events: list[Any], meta: Any) -> tuple[str, str]:
    """(Refreshed before compaction, from the newest events, which compaction then may archive.) An extractive
    `.abstract` (one line: turns, last activity, the words the session is about) and `.overview`
    (the latest requests and answers, a line each)."""
    said = [e for e in events if e["role"] in ("user", "assistant")]
    words = Counter(w for e in said for w in extract_keywords(turns.text_of(e["item"]), 8))
    about = ", ".join(w for w, _ in words.most_common(6)) or "nothing yet"
    turns_count = meta["turns"] if meta else 0
    last = events[-1]["created_at"].isoformat()
    abstract = f"{turns_count} turns, last at {last}; about: {about}"
    lines = [f"- {e['role']}: {turns.text_of(e['item']).strip().splitlines()[0][:200]}" for e in said[-10:]]
    return abstract, "\n".join([abstract, "", *lines])


@handles("memory_list_dir_with_abstract")
async def memory_list_dir_with_abstract(ctx: ToolContext, args: ListDirArgs) -> dict[str, Any]:
    ctx = scoped(ctx, args.project)
    session = args.session_id
    async with ctx.uow(ctx.scope) as uow:
        meta = await sessions.meta(uow.conn, ctx.scope, session)
        shape = await sessions.layout(uow.conn, ctx.scope, session)
        tiers = await uow.conn.fetch(
            "SELECT source, count(*) AS n, max(updated_at) AS at FROM agent_memory.fragments WHERE tenant_id = $1"
            " AND workspace = $2 AND source = ANY($3) AND (expires_at IS NULL OR expires_at > now()) GROUP BY source",
            ctx.scope.tenant_id,
            ctx.scope.workspace,
            list(TIERS.values()),
        )
    root = f"/memory/{session}"
    by_tier = {r["source"]: r for r in tiers}
    at = meta["updated_at"] if meta else None
    entries = [
        (
            root,
            meta["abstract"] if meta and meta["abstract"] else f"session {session}",
            at,
            bool(meta and meta["overview"]),
        ),
        (f"{root}/events", f"{shape['events']} events not yet archived", shape["events_at"], False),
    ]
    for archive in shape["archives"]:
        entries.append(
            (
                f"{root}/events/archive/{archive['day']}",
                f"{archive['events']} events of {archive['day']} (UTC)",
                datetime.fromisoformat(archive["updated_at"]),
                False,
            )
        )
    entries.append((f"{root}/context", "the recent items memory_before_turn recalls", shape["events_at"], False))
    entries.append((f"{root}/memory_tiers", "the project's daily (l1) and weekly (l2) facts", at, False))
    for tier, source in TIERS.items():
        found = by_tier.get(source)
        entries.append(
            (
                f"{root}/memory_tiers/{tier}",
                f"{found['n'] if found else 0} {'daily' if tier == 'l1' else 'weekly'} facts",
                found["at"] if found else None,
                False,
            )
        )
    turns_count = meta["turns"] if meta else 0
    entries.append(
        (
            f"{root}/meta",
            f"{turns_count} turns; user {meta['user_id'] if meta else None}",
            at,
            bool(meta and meta["overview"]),
        )
    )
    base = "/" + args.path.strip("/") if args.path.strip("/") else root
    if not (base == root or base.startswith(root + "/") or root.startswith(base)):
        return {"summaries": []}
    depth0 = base.count("/")
    chosen = [
        {"path": path, "abstract": abstract, "updated_at": when.isoformat() if when else None, "has_overview": overview}
        for path, abstract, when, overview in entries
        if (path == base or path.startswith(base.rstrip("/") + "/")) and path.count("/") - depth0 <= args.depth
    ]
    return {"summaries": chosen[: args.limit]}

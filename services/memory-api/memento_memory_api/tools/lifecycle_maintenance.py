"""Seed 004's maintenance and introspection (the `lifecycle` profile): memory_run_maintenance (memento_shared.sessions,
which the consolidator also runs for idle sessions) and memory_list_dir_with_abstract over the session's canonical
layout /memory/<session_id>/…"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import asyncpg

from memento_memory_api.context import ToolContext
from memento_memory_api.repositories import sessions
from memento_memory_api.tools.fragments_edit import unindex
from memento_memory_api.tools.lifecycle import TIERS, busy, scoped
from memento_memory_api.tools.registry import handles
from memento_shared import sessions as shared_sessions
from memento_shared.telemetry.metrics import MEMORY_COMPACTION, MEMORY_MAINTENANCE
from memento_shared.tools.lifecycle import ListDirArgs, MaintenanceArgs


@handles("memory_run_maintenance")
async def memory_run_maintenance(ctx: ToolContext, args: MaintenanceArgs) -> dict[str, Any]:
    ctx = scoped(ctx, args.project)
    status = "error"

    @contextlib.asynccontextmanager
    async def transaction() -> AsyncIterator[Any]:
        async with ctx.uow(ctx.scope) as uow:
            yield uow.conn

    try:
        try:
            counts, expired = await shared_sessions.maintain(transaction, ctx.scope, args.session_id, ctx.settings)
        except asyncpg.LockNotAvailableError:
            raise busy("session_id: the session is locked by a commit or another maintenance run; retry") from None
        await unindex(ctx, expired)
        MEMORY_COMPACTION.inc(counts["compacted_events"])
        status = "ok"
        return {"ok": True, **counts}
    finally:
        MEMORY_MAINTENANCE.labels(status).inc()


@handles("memory_list_dir_with_abstract")
async def memory_list_dir_with_abstract(ctx: ToolContext, args: ListDirArgs) -> dict[str, Any]:
    ctx = scoped(ctx, args.project)
    session = args.session_id
    async with ctx.uow(ctx.scope) as uow:
        meta = await shared_sessions.meta(uow.conn, ctx.scope, session)
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

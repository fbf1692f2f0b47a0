"""Seed 004's maintenance and introspection (the `lifecycle` profile): memory_run_maintenance (memento_shared.sessions,
which the consolidator also runs for idle sessions) and memory_list_dir_with_abstract over the session's canonical
layout /memory/<session_id>/…"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import asyncpg

from memento_memory_api.context import ToolContext
from memento_memory_api.store import unindex
from memento_memory_api.tools.lifecycle import repository as sessions
from memento_memory_api.tools.lifecycle.common import TIERS, busy, scoped
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
    if meta is None and not shape["events"] and not shape["archives"]:
        return {"summaries": []}  # no turn was ever committed: the session has no directory yet
    root = f"/memory/{session}"
    by_tier = {r["source"]: r for r in tiers}
    # every directory answers when it was last written; one nothing was written into yet (an empty tier, events all
    # archived) answers the session's own time, as a directory made with the session's layout
    archived = [datetime.fromisoformat(a["updated_at"]) for a in shape["archives"]]
    root_at = max(t for t in (meta and meta["updated_at"], shape["events_at"], *archived) if t)
    events_at = shape["events_at"] or root_at
    tier_at = {tier: by_tier[source]["at"] if source in by_tier else root_at for tier, source in TIERS.items()}
    entries = [
        (
            root,
            meta["abstract"] if meta and meta["abstract"] else f"session {session}",
            root_at,
            bool(meta and meta["overview"]),
        ),
        (f"{root}/events", f"{shape['events']} events not yet archived", events_at, False),
    ]
    for archive, archive_at in zip(shape["archives"], archived, strict=True):
        entries.append(
            (
                f"{root}/events/archive/{archive['day']}",
                f"{archive['events']} events of {archive['day']} (UTC)",
                archive_at,
                False,
            )
        )
    entries.append((f"{root}/context", "the recent items memory_before_turn recalls", events_at, False))
    entries.append(
        (f"{root}/memory_tiers", "the project's daily (l1) and weekly (l2) facts", max(tier_at.values()), False)
    )
    for tier, source in TIERS.items():
        found = by_tier.get(source)
        entries.append(
            (
                f"{root}/memory_tiers/{tier}",
                f"{found['n'] if found else 0} {'daily' if tier == 'l1' else 'weekly'} facts",
                tier_at[tier],
                False,
            )
        )
    turns_count = meta["turns"] if meta else 0
    entries.append(
        (
            f"{root}/meta",
            f"{turns_count} turns; user {meta['user_id'] if meta else None}",
            root_at,
            bool(meta and meta["overview"]),
        )
    )
    base = _under(root, args.path)
    if not (base == root or base.startswith(root + "/") or root.startswith(base)):
        return {"summaries": []}
    depth0 = base.count("/")
    chosen = [
        {"path": path, "abstract": abstract, "updated_at": _iso(when), "has_overview": overview}
        for path, abstract, when, overview in entries
        if (path == base or path.startswith(base.rstrip("/") + "/")) and path.count("/") - depth0 <= args.depth
    ]
    return {"summaries": chosen[: args.limit]}


def _iso(when: datetime) -> str:
    """UTC with a `Z`, as seed 004 §4.4 shows (`2026-02-21T12:00:00Z`)."""
    return when.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _under(root: str, path: str) -> str:
    """The directory `path` names: relative to the session's root, as the reference's clients give it (`events`,
    `memory_tiers/l1`), or absolute (`/memory/<session_id>/events`, as the listing answers)."""
    path = path.strip().strip("/")
    if path == "memory" or path.startswith("memory/"):
        return "/" + path
    return f"{root}/{path}" if path else root

"""SQL for seed 004's sessions that only memory-api runs: the turn guard (§7.2), storing a turn's events and
bookkeeping, searching earlier events, the layout listing. The lock, reading events and maintenance are shared with
the consolidator (memento_shared.sessions). Every query runs under the caller's RLS principal and names the tenant
and workspace."""

from __future__ import annotations

from typing import Any

import asyncpg

from memento_memory_api.uow import Scope

EVENT_COLUMNS = "id, turn_id, role, item, item_hash, tokens, created_at"


async def claim_turn(conn: asyncpg.Connection, scope: Scope, session_id: str, turn_id: str, stale_s: float) -> str:
    """Claim a turn for committing: 'claimed' (new, or a `processing` claim older than `stale_s` taken over), 'done'
    (committed before: nothing to do) or 'busy' (another commit of it is in progress). One statement, so two
    concurrent claims of one turn cannot both win."""
    return await conn.fetchval(
        "WITH claimed AS ("
        " INSERT INTO agent_memory.turn_guards (tenant_id, workspace, session_id, turn_id, status)"
        " VALUES ($1, $2, $3, $4, 'processing')"
        " ON CONFLICT (tenant_id, workspace, session_id, turn_id) DO UPDATE SET updated_at = now()"
        "   WHERE agent_memory.turn_guards.status = 'processing'"
        "     AND agent_memory.turn_guards.updated_at < now() - make_interval(secs => $5)"
        " RETURNING 1)"
        " SELECT CASE WHEN EXISTS (SELECT 1 FROM claimed) THEN 'claimed'"
        "   ELSE (SELECT CASE status WHEN 'done' THEN 'done' ELSE 'busy' END FROM agent_memory.turn_guards"
        "         WHERE tenant_id = $1 AND workspace = $2 AND session_id = $3 AND turn_id = $4) END",
        scope.tenant_id,
        scope.workspace,
        session_id,
        turn_id,
        stale_s,
    )


async def finish_turn(conn: asyncpg.Connection, scope: Scope, session_id: str, turn_id: str) -> None:
    await conn.execute(
        "UPDATE agent_memory.turn_guards SET status = 'done', updated_at = now()"
        " WHERE tenant_id = $1 AND workspace = $2 AND session_id = $3 AND turn_id = $4",
        scope.tenant_id,
        scope.workspace,
        session_id,
        turn_id,
    )


async def release_turn(conn: asyncpg.Connection, scope: Scope, session_id: str, turn_id: str) -> None:
    """A commit that failed gives its claim back, so a retry need not wait for it to go stale."""
    await conn.execute(
        "DELETE FROM agent_memory.turn_guards WHERE tenant_id = $1 AND workspace = $2 AND session_id = $3"
        " AND turn_id = $4 AND status = 'processing'",
        scope.tenant_id,
        scope.workspace,
        session_id,
        turn_id,
    )


async def add_events(conn: asyncpg.Connection, scope: Scope, session_id: str, turn_id: str, events: list) -> None:
    """events: (role, item, item_hash, tokens) in order."""
    await conn.executemany(
        "INSERT INTO agent_memory.session_events (tenant_id, workspace, session_id, turn_id, role, item, item_hash,"
        " tokens) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        [(scope.tenant_id, scope.workspace, session_id, turn_id, *event) for event in events],
    )


async def touch_meta(conn: asyncpg.Connection, scope: Scope, session_id: str, user_id: str | None) -> None:
    await conn.execute(
        "INSERT INTO agent_memory.session_meta (tenant_id, workspace, session_id, user_id, turns, last_turn_at)"
        " VALUES ($1, $2, $3, $4, 1, now()) ON CONFLICT (tenant_id, workspace, session_id) DO UPDATE SET"
        " turns = agent_memory.session_meta.turns + 1, last_turn_at = now(), updated_at = now(),"
        " user_id = coalesce(EXCLUDED.user_id, agent_memory.session_meta.user_id)",
        scope.tenant_id,
        scope.workspace,
        session_id,
        user_id,
    )


async def layout(conn: asyncpg.Connection, scope: Scope, session_id: str) -> dict[str, Any]:
    """What memory_list_dir_with_abstract describes, in one statement."""
    row = await conn.fetchrow(
        "SELECT (SELECT count(*) FROM agent_memory.session_events WHERE tenant_id = $1 AND workspace = $2"
        "   AND session_id = $3) AS events,"
        " (SELECT max(created_at) FROM agent_memory.session_events WHERE tenant_id = $1 AND workspace = $2"
        "   AND session_id = $3) AS events_at,"
        " (SELECT coalesce(jsonb_agg(jsonb_build_object('day', day, 'events', events, 'updated_at', updated_at)"
        "   ORDER BY day), '[]') FROM agent_memory.session_archives WHERE tenant_id = $1 AND workspace = $2"
        "   AND session_id = $3) AS archives",
        scope.tenant_id,
        scope.workspace,
        session_id,
    )
    return dict(row)


async def earlier_events(
    conn: asyncpg.Connection, scope: Scope, session_id: str, before_id: int, words: list[str], limit: int
) -> list[asyncpg.Record]:
    """Up to `limit` of the session's events older than `before_id` that hold any of `words`, best matches first
    (seed §9.3 search_limit). A session's events are few enough to match without an index of their own."""
    if not words or limit <= 0:
        return []
    return await conn.fetch(
        f"SELECT {EVENT_COLUMNS} FROM (SELECT *, to_tsvector('simple', item::text) AS tsv"
        " FROM agent_memory.session_events WHERE tenant_id = $1 AND workspace = $2 AND session_id = $3 AND id < $4) e"
        " WHERE tsv @@ to_tsquery('simple', $5) ORDER BY ts_rank(tsv, to_tsquery('simple', $5)) DESC, id DESC LIMIT $6",
        scope.tenant_id,
        scope.workspace,
        session_id,
        before_id,
        " | ".join(words),
        limit,
    )

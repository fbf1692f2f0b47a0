"""SQL for seed 004's sessions that only memory-api runs: the turn guard (§7.2), storing a turn's events and
bookkeeping, searching earlier events, the layout listing. The lock, reading events and maintenance are shared with
the consolidator (memento_shared.sessions). Every query runs under the caller's RLS principal and names the tenant
and workspace."""

from __future__ import annotations

from typing import Any

import asyncpg

from memento_memory_api.uow import Scope

EVENT_COLUMNS = "id, turn_id, role, item, item_hash, tokens, created_at"
# an event's text (its content string, or its content parts' texts), not its JSON: keys such as "role" or "text"
# must not match every question
_ITEM_TEXT = (
    "CASE jsonb_typeof(item->'content') WHEN 'string' THEN item->>'content'"
    " WHEN 'array' THEN (SELECT string_agg(p->>'text', ' ') FROM jsonb_array_elements(item->'content') p)"
    " ELSE '' END"
)


async def claim_turn(
    conn: asyncpg.Connection, scope: Scope, session_id: str, turn_id: str, claim: str, stale_s: float
) -> str:
    """Claim a turn for committing, as `claim`: 'claimed' (new, or a `processing` claim older than `stale_s` taken
    over), 'done' (committed before: nothing to do) or 'busy' (another call's commit of it is in progress). The
    insert waits for a concurrent claim of the same turn to commit; the read after it then sees that claim."""
    inserted = await conn.fetchval(
        "INSERT INTO agent_memory.turn_guards (tenant_id, workspace, session_id, turn_id, status, claim)"
        " VALUES ($1, $2, $3, $4, 'processing', $5) ON CONFLICT DO NOTHING RETURNING true",
        scope.tenant_id,
        scope.workspace,
        session_id,
        turn_id,
        claim,
    )
    if inserted:
        return "claimed"
    row = await conn.fetchrow(
        "SELECT status, updated_at < now() - make_interval(secs => $5) AS stale FROM agent_memory.turn_guards"
        " WHERE tenant_id = $1 AND workspace = $2 AND session_id = $3 AND turn_id = $4 FOR UPDATE",
        scope.tenant_id,
        scope.workspace,
        session_id,
        turn_id,
        stale_s,
    )
    if row is None:  # released between the two statements: claim it now
        return await claim_turn(conn, scope, session_id, turn_id, claim, stale_s)
    if row["status"] == "done":
        return "done"
    if not row["stale"]:
        return "busy"
    await conn.execute(
        "UPDATE agent_memory.turn_guards SET claim = $5, updated_at = now() WHERE tenant_id = $1 AND workspace = $2"
        " AND session_id = $3 AND turn_id = $4",
        scope.tenant_id,
        scope.workspace,
        session_id,
        turn_id,
        claim,
    )
    return "claimed"


async def holds_turn(conn: asyncpg.Connection, scope: Scope, session_id: str, turn_id: str, claim: str) -> bool:
    """Whether `claim` still holds the turn (`processing`, not taken over), locking the guard row for the rest of the
    transaction: checked under the session lock, right before the turn is written."""
    return bool(
        await conn.fetchval(
            "SELECT status = 'processing' AND claim = $5 FROM agent_memory.turn_guards WHERE tenant_id = $1"
            " AND workspace = $2 AND session_id = $3 AND turn_id = $4 FOR UPDATE",
            scope.tenant_id,
            scope.workspace,
            session_id,
            turn_id,
            claim,
        )
    )


async def finish_turn(conn: asyncpg.Connection, scope: Scope, session_id: str, turn_id: str, claim: str) -> None:
    await conn.execute(
        "UPDATE agent_memory.turn_guards SET status = 'done', updated_at = now()"
        " WHERE tenant_id = $1 AND workspace = $2 AND session_id = $3 AND turn_id = $4 AND claim = $5",
        scope.tenant_id,
        scope.workspace,
        session_id,
        turn_id,
        claim,
    )


async def release_turn(conn: asyncpg.Connection, scope: Scope, session_id: str, turn_id: str, claim: str) -> None:
    """A commit that failed gives its claim back (only its own), so a retry need not wait for it to go stale."""
    await conn.execute(
        "DELETE FROM agent_memory.turn_guards WHERE tenant_id = $1 AND workspace = $2 AND session_id = $3"
        " AND turn_id = $4 AND status = 'processing' AND claim = $5",
        scope.tenant_id,
        scope.workspace,
        session_id,
        turn_id,
        claim,
    )


async def add_events(conn: asyncpg.Connection, scope: Scope, session_id: str, turn_id: str, events: list[Any]) -> None:
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
        f"SELECT {EVENT_COLUMNS} FROM (SELECT *, to_tsvector('simple', {_ITEM_TEXT}) AS tsv"
        " FROM agent_memory.session_events WHERE tenant_id = $1 AND workspace = $2 AND session_id = $3 AND id < $4) e"
        " WHERE tsv @@ to_tsquery('simple', $5) ORDER BY ts_rank(tsv, to_tsquery('simple', $5)) DESC, id DESC LIMIT $6",
        scope.tenant_id,
        scope.workspace,
        session_id,
        before_id,
        " | ".join(words),
        limit,
    )

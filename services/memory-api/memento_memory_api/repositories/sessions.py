"""SQL for seed 004's sessions: the turn guard (§7.2), the session lock (§7.3), events, their archives and the
session's summary. Every query runs under the caller's RLS principal and names the tenant and workspace."""

from __future__ import annotations

from datetime import datetime
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


async def lock_session(conn: asyncpg.Connection, scope: Scope, session_id: str, timeout_s: float) -> None:
    """The session's advisory lock for the rest of the transaction (§7.3), waiting at most `timeout_s`; a timeout
    raises asyncpg.LockNotAvailableError. The key hashes tenant, workspace and session: 64 bits, so two sessions
    sharing a key (and so serialising) is as rare as a hash collision."""
    await conn.execute(f"SET LOCAL lock_timeout = '{int(timeout_s * 1000)}ms'")
    await conn.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended($1 || chr(31) || $2 || chr(31) || $3, 4))",
        scope.tenant_id,
        scope.workspace,
        session_id,
    )
    await conn.execute("SET LOCAL lock_timeout = 0")


async def recent_events(conn: asyncpg.Connection, scope: Scope, session_id: str, limit: int) -> list[asyncpg.Record]:
    """The session's newest `limit` events, oldest first."""
    rows = await conn.fetch(
        f"SELECT {EVENT_COLUMNS} FROM agent_memory.session_events WHERE tenant_id = $1 AND workspace = $2"
        " AND session_id = $3 ORDER BY id DESC LIMIT $4",
        scope.tenant_id,
        scope.workspace,
        session_id,
        limit,
    )
    return rows[::-1]


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


async def meta(conn: asyncpg.Connection, scope: Scope, session_id: str) -> asyncpg.Record | None:
    return await conn.fetchrow(
        "SELECT * FROM agent_memory.session_meta WHERE tenant_id = $1 AND workspace = $2 AND session_id = $3",
        scope.tenant_id,
        scope.workspace,
        session_id,
    )


async def compact_day(conn: asyncpg.Connection, scope: Scope, session_id: str, before: datetime) -> int:
    """Move the oldest UTC day of events created before `before` into that day's archive (appended, in order) and
    delete them, in the caller's transaction: a run cut short leaves whole days either archived or not."""
    moved = await conn.fetchval(
        "WITH day AS (SELECT (created_at AT TIME ZONE 'UTC')::date AS d FROM agent_memory.session_events"
        "   WHERE tenant_id = $1 AND workspace = $2 AND session_id = $3 AND created_at < $4 ORDER BY id LIMIT 1),"
        " gone AS (DELETE FROM agent_memory.session_events e WHERE tenant_id = $1 AND workspace = $2"
        "   AND session_id = $3 AND created_at < $4 AND (created_at AT TIME ZONE 'UTC')::date = (SELECT d FROM day)"
        "   RETURNING id, item),"
        " archived AS (INSERT INTO agent_memory.session_archives (tenant_id, workspace, session_id, day, items, events)"
        "   SELECT $1, $2, $3, (SELECT d FROM day), coalesce(jsonb_agg(item ORDER BY id), '[]'), count(*) FROM gone"
        "   HAVING count(*) > 0"
        "   ON CONFLICT (tenant_id, workspace, session_id, day) DO UPDATE SET"
        "   items = agent_memory.session_archives.items || EXCLUDED.items,"
        "   events = agent_memory.session_archives.events + EXCLUDED.events, updated_at = now() RETURNING 1)"
        " SELECT (SELECT count(*) FROM gone) + 0 * (SELECT count(*) FROM archived)",
        scope.tenant_id,
        scope.workspace,
        session_id,
        before,
    )
    return int(moved)


async def set_summary(conn: asyncpg.Connection, scope: Scope, session_id: str, abstract: str, overview: str) -> None:
    await conn.execute(
        "INSERT INTO agent_memory.session_meta (tenant_id, workspace, session_id, abstract, overview,"
        " summary_refreshed_at) VALUES ($1, $2, $3, $4, $5, now()) ON CONFLICT (tenant_id, workspace, session_id)"
        " DO UPDATE SET abstract = $4, overview = $5, summary_refreshed_at = now(), updated_at = now()",
        scope.tenant_id,
        scope.workspace,
        session_id,
        abstract,
        overview,
    )


async def maintained(conn: asyncpg.Connection, scope: Scope, session_id: str) -> None:
    await conn.execute(
        "UPDATE agent_memory.session_meta SET maintained_at = now() WHERE tenant_id = $1 AND workspace = $2"
        " AND session_id = $3",
        scope.tenant_id,
        scope.workspace,
        session_id,
    )


async def prune_guards(conn: asyncpg.Connection, scope: Scope, session_id: str, keep: int) -> int:
    """Keep the newest `keep` finished turn guards of the session (seed §9.3 max_processed_turns)."""
    status = await conn.execute(
        "DELETE FROM agent_memory.turn_guards WHERE tenant_id = $1 AND workspace = $2 AND session_id = $3"
        " AND status = 'done' AND turn_id NOT IN (SELECT turn_id FROM agent_memory.turn_guards WHERE tenant_id = $1"
        " AND workspace = $2 AND session_id = $3 AND status = 'done' ORDER BY updated_at DESC LIMIT $4)",
        scope.tenant_id,
        scope.workspace,
        session_id,
        keep,
    )
    return int(status.split()[-1])


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

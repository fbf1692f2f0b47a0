"""Seed 004's sessions, the part two services share: the session lock (§7.3), reading its events and record, and
maintenance (retention, summary refresh, compaction, turn-guard pruning; §9.3). memory-api runs it for
memory_run_maintenance under the caller's principal; the consolidator for idle sessions as `system`. Each step is its
own short transaction under the session's lock, so a run cut short is simply run again."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from memento_shared.db.references import clear_references
from memento_shared.settings import LifecycleSettings
from memento_shared.text.keywords import extract_keywords

EVENT_COLUMNS = "id, turn_id, role, item, item_hash, tokens, created_at"
FACT_TIERS = ("lifecycle:l1", "lifecycle:l2")  # daily and weekly facts, in the fragment row's `source`
SUMMARY_EVENTS = 50


@dataclass(frozen=True)
class Scope:
    """A session's place: the tenant and workspace (seed 004's project) it belongs to."""

    tenant_id: str
    workspace: str


async def lock_session(conn: asyncpg.Connection, scope: Any, session_id: str, timeout_s: float) -> None:
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


async def recent_events(conn: asyncpg.Connection, scope: Any, session_id: str, limit: int) -> list[asyncpg.Record]:
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


async def meta(conn: asyncpg.Connection, scope: Any, session_id: str) -> asyncpg.Record | None:
    return await conn.fetchrow(
        "SELECT * FROM agent_memory.session_meta WHERE tenant_id = $1 AND workspace = $2 AND session_id = $3",
        scope.tenant_id,
        scope.workspace,
        session_id,
    )


async def compact_day(conn: asyncpg.Connection, scope: Any, session_id: str, before: datetime) -> int:
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


async def set_summary(conn: asyncpg.Connection, scope: Any, session_id: str, abstract: str, overview: str) -> None:
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


async def maintained(conn: asyncpg.Connection, scope: Any, session_id: str) -> None:
    await conn.execute(
        "UPDATE agent_memory.session_meta SET maintained_at = now() WHERE tenant_id = $1 AND workspace = $2"
        " AND session_id = $3",
        scope.tenant_id,
        scope.workspace,
        session_id,
    )


async def prune_guards(conn: asyncpg.Connection, scope: Any, session_id: str, keep: int) -> int:
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


def text_of(item: dict[str, Any]) -> str:
    """The text a Responses-style message carries (its text parts, joined); '' for other items."""
    content = item.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def summary(events: list[Any], record: Any) -> tuple[str, str]:
    """An extractive `.abstract` (one line: turns, last activity, the words the session is about) and `.overview`
    (the latest requests and answers, a line each)."""
    said = [e for e in events if e["role"] in ("user", "assistant")]
    words = Counter(w for e in said for w in extract_keywords(text_of(e["item"]), 8))
    about = ", ".join(w for w, _ in words.most_common(6)) or "nothing yet"
    turns = record["turns"] if record else 0
    abstract = f"{turns} turns, last at {events[-1]['created_at'].isoformat()}; about: {about}"
    lines = [f"- {e['role']}: {(text_of(e['item']).strip().splitlines() or [''])[0][:200]}" for e in said[-10:]]
    return abstract, "\n".join([abstract, "", *lines])


Transaction = Callable[[], AbstractAsyncContextManager[asyncpg.Connection]]


async def maintain(
    transaction: Transaction, scope: Any, session_id: str, settings: LifecycleSettings
) -> tuple[dict[str, int], list[Any]]:
    """One maintenance run: answers its counters and the expired facts it deleted (id, agent_id, keywords), whose L1
    entries the caller removes. Raises asyncpg.LockNotAvailableError when the session stays locked longer than
    MEMORY_LOCK_TIMEOUT_SECONDS. Each step is one transaction under the lock: a run cut short leaves whole steps
    (whole days of compaction) done or not done, and the next run finishes the rest."""
    counts = {"expired_facts": 0, "compacted_events": 0, "archives": 0, "summaries_refreshed": 0}
    timeout = settings.memory_lock_timeout_s
    async with transaction() as conn:  # retention, in UTC: the project's daily and weekly facts past their end
        await lock_session(conn, scope, session_id, timeout)
        expired = await conn.fetch(
            "DELETE FROM agent_memory.fragments WHERE tenant_id = $1 AND workspace = $2 AND source = ANY($3)"
            " AND expires_at <= now() RETURNING id, agent_id, keywords",
            scope.tenant_id,
            scope.workspace,
            list(FACT_TIERS),
        )
        await clear_references(conn, [r["id"] for r in expired])
        counts["expired_facts"] = len(expired)
    async with transaction() as conn:  # the summary first: compaction may then archive the events it reads
        await lock_session(conn, scope, session_id, timeout)
        record = await meta(conn, scope, session_id)
        refreshed = record["summary_refreshed_at"] if record else None
        interval = timedelta(minutes=settings.memory_summary_refresh_interval_minutes)
        due = refreshed is None or refreshed < datetime.now(UTC) - interval
        events = await recent_events(conn, scope, session_id, SUMMARY_EVENTS) if due else []
        if events:
            await set_summary(conn, scope, session_id, *summary(events, record))
            counts["summaries_refreshed"] = 1
        counts["turn_guards_pruned"] = await prune_guards(conn, scope, session_id, settings.memory_max_processed_turns)
    before = datetime.now(UTC) - timedelta(hours=settings.memory_compaction_min_age_hours)
    while True:  # one UTC day of old events per transaction
        async with transaction() as conn:
            await lock_session(conn, scope, session_id, timeout)
            moved = await compact_day(conn, scope, session_id, before)
        if not moved:
            break
        counts["compacted_events"] += moved
        counts["archives"] += 1
    async with transaction() as conn:
        await maintained(conn, scope, session_id)
    return counts, list(expired)


async def idle_sessions(
    conn: asyncpg.Connection, idle_minutes: float, limit: int, compaction_hours: float
) -> list[Any]:
    """Sessions (of every tenant: a `system` transaction) with no turn for `idle_minutes` and either not maintained
    since their last turn or holding events old enough to compact."""
    return await conn.fetch(
        "SELECT tenant_id, workspace, session_id FROM agent_memory.session_meta m"
        " WHERE last_turn_at < now() - $1 * interval '1 minute'"
        " AND (maintained_at IS NULL OR maintained_at < last_turn_at"
        # 11: an idle session maintained too early for its events' compaction is visited again once they are due
        "      OR EXISTS (SELECT 1 FROM agent_memory.session_events e WHERE e.tenant_id = m.tenant_id"
        "        AND e.workspace = m.workspace AND e.session_id = m.session_id"
        "        AND e.created_at < now() - $3 * interval '1 hour'))"
        " ORDER BY last_turn_at LIMIT $2",
        float(idle_minutes),
        limit,
        float(compaction_hours),
    )

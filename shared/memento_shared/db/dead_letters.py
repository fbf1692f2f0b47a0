"""Dead letters: events whose handler kept failing after the last try. Written by the workers, listed and replayed
by `memento-admin dead-letters`. Every function expects a connection acting as `system` (see rls.set_system).

A replay re-enqueues the original envelope under a new job id (`<event id>:<queue>:replay<n>`): the original id
is still taken by the finished job's kept result, and a fresh id starts the tries from one.
"""

from __future__ import annotations

from typing import Any

import asyncpg

_COLUMNS = (
    "id, event_id, queue, tenant_id, workspace, event_type, payload, traceparent, error, attempts, created_at,"
    " replayed_at, replay_count"
)


async def insert(conn: asyncpg.Connection, queue: str, envelope: dict[str, Any], error: str, attempts: int) -> None:
    # A replay that fails again updates the same row and opens it again (replayed_at back to NULL).
    await conn.execute(
        "INSERT INTO agent_memory.dead_letters (event_id, queue, tenant_id, workspace, event_type, payload,"
        " traceparent, error, attempts) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
        " ON CONFLICT (event_id, queue, tenant_id) DO UPDATE SET error = EXCLUDED.error, attempts = EXCLUDED.attempts,"
        " created_at = now(), replayed_at = NULL",
        envelope["event_id"],
        queue,
        envelope["tenant_id"],
        envelope["workspace"],
        envelope["event_type"],
        envelope["payload"],
        envelope.get("traceparent"),
        error[:2000],
        attempts,
    )


async def list_open(
    conn: asyncpg.Connection, *, queue: str | None = None, include_replayed: bool = False, limit: int = 100
) -> list[asyncpg.Record]:
    return await conn.fetch(
        f"SELECT {_COLUMNS} FROM agent_memory.dead_letters"
        " WHERE ($1::text IS NULL OR queue = $1) AND ($2 OR replayed_at IS NULL) ORDER BY id LIMIT $3",
        queue,
        include_replayed,
        limit,
    )


async def get(conn: asyncpg.Connection, dead_letter_id: int) -> asyncpg.Record | None:
    return await conn.fetchrow(f"SELECT {_COLUMNS} FROM agent_memory.dead_letters WHERE id = $1", dead_letter_id)


async def claim_replay(conn: asyncpg.Connection, dead_letter_id: int) -> asyncpg.Record | None:
    """Mark one open dead letter replayed and return it; None if it does not exist or is already replayed.

    Call inside the transaction that also enqueues it, so a failed enqueue leaves it open.
    """
    return await conn.fetchrow(
        "UPDATE agent_memory.dead_letters SET replayed_at = now(), replay_count = replay_count + 1"
        f" WHERE id = $1 AND replayed_at IS NULL RETURNING {_COLUMNS}",
        dead_letter_id,
    )


async def open_counts(conn: asyncpg.Connection) -> dict[tuple[str, str], int]:
    rows = await conn.fetch(
        "SELECT queue, event_type, count(*) AS n FROM agent_memory.dead_letters WHERE replayed_at IS NULL"
        " GROUP BY queue, event_type"
    )
    return {(r["queue"], r["event_type"]): r["n"] for r in rows}


def envelope_of(row: asyncpg.Record) -> dict[str, Any]:
    return {
        "event_id": str(row["event_id"]),
        "event_type": row["event_type"],
        "tenant_id": row["tenant_id"],
        "workspace": row["workspace"],
        "payload": row["payload"],
        "traceparent": row["traceparent"],
    }


def replay_job_id(row: asyncpg.Record) -> str:
    return f"{row['event_id']}:{row['queue']}:replay{row['replay_count']}"

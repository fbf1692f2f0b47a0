"""The transactional outbox: insert inside the writer's transaction; claim with SKIP LOCKED in the relay."""

from __future__ import annotations

import asyncpg

from memento_shared.events import Event

CHANNEL = "memento_outbox"


async def insert_events(conn: asyncpg.Connection, events: list[Event], traceparent: str | None) -> None:
    """Must run inside the writer's transaction; the insert trigger NOTIFYs the relay at commit."""
    if not events:
        return
    await conn.executemany(
        "INSERT INTO agent_memory.outbox (id, tenant_id, workspace, event_type, payload, traceparent)"
        " VALUES ($1, $2, $3, $4, $5, $6)",
        [(e.id, e.tenant_id, e.workspace, e.type, e.payload, traceparent) for e in events],
    )


async def claim_batch(conn: asyncpg.Connection, limit: int) -> list[asyncpg.Record]:
    """Lock up to `limit` unpublished events; other relays skip them. Call inside a transaction."""
    return await conn.fetch(
        "SELECT id, tenant_id, workspace, event_type, payload, traceparent FROM agent_memory.outbox"
        " WHERE published_at IS NULL ORDER BY created_at LIMIT $1 FOR UPDATE SKIP LOCKED",
        limit,
    )


async def mark_published(conn: asyncpg.Connection, ids: list) -> None:
    await conn.execute(
        "UPDATE agent_memory.outbox SET published_at = now(), attempts = attempts + 1 WHERE id = ANY($1::uuid[])", ids
    )


async def backlog(conn: asyncpg.Connection) -> dict[str, int]:
    rows = await conn.fetch(
        "SELECT event_type, count(*) AS n FROM agent_memory.outbox WHERE published_at IS NULL GROUP BY event_type"
    )
    return {r["event_type"]: r["n"] for r in rows}

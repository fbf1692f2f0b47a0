"""The transactional outbox: insert inside the writer's transaction; claim with SKIP LOCKED in the relay."""

from __future__ import annotations

import asyncpg

from memento_shared import jsonio
from memento_shared.db.rls import literal
from memento_shared.events import Event

CHANNEL = "memento_outbox"


def insert_sql(events: list[Event], traceparent: str | None) -> str:
    """The INSERT of `events` as one statement with literal values, for transaction_as(commit_with=...): the rows
    travel with the COMMIT instead of costing a round trip of their own. Values are escape-string literals (the
    same quoting as the principal's), so the statement's text never depends on what a value holds."""
    if not events:
        return ""
    trace = literal(traceparent) if traceparent else "NULL"
    rows = ", ".join(
        f"({literal(e.id)}::uuid, {literal(e.tenant_id)}, {literal(e.workspace)}, {literal(e.type)},"
        f" {literal(jsonio.dumps_str(e.payload))}::jsonb, {trace})"
        for e in events
    )
    return f"INSERT INTO agent_memory.outbox (id, tenant_id, workspace, event_type, payload, traceparent) VALUES {rows}"


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

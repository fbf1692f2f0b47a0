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
    """Lock up to `limit` unpublished events and mark them published, oldest first; other relays skip them. Call
    inside a transaction and commit only once their jobs are enqueued: a rollback (Redis away, a crash before the
    COMMIT) leaves them unpublished. Claim and mark are one statement, a round trip fewer per relay round."""
    rows = await conn.fetch(
        "UPDATE agent_memory.outbox o SET published_at = now(), attempts = o.attempts + 1 FROM (SELECT id FROM"
        " agent_memory.outbox WHERE published_at IS NULL ORDER BY created_at LIMIT $1 FOR UPDATE SKIP LOCKED) c"
        " WHERE o.id = c.id RETURNING o.id, o.tenant_id, o.workspace, o.event_type, o.payload, o.traceparent,"
        " o.created_at",
        limit,
    )
    return sorted(rows, key=lambda r: r["created_at"])  # RETURNING keeps no order


async def backlog(conn: asyncpg.Connection) -> dict[str, int]:
    rows = await conn.fetch(
        "SELECT event_type, count(*) AS n FROM agent_memory.outbox WHERE published_at IS NULL GROUP BY event_type"
    )
    return {r["event_type"]: r["n"] for r in rows}


async def prune(conn: asyncpg.Connection, older_than_s: float, limit: int) -> int:
    """Delete up to `limit` events published and created more than `older_than_s` ago; how many went. Unpublished
    events stay whatever their age (the relay still owes them to a queue); a dead letter keeps its own copy. Rows
    another replica's prune holds are skipped, not waited for."""
    status = await conn.execute(
        "DELETE FROM agent_memory.outbox WHERE id IN (SELECT id FROM agent_memory.outbox"
        " WHERE created_at < now() - make_interval(secs => $1) AND published_at IS NOT NULL LIMIT $2"
        " FOR UPDATE SKIP LOCKED)",
        older_than_s,
        limit,
    )
    return int(status.rsplit(" ", 1)[-1])

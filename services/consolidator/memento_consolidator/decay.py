"""Seed 003's decay (PROTOCOL_DECAY_CRON, every 6 hours by default): each memory's stored relevance recomputed with
agent_memory.protocol_relevance (recency × access boosts, the query's term left out), and what has expired purged:
skip entries, and memories past their `expires` (their L1 keyword entries with them). memento_health reports when a
workspace was last done; memento_identity_crystallize ranks memories by the stored relevance.

It runs beside writes: batches of PROTOCOL_DECAY_BATCH_SIZE rows in id order, each its own short transaction, and a
row whose relevance moved by less than 1e-4 is not rewritten. PROTOCOL_DECAY_WRITERS ranges of the id order are
rescored at once, each on its own connection."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from memento_consolidator.settings import settings_of
from memento_shared import l1
from memento_shared.db.clashes import retrying_clashes
from memento_shared.db.references import clear_references
from memento_shared.db.rls import system_transaction
from memento_shared.worker import Runtime

log = logging.getLogger(__name__)

_RELEVANCE = (
    "WITH batch AS (SELECT id FROM agent_memory.fragments WHERE id > $1 AND ($4::text IS NULL OR id <= $4)"
    " ORDER BY id LIMIT $2),"
    " changed AS (UPDATE agent_memory.fragments f"
    "   SET relevance = agent_memory.protocol_relevance(f.created_at, f.access_count, f.accessed_at, $3)"
    "   FROM batch b WHERE f.id = b.id AND abs(f.relevance"
    "     - agent_memory.protocol_relevance(f.created_at, f.access_count, f.accessed_at, $3)) > 0.0001 RETURNING 1)"
    " SELECT (SELECT max(id) FROM batch) AS last, (SELECT count(*) FROM changed) AS changed"
)
_EXPIRED = (
    "DELETE FROM agent_memory.fragments WHERE id IN (SELECT id FROM agent_memory.fragments"
    " WHERE expires_at <= $1 LIMIT $2) RETURNING id, tenant_id, workspace, agent_id, keywords"
)
_DONE = (
    "INSERT INTO agent_memory.protocol_decay (tenant_id, workspace, decayed_at, memories)"
    " SELECT tenant_id, workspace, $1, count(*) FROM agent_memory.fragments GROUP BY 1, 2"
    " ON CONFLICT (tenant_id, workspace) DO UPDATE SET decayed_at = EXCLUDED.decayed_at,"
    " memories = EXCLUDED.memories"
)


# where the id order splits into `writers` ranges of about equal size, read off a sample of some 20,000 rows (all of
# them in a small store)
_BOUNDS = (
    "SELECT percentile_disc($1::float8[]) WITHIN GROUP (ORDER BY id) FROM agent_memory.fragments"
    " TABLESAMPLE SYSTEM ((SELECT least(100, 100 * 20000 / greatest(reltuples, 1))"
    " FROM pg_class WHERE oid = 'agent_memory.fragments'::regclass))"
)


async def _rescore(rt: Runtime, now: Any, low: str, high: str | None, batch: int) -> int:
    """Rescore the ids in (low, high] batch by batch; returns how many rows changed."""
    rescored, last = 0, low
    async with rt.pool.acquire() as conn:

        async def once() -> Any:
            async with system_transaction(conn):
                return await conn.fetchrow(_RELEVANCE, last, batch, now, high)

        while True:
            row = await retrying_clashes(once, "decay batch")  # a clash with a writer: written again
            if row["last"] is None:
                return rescored
            rescored, last = rescored + row["changed"], row["last"]


async def decay(rt: Runtime) -> dict[str, Any]:
    started = time.perf_counter()
    settings = settings_of(rt)
    batch, writers = settings.protocol_decay_batch_size, settings.protocol_decay_writers
    async with rt.pool.acquire() as conn:
        async with system_transaction(conn):
            now = await conn.fetchval("SELECT now()")
            cuts = [i / writers for i in range(1, writers)]
            bounds = [b for b in (await conn.fetchval(_BOUNDS, cuts) or []) if b is not None] if cuts else []
        # Postgres's backends do the work (the job only waits on them): one writer a core keeps each core busy
        edges = ["", *dict.fromkeys(bounds)]  # Postgres's own order (its collation), without repeats
        ranges = [(low, edges[i + 1] if i + 1 < len(edges) else None) for i, low in enumerate(edges)]
        async with asyncio.TaskGroup() as group:  # one writer failing stops the others (gather would leave them)
            tasks = [group.create_task(_rescore(rt, now, low, high, batch)) for low, high in ranges]
        rescored = sum(task.result() for task in tasks)
        purged = 0
        while True:
            async with system_transaction(conn):
                gone = await conn.fetch(_EXPIRED, now, batch)
                await clear_references(conn, [r["id"] for r in gone])
            purged += len(gone)
            await _unindex(rt, gone)
            if len(gone) < batch:
                break
        async with system_transaction(conn):
            skips = int(
                (await conn.execute("DELETE FROM agent_memory.skip_entries WHERE expires_at <= $1", now)).split()[-1]
            )
            await conn.execute(_DONE, now)
    result = {
        "rescored": rescored,
        "expired_memories": purged,
        "expired_skips": skips,
        "seconds": round(time.perf_counter() - started, 2),
    }
    log.info("protocol.decay_done", extra=result)
    return result


async def _unindex(rt: Runtime, rows: list[Any]) -> None:
    for row in rows:
        try:
            await l1.remove(
                rt.state_redis, row["tenant_id"], row["workspace"], row["agent_id"], row["id"], list(row["keywords"])
            )
        except Exception as exc:  # L1 serves only ids Postgres still has (memory-api re-reads every row it names)
            log.warning("protocol.decay_l1_cleanup_failed", extra={"error_type": type(exc).__name__})
            await l1.invalidate(rt.state_redis)
            return


async def decay_all(ctx: dict[str, Any]) -> dict[str, Any]:
    """The cron entry point (arq)."""
    return await decay(ctx["runtime"])

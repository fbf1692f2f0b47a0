"""Seed 004's maintenance for sessions nobody maintains (MEMORY_IDLE_MAINTENANCE_CRON; seed §14 leaves it open, and
memory_run_maintenance works on its own): every session with no turn for MEMORY_IDLE_MINUTES and not maintained
since its last turn gets the same run the tool makes (memento_shared.sessions.maintain), as `system`. A session a
client is using right now (its lock held) is skipped until next time."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import asyncpg

from memento_consolidator.settings import settings_of
from memento_shared import l1, sessions
from memento_shared.db.rls import system_transaction
from memento_shared.worker import Runtime

log = logging.getLogger(__name__)
BATCH = 200


async def maintain_idle(rt: Runtime) -> dict[str, int]:
    settings = settings_of(rt)

    @contextlib.asynccontextmanager
    async def transaction() -> AsyncIterator[asyncpg.Connection]:
        async with rt.pool.acquire() as conn, system_transaction(conn):
            yield conn

    async with transaction() as conn:
        idle = await sessions.idle_sessions(
            conn, settings.memory_idle_minutes, BATCH, settings.memory_compaction_min_age_hours
        )
    done = busy = failed = 0
    for row in idle:
        scope = sessions.Scope(row["tenant_id"], row["workspace"])
        try:
            _, expired = await sessions.maintain(transaction, scope, row["session_id"], settings)
            await _unindex(rt, scope, expired)
            done += 1
        except asyncpg.LockNotAvailableError:
            busy += 1
        except Exception as exc:  # one session's failure must not cost the others theirs; the next run retries
            failed += 1
            log.warning("lifecycle.idle_maintenance_failed", extra={"error_type": type(exc).__name__})
    result = {"sessions": done, "skipped_busy": busy, "failed": failed}
    log.info("lifecycle.idle_maintenance_done", extra=result)
    return result


async def _unindex(rt: Runtime, scope: sessions.Scope, rows: list[Any]) -> None:
    for row in rows:
        try:
            await l1.remove(
                rt.state_redis, scope.tenant_id, scope.workspace, row["agent_id"], row["id"], list(row["keywords"])
            )
        except Exception as exc:  # memory-api re-reads every row L1 names, so a stale entry returns nothing
            log.warning("lifecycle.idle_l1_cleanup_failed", extra={"error_type": type(exc).__name__})
            await l1.invalidate(rt.state_redis)
            return


async def maintain_idle_job(ctx: dict[str, Any]) -> dict[str, int]:
    """The cron entry point (arq)."""
    return await maintain_idle(ctx["runtime"])

"""One consolidation run of a tenant's workspace: the tenant's advisory lock, the ten stages in order with their
timing, progress in Redis, and a consolidation_runs row with the result."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import asyncpg

from memento_consolidator.pipeline import PIPELINE, l1
from memento_consolidator.pipeline.context import StageContext
from memento_consolidator.settings import settings_of
from memento_shared import progress
from memento_shared.consolidation import STAGES, ConsolidationBusy, lifecycle, progress_key
from memento_shared.db.rls import set_principal
from memento_shared.telemetry.metrics import CONSOLIDATION_ITEMS, CONSOLIDATION_STAGE_SECONDS
from memento_shared.worker import Runtime

log = logging.getLogger(__name__)
PROGRESS_TTL_S = 600
WAITING_STEP = 0.5  # reported while waiting for the tenant's lock: after the start (0), before stage 1


def _lock_key(tenant_id: str) -> str:
    return f"memento.consolidation:{tenant_id}"


@contextlib.asynccontextmanager
async def tenant_lock(
    pool: asyncpg.Pool,
    tenant_id: str,
    *,
    wait_s: float | None,
    on_wait: Callable[[], Awaitable[None]] | None = None,
) -> AsyncIterator[None]:
    """Hold the tenant's consolidation lock for the block (a session advisory lock on a connection of its own,
    released if this process dies). wait_s=None: do not wait; raises ConsolidationBusy when it is taken. `on_wait`
    is awaited once if the lock is taken and this call is about to wait for it."""
    async with pool.acquire() as conn:
        got = await conn.fetchval("SELECT pg_try_advisory_lock(hashtextextended($1, 0))", _lock_key(tenant_id))
        if not got and wait_s is not None:
            if on_wait is not None:
                await on_wait()
            try:
                await conn.execute(f"SET lock_timeout = {max(1, int(wait_s * 1000))}")
                # the pool's command timeout (DB_QUERY_TIMEOUT) must not end a wait the lock timeout allows
                await conn.execute(
                    "SELECT pg_advisory_lock(hashtextextended($1, 0))", _lock_key(tenant_id), timeout=wait_s + 5
                )
                got = True
            except asyncpg.LockNotAvailableError:
                got = False
            finally:
                await conn.execute("RESET lock_timeout")
        if not got:
            raise ConsolidationBusy(f"a consolidation of tenant {tenant_id} is running")
        try:
            yield
        finally:
            await conn.execute("SELECT pg_advisory_unlock(hashtextextended($1, 0))", _lock_key(tenant_id))


async def run_consolidation(
    rt: Runtime,
    tenant_id: str,
    workspace: str,
    trigger: str,
    *,
    wait_s: float | None = None,
    progress_id: str | None = None,
) -> dict[str, Any]:
    """The result described in memento_shared.consolidation. wait_s: how long to wait for the tenant's lock
    (default CONSOLIDATION_LOCK_TIMEOUT_SECONDS); None for the schedule, which skips a busy tenant."""
    started = time.perf_counter()
    settings = settings_of(rt)
    wait = settings.consolidation_lock_timeout_s if wait_s is None and trigger == "on_demand" else wait_s

    async def waiting() -> None:
        message = "waiting for the consolidation already running for this tenant"
        await progress.report(rt.state_redis, tenant_id, progress_id, WAITING_STEP, len(STAGES), message)

    async with tenant_lock(rt.pool, tenant_id, wait_s=wait, on_wait=waiting):
        since, run_id = await _open_run(rt.pool, tenant_id, workspace, trigger)
        ctx = StageContext(
            rt.pool,
            rt.state_redis,
            settings,
            lifecycle(settings),
            tenant_id,
            workspace,
            since=since,
            batch_size=settings.consolidation_batch_size,
            writers=settings.consolidation_writers,
            queue=rt.redis,
        )
        counts: dict[str, int] = {}
        stage_ms: dict[str, int] = {}
        report = _Progress(rt.state_redis, tenant_id, workspace, progress_id)
        await report(0, STAGES[0])
        try:
            for index, (name, stage) in enumerate(PIPELINE):
                stage_started = time.perf_counter()
                counts[name] = await stage(ctx)
                elapsed = time.perf_counter() - stage_started
                stage_ms[name] = round(elapsed * 1000)
                CONSOLIDATION_STAGE_SECONDS.labels(name).observe(elapsed)
                CONSOLIDATION_ITEMS.labels(name).inc(counts[name])
                following = STAGES[index + 1] if index + 1 < len(STAGES) else "done"
                message = f"stage {index + 1}/{len(STAGES)} {name}: {counts[name]}"
                await report(index + 1, following, message)
        except BaseException:
            # memory_stats must not report a failed run as running (the hash would outlive it by PROGRESS_TTL_S)
            await report(len(counts), "failed")
            raise
        finally:
            await l1.settle(ctx)  # also after a stage failed: one that deleted fragments may have left L1 behind
        result = {
            "stages": counts,
            "contradictions": ctx.contradictions,
            "stats": ctx.stats,
            "stage_ms": stage_ms,
            "duration_ms": round((time.perf_counter() - started) * 1000),
        }
        await _close_run(rt.pool, tenant_id, workspace, run_id, result)
    log.info("consolidation.done", extra={"trigger": trigger, "duration_ms": result["duration_ms"], **counts})
    return result


async def _open_run(pool: asyncpg.Pool, tenant_id: str, workspace: str, trigger: str) -> tuple[Any, int]:
    async with pool.acquire() as conn, conn.transaction():
        await set_principal(conn, tenant_id=tenant_id, workspace=workspace, agent_id="consolidator", access="admin")
        since = await conn.fetchval(
            "SELECT max(started_at) FROM agent_memory.consolidation_runs WHERE tenant_id = $1 AND workspace = $2"
            " AND finished_at IS NOT NULL",
            tenant_id,
            workspace,
        )
        run_id = await conn.fetchval(
            "INSERT INTO agent_memory.consolidation_runs (tenant_id, workspace, trigger) VALUES ($1, $2, $3)"
            " RETURNING id",
            tenant_id,
            workspace,
            trigger,
        )
    return since, run_id


async def _close_run(pool: asyncpg.Pool, tenant_id: str, workspace: str, run_id: int, result: dict[str, Any]) -> None:
    async with pool.acquire() as conn, conn.transaction():
        await set_principal(conn, tenant_id=tenant_id, workspace=workspace, agent_id="consolidator", access="admin")
        await conn.execute(
            "UPDATE agent_memory.consolidation_runs SET finished_at = now(), result = $2 WHERE id = $1",
            run_id,
            result,
        )


class _Progress:
    """The workspace's progress hash (the stage running, "done" or "failed"), and with the caller's progress id what
    each stage did on the caller's progress channel: one round trip per stage. Progress is a courtesy: after a failed
    write the run writes no more (a Redis that does not answer would cost each write its timeout, with the tenant's
    lock held)."""

    def __init__(self, redis: Any, tenant_id: str, workspace: str, progress_id: str | None) -> None:
        self.redis, self.key, self.progress_id = redis, progress_key(tenant_id, workspace), progress_id
        self.tenant_id = tenant_id
        self.available = redis is not None

    async def __call__(self, done: int, stage: str, message: str | None = None) -> None:
        """`message`: also tell the caller (its channel has the stages' counts)."""
        if not self.available:
            return
        try:
            async with self.redis.pipeline(transaction=False) as pipe:
                pipe.hset(self.key, mapping={"stage": stage, "done": done, "total": len(STAGES)})
                pipe.expire(self.key, PROGRESS_TTL_S)
                if self.progress_id is not None and message is not None:
                    progress.queue_report(pipe, self.tenant_id, self.progress_id, done, len(STAGES), message)
                await pipe.execute()
        except Exception:
            self.available = False
            log.debug("consolidation.progress_unavailable")

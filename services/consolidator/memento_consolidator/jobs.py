"""The consolidator's arq functions: `consolidate` on demand (memento_shared.consolidation.JOB_NAME, what
memory_consolidate awaits), `consolidate_all` on the schedule, and the `consolidation.requested` event."""

from __future__ import annotations

import logging
from typing import Any

from arq.worker import Function, func

from memento_consolidator.runner import run_consolidation
from memento_shared.consolidation import JOB_NAME, ConsolidationBusy
from memento_shared.db.rls import set_system
from memento_shared.worker import Runtime

log = logging.getLogger(__name__)


async def consolidate(
    ctx: dict[str, Any], tenant_id: str, workspace: str, progress_id: str | None = None
) -> dict[str, Any]:
    """progress_id: the caller's memento_shared.progress channel, if it reports progress to an MCP client."""
    return await run_consolidation(ctx["runtime"], tenant_id, workspace, "on_demand", progress_id=progress_id)


async def consolidate_all(ctx: dict[str, Any]) -> dict[str, Any]:
    """Every (tenant, workspace) with fragments; a tenant being consolidated right now is skipped until next time.
    A scope whose run fails is logged and counted, and the sweep goes on: one tenant's bad row or a transient error
    must not cost every tenant after it its consolidation. Its stages are idempotent, so the next sweep retries."""
    rt: Runtime = ctx["runtime"]
    async with rt.pool.acquire() as conn, conn.transaction():
        await set_system(conn)
        scopes = await conn.fetch("SELECT DISTINCT tenant_id, workspace FROM agent_memory.fragments")
    done = busy = failed = 0
    for scope in scopes:
        try:
            await run_consolidation(rt, scope["tenant_id"], scope["workspace"], "cron", wait_s=None)
            done += 1
        except ConsolidationBusy:
            busy += 1
        except Exception as exc:  # not BaseException: a cancelled (timed-out) sweep still stops
            failed += 1
            # the error's type only: its message can quote a row's values
            log.warning(
                "consolidation.scope_failed",
                extra={
                    "tenant_id": scope["tenant_id"],
                    "workspace": scope["workspace"],
                    "error_type": type(exc).__name__,
                },
            )
    log.info("consolidation.scheduled_done", extra={"scopes": done, "skipped_busy": busy, "failed": failed})
    return {"scopes": done, "skipped_busy": busy, "failed": failed}


async def on_requested(envelope: dict[str, Any], rt: Runtime) -> None:
    """`consolidation.requested` through the outbox: the same run for the event's tenant and workspace."""
    await run_consolidation(rt, envelope["tenant_id"], envelope["workspace"], "on_demand")


def functions(timeout_s: float) -> list[Function]:
    # a run is idempotent stage by stage, so a run cut short by a dying worker can simply run again
    return [func(consolidate, name=JOB_NAME, timeout=timeout_s, max_tries=3)]

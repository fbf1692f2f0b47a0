"""Deleted fragments leave the L1 keyword sets too (memory-api rebuilds L1 from Postgres if Redis loses it, so a
failure here is logged, never fatal)."""

from __future__ import annotations

import logging

from memento_consolidator.pipeline.context import StageContext
from memento_shared import l1

log = logging.getLogger(__name__)


async def forget(ctx: StageContext, rows) -> None:
    if ctx.redis is None:
        return
    try:
        for row in rows:
            await l1.remove(ctx.redis, ctx.tenant_id, ctx.workspace, row["agent_id"], row["id"], list(row["keywords"]))
    except Exception as exc:
        log.warning("consolidation.l1_cleanup_failed", extra={"error_type": type(exc).__name__})

"""Deleted fragments leave the L1 keyword sets too. A removal Redis fails is not fatal to the run, but L1 must not
go on serving ids Postgres no longer has (with its data kept, a restarted Redis would still say L1 is complete): the
ready marker is dropped so memory-api rebuilds L1 from Postgres, now if Redis answers, else at the end of the run (and
after it, in the background, until Redis answers or this process stops)."""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import Any

from memento_consolidator.pipeline.context import StageContext
from memento_shared import l1

log = logging.getLogger(__name__)
RETRY_DELAYS_S = (0.5, 1, 2, 4, 8, 15)  # the end-of-run retries; after them, every last delay until Redis answers


async def forget(ctx: StageContext, rows: list[Any]) -> None:
    # once a removal is lost, the marker drop owed for it also covers every later one: Redis is not asked again
    # (with a Redis that does not answer, each removal would wait its timeout while the tenant's lock is held)
    if ctx.redis is None or ctx.l1_out_of_step:
        return
    try:
        for row in rows:
            await l1.remove(ctx.redis, ctx.tenant_id, ctx.workspace, row["agent_id"], row["id"], list(row["keywords"]))
    except Exception as exc:
        log.warning("consolidation.l1_cleanup_failed", extra={"error_type": type(exc).__name__})
        ctx.l1_out_of_step = not await l1.invalidate(ctx.redis)


async def settle(ctx: StageContext, delays: tuple[float, ...] = RETRY_DELAYS_S) -> asyncio.Task[Any] | None:
    """At the end of a run: drop the ready marker a removal could not be followed by. If Redis still does not answer,
    the retries go on in the background (returned, for tests): the run, and the tenant's lock, do not wait for them.
    The marker is global, so one retry per Redis client serves every run: a later run's loss joins the pending one."""
    if not ctx.l1_out_of_step:
        return None
    pending = _pending.get(ctx.redis)
    if pending is None:
        if await l1.invalidate(ctx.redis):
            ctx.l1_out_of_step = False
            return None
        pending = _pending[ctx.redis] = asyncio.create_task(_retry(ctx, delays))
        pending.add_done_callback(lambda _: (_pending.pop(ctx.redis, None), _losses.pop(ctx.redis, None)))
    _losses[ctx.redis] = _losses.get(ctx.redis, 0) + 1
    return pending


# per Redis client: the pending retry (held until done: the loop keeps only weak references to tasks), and how many
# runs' losses it owes a marker drop; a loss handed over while a drop was on its way needs one more
_pending: dict[object, asyncio.Task[Any]] = {}
_losses: dict[object, int] = {}


async def _retry(ctx: StageContext, delays: tuple[float, ...]) -> None:
    for attempt in itertools.count():
        await asyncio.sleep(delays[min(attempt, len(delays) - 1)])
        owed = _losses.get(ctx.redis, 0)
        if await l1.invalidate(ctx.redis) and _losses.get(ctx.redis, 0) == owed:
            ctx.l1_out_of_step = False
            return
        if attempt == len(delays) - 1:  # said once: L1 may serve deleted ids until Redis answers
            log.error("consolidation.l1_out_of_step", extra={"tenant_id": ctx.tenant_id, "workspace": ctx.workspace})

"""Writing again a transaction that Postgres rolled back because it clashed with a concurrent one.

A worker's batch locks its rows in its plan's order (a bitmap scan's is the table's), while memory-api's writers lock
theirs in id order, so a batch and an access flush or a tool can each hold a row the other waits for. Postgres then
aborts one of them (deadlock detected); a serializable transaction can be refused the same way. The aborted
transaction changed nothing, so the same work, written again once the other has moved on, may pass.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

import asyncpg

log = logging.getLogger(__name__)
CLASHES = (asyncpg.DeadlockDetectedError, asyncpg.SerializationError)
ATTEMPTS = 3

T = TypeVar("T")


async def retrying_clashes(work: Callable[[], Awaitable[T]], what: str, attempts: int = ATTEMPTS) -> T:
    """`work()` (one whole transaction), written again after a clash, up to `attempts` times in all."""
    for attempt in range(1, attempts):
        try:
            return await work()
        except CLASHES as exc:
            log.info(
                "db.transaction_clashed", extra={"work": what, "attempt": attempt, "error_type": type(exc).__name__}
            )
            await asyncio.sleep(0.05 * attempt)
    return await work()

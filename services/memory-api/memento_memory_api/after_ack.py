"""Work a tool call hands off once it is acknowledged: a model's answer the caller need not wait for (seed 004's fact
extraction by a model). Bounded so a burst cannot take the pool or the process: at most MOST_AT_ONCE jobs run, and
past MOST_WAITING a job is skipped, leaving what the call already wrote as its answer. Shutdown waits for the jobs in
progress (bounded by the app's shutdown step)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from memento_shared.telemetry.metrics import AFTER_ACK_JOBS

log = logging.getLogger(__name__)


class AfterAck:
    MOST_AT_ONCE = 2
    MOST_WAITING = 64

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] = set()
        self._slots = asyncio.Semaphore(self.MOST_AT_ONCE)

    def submit(self, kind: str, job: Callable[[], Awaitable[None]]) -> bool:
        """Run `job` after the caller's answer; False (and counted as skipped) when too many are waiting."""
        if len(self._tasks) >= self.MOST_WAITING:
            AFTER_ACK_JOBS.labels(kind, "skipped").inc()
            return False
        task = asyncio.create_task(self._run(kind, job))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    async def _run(self, kind: str, job: Callable[[], Awaitable[None]]) -> None:
        async with self._slots:
            try:
                await job()
            except Exception as exc:  # what the call wrote stands; the job's failure is counted, never raised
                log.warning("after_ack.failed", extra={"kind": kind, "error_type": type(exc).__name__})
                AFTER_ACK_JOBS.labels(kind, "failed").inc()
                return
        AFTER_ACK_JOBS.labels(kind, "ok").inc()

    async def idle(self) -> None:
        """Wait until no job is waiting or running (shutdown, and tests that read what the jobs wrote)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def stop(self) -> None:
        await self.idle()

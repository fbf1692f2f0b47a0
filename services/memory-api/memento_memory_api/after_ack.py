"""Work a tool call hands off once it is acknowledged: a model's answer the caller need not wait for (seed 004's fact
extraction by a model). Bounded so a burst cannot take the pool or the process: at most `at_once` jobs run and eight
times as many wait; past that a job is skipped, leaving what the call already wrote as its answer. Shutdown waits for
the jobs in progress (bounded by the app's shutdown step)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from memento_memory_api import server_timing
from memento_shared.telemetry.metrics import AFTER_ACK_JOBS

log = logging.getLogger(__name__)


class AfterAck:
    WAITING_PER_SLOT = 8

    def __init__(self, at_once: int) -> None:
        self._tasks: set[asyncio.Task[None]] = set()  # running and waiting
        self._slots = asyncio.Semaphore(at_once)
        self._most = at_once * (1 + self.WAITING_PER_SLOT)

    def submit(self, kind: str, job: Callable[[], Awaitable[None]]) -> bool:
        """Run `job` after the caller's answer; False (and counted as skipped) when too many are waiting."""
        if len(self._tasks) >= self._most:
            AFTER_ACK_JOBS.labels(kind, "skipped").inc()
            return False
        task = asyncio.create_task(self._run(kind, job))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    async def _run(self, kind: str, job: Callable[[], Awaitable[None]]) -> None:
        server_timing.detach()  # after the answer: not the call's time
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

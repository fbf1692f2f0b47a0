"""access_count / accessed_at bookkeeping, off the request path: recalls record the ids they returned, and one
UPDATE per scope flushes them about a second after the first (one write per second instead of one per recall); with
nothing recorded the flusher sleeps until a recall records something (issue 50: no wake-up a second when idle). Seed
003's recall, whose clients read the counts back at once, writes its own before answering (record_now)."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import Counter
from typing import Any

import asyncpg

from memento_memory_api.repositories import fragments as repo
from memento_memory_api.uow import Scope
from memento_shared import background
from memento_shared.db.clashes import retrying_clashes
from memento_shared.db.rls import set_principal

log = logging.getLogger(__name__)


class AccessRecorder:
    def __init__(self, pool: asyncpg.Pool, half_life_days: float, interval: float = 1.0) -> None:
        self.pool = pool
        self.half_life_days = half_life_days
        self.interval = interval
        self.pending: dict[tuple[Any, ...], Counter[str]] = {}
        self._recorded = asyncio.Event()  # set while pending may hold something
        self._task: asyncio.Task[Any] | None = None

    def record(self, scope: Scope, ids: list[str]) -> None:
        key = (scope.tenant_id, scope.workspace, scope.agent_id, scope.access)
        self.pending.setdefault(key, Counter()).update(ids)
        self._recorded.set()

    async def record_now(self, scope: Scope, ids: list[str]) -> None:
        """Write these accesses before the answer leaves, for a dialect whose next call must already show them (seed
        003's recall, as its reference server counts them). A write that still fails after its retries is left to
        the next flush, so the recall answers anyway."""
        if not ids:
            return
        key = (scope.tenant_id, scope.workspace, scope.agent_id, scope.access)
        counts = Counter(ids)
        try:
            await retrying_clashes(functools.partial(self._touch, key, counts), "access write")
        except Exception as exc:
            log.warning("access.write_failed", extra={"error_type": type(exc).__name__})
            self.pending.setdefault(key, Counter()).update(counts)
            self._recorded.set()

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        await background.cancel(self._task)
        await self.flush()

    async def _run(self) -> None:
        while True:
            await self._recorded.wait()
            await asyncio.sleep(self.interval)  # what the next recalls record goes in the same write
            self._recorded.clear()  # before the flush takes pending: a record during it sets it again
            await self.flush()

    async def _touch(self, key: tuple[str, str, str, str], counts: Counter[Any]) -> None:
        tenant_id, workspace, agent_id, access = key
        async with self.pool.acquire() as conn, conn.transaction():
            await set_principal(conn, tenant_id=tenant_id, workspace=workspace, agent_id=agent_id, access=access)
            await repo.touch(conn, counts, self.half_life_days)

    async def flush(self) -> None:
        pending, self.pending = self.pending, {}
        for key, counts in pending.items():
            try:
                # a consolidation batch locks in its plan's order: a clash with one is written again, counts kept
                await retrying_clashes(functools.partial(self._touch, key, counts), "access flush")
            except Exception as exc:  # bookkeeping never fails a recall that already answered
                log.warning("access.flush_failed", extra={"error_type": type(exc).__name__})

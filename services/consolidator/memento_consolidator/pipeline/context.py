"""What every stage gets: the scope, the thresholds, and connections that act for that tenant and workspace.

Stages connect as the tenant with admin access (every agent of the workspace), not as `system`: row-level
security then keeps a stage's mistake inside the tenant it was asked to consolidate.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg
from arq.connections import ArqRedis

from memento_shared.db.rls import set_principal
from memento_shared.settings import Settings


@dataclass
class StageContext:
    pool: asyncpg.Pool
    redis: ArqRedis | None
    settings: Settings
    config: dict[str, Any]  # memento_shared.consolidation.lifecycle(settings)
    tenant_id: str
    workspace: str
    since: datetime | None = None  # when the last finished run started: incremental stages look at what is newer
    batch_size: int = 1000
    contradictions: list[dict] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[asyncpg.Connection]:
        """One short transaction acting for this tenant and workspace; stages commit batch by batch."""
        async with self.pool.acquire() as conn, conn.transaction():
            await set_principal(
                conn, tenant_id=self.tenant_id, workspace=self.workspace, agent_id="consolidator", access="admin"
            )
            yield conn

    async def repeat(self, sql: str, *args: Any) -> int:
        """Run a statement that changes at most batch_size rows (its last parameter) until it changes none; each
        run commits on its own, so locks are short and a run never holds the whole table."""
        total = 0
        while True:
            async with self.transaction() as conn:
                status = await conn.execute(sql, *args, self.batch_size)
            changed = int(status.rsplit(" ", 1)[-1])
            total += changed
            if changed < self.batch_size:
                return total

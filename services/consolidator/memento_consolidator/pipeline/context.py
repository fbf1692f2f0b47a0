"""What every stage gets: the scope, the thresholds, and connections that act for that tenant and workspace.

Stages connect as the tenant with admin access (every agent of the workspace), not as `system`: row-level
security then keeps a stage's mistake inside the tenant it was asked to consolidate.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Sequence
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

    async def _act(self, conn: asyncpg.Connection) -> None:
        await set_principal(
            conn, tenant_id=self.tenant_id, workspace=self.workspace, agent_id="consolidator", access="admin"
        )

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[asyncpg.Connection]:
        """One short transaction acting for this tenant and workspace; stages commit batch by batch."""
        async with self.pool.acquire() as conn, conn.transaction():
            await self._act(conn)
            yield conn

    async def stream(self, sql: str, *args: Any) -> AsyncIterator[list[asyncpg.Record]]:
        """The rows of one read-only query, batch_size at a time, through a cursor: one sequential pass over the
        scope (walking it by id would read the heap in random order), while the caller changes each batch in its
        own short transaction on another connection."""
        async with self.pool.acquire() as conn, conn.transaction(readonly=True):
            await self._act(conn)
            batch: list[asyncpg.Record] = []
            async for row in conn.cursor(sql, *args, prefetch=self.batch_size):
                batch.append(row)
                if len(batch) >= self.batch_size:
                    yield batch
                    batch = []
            if batch:
                yield batch

    async def change_matching(
        self,
        predicate: str,
        params: Sequence[Any],
        change: str,
        *,
        change_params: Sequence[Any] = (),
        returning: str | None = None,
    ) -> AsyncIterator[Any]:
        """Apply `change` (an UPDATE or DELETE of agent_memory.fragments ending in `WHERE`; its own parameters
        are {0}, {1}, ... of `change_params`) to the scope's rows matching `predicate` (parameters {0}, {1}, ...
        of `params`), batch by batch; yields each batch's execute status, or its RETURNING rows.

        The predicate selects the rows in one pass and is checked again in each change, so a row that a
        concurrent write changed meanwhile is judged on what it is now.
        """
        find = "SELECT id FROM agent_memory.fragments WHERE tenant_id = $1 AND workspace = $2 AND " + _numbered(
            predicate, 3
        )
        first_own = 4 + len(params)
        apply = (
            f"{_numbered(change, first_own)} id = ANY($1) AND tenant_id = $2 AND workspace = $3"
            f" AND {_numbered(predicate, 4)}"
        )
        if returning:
            apply += f" RETURNING {returning}"
        async for batch in self.stream(find, self.tenant_id, self.workspace, *params):
            ids = [r["id"] for r in batch]
            args = (ids, self.tenant_id, self.workspace, *params, *change_params)
            async with self.transaction() as conn:
                yield await (conn.fetch(apply, *args) if returning else conn.execute(apply, *args))

    async def update_matching(
        self, predicate: str, params: Sequence[Any], set_clause: str, set_params: Sequence[Any] = ()
    ) -> int:
        """How many rows `UPDATE ... SET set_clause` changed among those matching `predicate` (change_matching)."""
        total = 0
        change = f"UPDATE agent_memory.fragments SET {set_clause} WHERE"
        async for status in self.change_matching(predicate, params, change, change_params=set_params):
            total += int(status.rsplit(" ", 1)[-1])
        return total


def _numbered(sql: str, first: int) -> str:
    """{0}, {1}, ... as $first, $first+1, ..."""
    return re.sub(r"\{(\d+)\}", lambda m: f"${first + int(m.group(1))}", sql)

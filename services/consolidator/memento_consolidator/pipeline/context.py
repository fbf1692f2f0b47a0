"""What every stage gets: the scope, the thresholds, and connections that act for that tenant and workspace.

Stages connect as the tenant with admin access (every agent of the workspace), not as `system`: row-level
security then keeps a stage's mistake inside the tenant it was asked to consolidate.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import asyncpg
from arq.connections import ArqRedis

from memento_consolidator.settings import ConsolidatorSettings
from memento_shared.db.clashes import retrying_clashes
from memento_shared.db.cursor import fetch_batches
from memento_shared.db.rls import set_principal


@dataclass
class StageContext:
    pool: asyncpg.Pool
    redis: ArqRedis | None
    settings: ConsolidatorSettings
    config: dict[str, Any]  # memento_shared.consolidation.lifecycle(settings)
    tenant_id: str
    workspace: str
    since: datetime | None = None  # when the last finished run started: incremental stages look at what is newer
    batch_size: int = 1000
    writers: int = 2  # batches update_matching writes at once
    contradictions: list[dict[str, Any]] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    l1_out_of_step: bool = False  # an L1 removal failed and the ready marker is not dropped yet (pipeline/l1.py)
    # `redis` is the state role (L1); jobs are enqueued on the queue role, the same Redis unless REDIS_QUEUE_URL is set
    queue: ArqRedis | None = None

    def __post_init__(self) -> None:
        if self.queue is None:
            self.queue = self.redis

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
            async for batch in fetch_batches(conn, sql, *args, size=self.batch_size):
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
        find, apply = _find_and_apply(predicate, len(params), change, returning)
        async for batch in self.stream(find, self.tenant_id, self.workspace, *params):
            ids = [r["id"] for r in batch]
            args = (ids, self.tenant_id, self.workspace, *params, *change_params)
            yield await self.write_batch(apply, args, fetch=returning is not None)

    async def write_batch(self, sql: str, args: Sequence[Any], *, fetch: bool = False) -> Any:
        """One batch's change in its own transaction, committed: its rows, or its status. A batch that clashed with a
        concurrent writer is rolled back whole and written again (memento_shared.db.clashes; its predicate is checked
        again then) instead of failing the stage."""

        async def once() -> Any:
            async with self.transaction() as conn:
                return await (conn.fetch(sql, *args) if fetch else conn.execute(sql, *args))

        return await retrying_clashes(once, "consolidation batch")

    async def update_matching(
        self, predicate: str, params: Sequence[Any], set_clause: str, set_params: Sequence[Any] = ()
    ) -> int:
        """How many rows `UPDATE ... SET set_clause` changed among those matching `predicate` (as change_matching
        finds and re-checks them).

        Up to `writers` batches are written at once, each in its own transaction on its own connection, while the
        cursor reads on: a first pass after a bulk change rewrites half a million rows at a million, and one
        backend at a time leaves the second core idle. Batches hold disjoint rows, so they never wait on each
        other; each commits or rolls back whole, and the first failure stops the stage and propagates.
        """
        find, apply = _find_and_apply(predicate, len(params), f"UPDATE agent_memory.fragments SET {set_clause} WHERE")
        slots = asyncio.Semaphore(max(1, self.writers))
        counts: list[int] = []
        errors: list[BaseException] = []
        writing: set[asyncio.Task[Any]] = set()

        async def write(ids: list[str]) -> None:
            try:
                status = await self.write_batch(apply, (ids, self.tenant_id, self.workspace, *params, *set_params))
                counts.append(int(status.rsplit(" ", 1)[-1]))
            except BaseException as exc:
                errors.append(exc)
            finally:
                slots.release()

        try:
            async with contextlib.aclosing(self.stream(find, self.tenant_id, self.workspace, *params)) as batches:
                async for batch in batches:
                    await slots.acquire()
                    if errors:  # stop reading at the first failed batch
                        break
                    task = asyncio.create_task(write([r["id"] for r in batch]))
                    writing.add(task)
                    task.add_done_callback(writing.discard)
            await asyncio.gather(*writing)
        except BaseException:
            for task in writing:
                task.cancel()
            await asyncio.gather(*writing, return_exceptions=True)
            raise
        if errors:
            raise errors[0]
        return sum(counts)


def _find_and_apply(predicate: str, n_params: int, change: str, returning: str | None = None) -> tuple[str, str]:
    """The read-only query that finds the scope's rows matching `predicate` (parameters: tenant, workspace, then the
    predicate's), and the change applied to a batch of their ids that checks the predicate again (parameters: ids,
    tenant, workspace, the predicate's, then the change's own)."""
    find = "SELECT id FROM agent_memory.fragments WHERE tenant_id = $1 AND workspace = $2 AND " + _numbered(
        predicate, 3
    )
    apply = (
        f"{_numbered(change, 4 + n_params)} id = ANY($1) AND tenant_id = $2 AND workspace = $3"
        f" AND {_numbered(predicate, 4)}"
    )
    return find, apply + (f" RETURNING {returning}" if returning else "")


def _numbered(sql: str, first: int) -> str:
    """{0}, {1}, ... as $first, $first+1, ..."""
    return re.sub(r"\{(\d+)\}", lambda m: f"${first + int(m.group(1))}", sql)

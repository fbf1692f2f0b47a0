"""Unit of work: one tool call = one transaction, with its outbox events committed in it (or not at all)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import asyncpg

from memento_shared.db.outbox import insert_events
from memento_shared.db.rls import Access, begin_sql, rollback
from memento_shared.events import Event
from memento_shared.telemetry.tracing import current_traceparent


@dataclass
class Scope:
    """Where a call acts: the tenant and workspace from the credential, the agent namespace it selected."""

    tenant_id: str
    workspace: str
    agent_id: str
    access: Access = "agent"
    session_id: str | None = None


@dataclass
class UnitOfWork:
    conn: asyncpg.Connection
    scope: Scope
    events: list[Event] = field(default_factory=list)
    after_commit: list[Any] = field(default_factory=list)

    def emit(self, event_type: str, payload: dict) -> None:
        self.events.append(Event(event_type, self.scope.tenant_id, self.scope.workspace, payload))


class UnitOfWorkFactory:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    def __call__(self, scope: Scope) -> _Transaction:
        return _Transaction(self.pool, scope)


class _Transaction:
    def __init__(self, pool: asyncpg.Pool, scope: Scope) -> None:
        self.pool = pool
        self.scope = scope

    async def __aenter__(self) -> UnitOfWork:
        self._conn = await self.pool.acquire()
        try:
            # BEGIN and the principal in one round trip (see rls.transaction_as)
            await self._conn.execute(
                begin_sql(
                    tenant_id=self.scope.tenant_id,
                    workspace=self.scope.workspace,
                    agent_id=self.scope.agent_id,
                    access=self.scope.access,
                )
            )
        except BaseException:
            await self.pool.release(self._conn)
            raise
        self.uow = UnitOfWork(self._conn, self.scope)
        return self.uow

    async def __aexit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is None:
                await insert_events(self._conn, self.uow.events, current_traceparent())
                await self._conn.execute("COMMIT")
            else:
                await rollback(self._conn)
        except BaseException:
            await rollback(self._conn)
            raise
        finally:
            await self.pool.release(self._conn)
        if exc_type is None:
            for callback in self.uow.after_commit:
                await callback()

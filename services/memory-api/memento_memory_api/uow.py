"""Unit of work: one tool call = one transaction, with its outbox events committed in it (or not at all)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from memento_memory_api import server_timing
from memento_shared.db.outbox import insert_sql
from memento_shared.db.rls import Access, transaction_as
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

    def emit(self, event_type: str, payload: dict[str, Any]) -> None:
        self.events.append(Event(event_type, self.scope.tenant_id, self.scope.workspace, payload))


class UnitOfWorkFactory:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    @asynccontextmanager
    async def __call__(self, scope: Scope) -> AsyncIterator[UnitOfWork]:
        principal = {
            "tenant_id": scope.tenant_id,
            "workspace": scope.workspace,
            "agent_id": scope.agent_id,
            "access": scope.access,
        }
        events: list[Event] = []

        def outbox_rows() -> str:  # sent with the COMMIT: a write costs no extra round trip for its events
            return insert_sql(events, current_traceparent())

        with server_timing.stage("pool"):  # a busy pool's wait, apart from the statements' (Server-Timing)
            pooled = await self.pool.acquire()
        try:
            conn = server_timing.TimedConnection(pooled)
            async with transaction_as(conn, **principal, commit_with=outbox_rows):
                uow = UnitOfWork(conn, scope, events)
                yield uow
        finally:
            await self.pool.release(pooled)
        for callback in uow.after_commit:  # committed: now Redis and anything else that must not see a rollback
            await callback()

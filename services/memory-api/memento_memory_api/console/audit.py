"""The console's audit trail (migration 0020): one row per action, written as the caller in its own workspace."""

from __future__ import annotations

import logging

from memento_memory_api.uow import Scope, UnitOfWorkFactory
from memento_shared.principal import Principal

log = logging.getLogger(__name__)
INSERT = (
    "INSERT INTO agent_memory.console_audit (tenant_id, workspace, actor, action, target_id, outcome)"
    " VALUES ($1, $2, $3, $4, $5, $6)"
)


async def record(uow: UnitOfWorkFactory, principal: Principal, action: str, target_id: str, outcome: str) -> None:
    scope = Scope(principal.tenant_id, principal.workspace, "admin", "admin")
    async with uow(scope) as work:
        await work.conn.execute(
            INSERT, principal.tenant_id, principal.workspace, principal.subject or "unknown", action, target_id, outcome
        )
    log.info("console.action", extra={"action": action, "outcome": outcome})  # the id and who stay in the table

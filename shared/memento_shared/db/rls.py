"""Set the row-level-security principal for the current transaction only (set_config(..., true))."""

from __future__ import annotations

from typing import Literal

import asyncpg

Access = Literal["agent", "admin", "system"]


async def set_principal(
    conn: asyncpg.Connection, *, tenant_id: str, workspace: str, agent_id: str, access: Access = "agent"
) -> None:
    await conn.execute(
        "SELECT set_config('memento.tenant_id', $1, true), set_config('memento.workspace', $2, true),"
        " set_config('memento.agent_id', $3, true), set_config('memento.access', $4, true)",
        tenant_id,
        workspace,
        agent_id,
        access,
    )


async def set_system(conn: asyncpg.Connection) -> None:
    """Workers and the relay act for every tenant; only internal code paths ever call this."""
    await set_principal(conn, tenant_id="", workspace="", agent_id="system", access="system")

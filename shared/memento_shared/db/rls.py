"""Set the row-level-security principal for the current transaction only (set_config(..., true))."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Literal

import asyncpg

Access = Literal["agent", "admin", "system"]
SETTINGS = ("memento.tenant_id", "memento.workspace", "memento.agent_id", "memento.access")


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


def literal(value: str) -> str:
    """An escape-string literal: read the same whatever standard_conforming_strings says."""
    if "\x00" in value:
        raise ValueError("an SQL literal cannot contain NUL")
    return "E'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


def begin_sql(*, tenant_id: str, workspace: str, agent_id: str, access: Access = "agent") -> str:
    values = (tenant_id, workspace, agent_id, access)
    calls = ", ".join(f"set_config('{name}', {literal(v)}, true)" for name, v in zip(SETTINGS, values, strict=True))
    return f"BEGIN; SELECT {calls}"


@asynccontextmanager
async def transaction_as(
    conn: asyncpg.Connection,
    *,
    tenant_id: str,
    workspace: str,
    agent_id: str,
    access: Access = "agent",
    commit_with: Callable[[], str] | None = None,
) -> AsyncIterator[asyncpg.Connection]:
    """A transaction acting as the principal, opened with one round trip instead of two.

    BEGIN and the set_config calls travel as one simple-protocol query (which takes no parameters, hence the
    literals). Commits on success, rolls back on any exception; `commit_with` gives the last statements, sent with
    the COMMIT in one round trip (the unit of work's outbox rows). The hot paths (every tool call, the relay) use
    this; round trips between processes are the main cost of a call on a small machine.
    """
    await conn.execute(begin_sql(tenant_id=tenant_id, workspace=workspace, agent_id=agent_id, access=access))
    try:
        yield conn
        last = commit_with() if commit_with else ""
    except BaseException:
        await _rollback(conn)
        raise
    try:
        await conn.execute(f"{last}; COMMIT" if last else "COMMIT")
    except BaseException:
        await _rollback(conn)  # the last statements failed: the server already aborted; end the transaction
        raise


async def _rollback(conn: asyncpg.Connection) -> None:
    try:
        await conn.execute("ROLLBACK")
    except Exception:  # the connection broke: the pool terminates it on release, and the server rolls back
        pass


def system_transaction(conn: asyncpg.Connection) -> AsyncIterator[asyncpg.Connection]:
    return transaction_as(conn, tenant_id="", workspace="", agent_id="system", access="system")

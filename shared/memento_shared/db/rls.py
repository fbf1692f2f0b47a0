"""Enter the row-level-security principal for the current transaction only.

agent_memory.enter() (migration 0021) sets the principal's settings and seals them to the transaction: after a later
set_config of any of them, or with a seal from another transaction, the next query under a policy fails (SQLSTATE
42501), and a second enter() in the same transaction is refused. So enter() is the transaction's first statement,
and the only way to set a principal.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Literal

import asyncpg

Access = Literal["agent", "admin", "system"]


async def set_principal(
    conn: asyncpg.Connection, *, tenant_id: str, workspace: str, agent_id: str, access: Access = "agent"
) -> None:
    await conn.execute(
        "SELECT agent_memory.enter($1, $2, $3, $4)",
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
    values = ", ".join(literal(v) for v in (tenant_id, workspace, agent_id, access))
    return f"BEGIN; SELECT agent_memory.enter({values})"


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

    BEGIN and enter() travel as one simple-protocol query (which takes no parameters, hence the
    literals). Commits on success, rolls back on any exception; `commit_with` gives the last statements, sent with
    the COMMIT in one round trip (the unit of work's outbox rows). The hot paths (every tool call, the relay) use
    this; round trips between processes are the main cost of a call on a small machine.
    """
    try:
        await conn.execute(begin_sql(tenant_id=tenant_id, workspace=workspace, agent_id=agent_id, access=access))
    except BaseException:
        await _rollback(conn)  # enter() refused the principal: end the transaction BEGIN opened
        raise
    try:
        yield conn
        last = commit_with() if commit_with else ""
    except BaseException:
        await _rollback(conn)
        raise
    try:
        await conn.execute(f"{last}; COMMIT" if last else "COMMIT")
    except _CONNECTION_LOST as exc:
        await _rollback(conn)
        raise CommitOutcomeUnknown("the connection was lost during COMMIT") from exc
    except BaseException:
        await _rollback(conn)  # the last statements failed: the server already aborted; end the transaction
        raise


class CommitOutcomeUnknown(Exception):
    """The connection broke while COMMIT was under way: the transaction may or may not have been committed, so a
    caller must not say "nothing was changed" (nor that it was)."""


# failures of the connection rather than of the statements: after them nobody here knows whether COMMIT took effect
_CONNECTION_LOST = (asyncpg.PostgresConnectionError, asyncpg.AdminShutdownError, asyncpg.InterfaceError, OSError,
                    TimeoutError)  # fmt: skip


async def _rollback(conn: asyncpg.Connection) -> None:
    try:
        await conn.execute("ROLLBACK")
    except Exception:  # the connection broke: the pool terminates it on release, and the server rolls back
        pass


def system_transaction(conn: asyncpg.Connection) -> AbstractAsyncContextManager[asyncpg.Connection]:
    return transaction_as(conn, tenant_id="", workspace="", agent_id="system", access="system")

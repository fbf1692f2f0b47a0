"""A connection lost while COMMIT is under way leaves the outcome unknown: transaction_as says so
(CommitOutcomeUnknown) instead of passing on an error the callers would read as "nothing was changed". A COMMIT the
server refuses (a deferred check failing) is still that error: it certainly changed nothing. Real PostgreSQL: a
deferred trigger makes COMMIT slow, and another connection terminates the backend meanwhile."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from memento_shared.db.rls import CommitOutcomeUnknown, transaction_as

PRINCIPAL = {"tenant_id": "t-commit", "workspace": "default", "agent_id": "a"}


async def deferred(conn: asyncpg.Connection, body: str) -> None:
    """A temp table whose insert runs `body` at COMMIT (a deferred constraint trigger)."""
    await conn.execute("CREATE TEMP TABLE commit_probe (x int)")
    await conn.execute(f"CREATE FUNCTION pg_temp.at_commit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN {body}; "
                       "RETURN NULL; END $$")  # fmt: skip
    await conn.execute(
        "CREATE CONSTRAINT TRIGGER at_commit AFTER INSERT ON commit_probe DEFERRABLE INITIALLY DEFERRED"
        " FOR EACH ROW EXECUTE FUNCTION pg_temp.at_commit()"
    )
    await conn.execute("INSERT INTO commit_probe VALUES (1)")


async def terminate_when_committing(owner: asyncpg.Pool, pid: int) -> None:
    for _ in range(200):
        waiting = await owner.fetchval(
            "SELECT wait_event = 'PgSleep' FROM pg_stat_activity WHERE pid = $1 AND query LIKE '%COMMIT%'", pid
        )
        if waiting:
            await owner.execute("SELECT pg_terminate_backend($1)", pid)
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the backend never reached its slow COMMIT")


async def test_a_connection_lost_during_commit_is_an_unknown_outcome(servers, owner_pool):
    conn = await asyncpg.connect(servers.owner_url)
    try:
        pid = conn.get_server_pid()
        killer = asyncio.create_task(terminate_when_committing(owner_pool, pid))
        with pytest.raises(CommitOutcomeUnknown):
            async with transaction_as(conn, **PRINCIPAL):
                await deferred(conn, "PERFORM pg_sleep(30)")
        await killer
    finally:
        await conn.close()


async def test_a_commit_the_server_refuses_stays_that_error(servers):
    conn = await asyncpg.connect(servers.owner_url)
    try:
        with pytest.raises(asyncpg.RaiseError):
            async with transaction_as(conn, **PRINCIPAL):
                await deferred(conn, "RAISE EXCEPTION 'refused at commit'")
        assert await conn.fetchval("SELECT 1") == 1  # the connection is still good and out of the transaction
    finally:
        await conn.close()

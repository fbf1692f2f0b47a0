"""recall's order without `text` (seed 000 §4.4): newest first while the caller's store holds at most
MEMORY_CONFIG.ranking.activationThreshold fragments, composite rank with the configured weights above it; L1's
scores follow the same weights, and a change of weights rebuilds L1 once (with the newest replica's weights when
replicas of two configurations run side by side)."""

from __future__ import annotations

import asyncio
import json

import pytest

from memento_memory_api.recall import l1
from memento_memory_api.recall.l1 import begin_generation, mark_ready
from memento_shared import l1 as layout
from tests.fixtures.apps import memory_api_on
from tests.fixtures.own_redis import own_redis
from tests.fixtures.waiting import eventually

# stored oldest first: the most important is the oldest, the least important the newest
NOTES = [("kafka lag runbook lives in the wiki", 0.9), ("kafka brokers run 3.7", 0.2), ("kafka topic owners", 0.5)]


async def store(own) -> list[str]:
    ids = []
    for content, importance in NOTES:
        answer = await own.call(
            "remember",
            {"content": content, "topic": "kafka", "type": "fact", "keywords": ["kafka"], "importance": importance},
        )
        ids.append(answer["result"]["id"])
        await asyncio.sleep(0.01)  # distinct creation times
    return ids


async def orders(own) -> dict[str, list[str]]:
    by_keyword = await own.call("recall", {"keywords": ["kafka"], "includeLinks": False})
    by_topic = await own.call("recall", {"topic": "kafka", "includeLinks": False})
    return {
        "keywords": [f["id"] for f in by_keyword["result"]["fragments"]],
        "topic": [f["id"] for f in by_topic["result"]["fragments"]],
    }


async def test_a_small_store_answers_newest_first(servers, tmp_path):
    async with own_redis(servers, tmp_path / "valkey") as own:
        oldest, middle, newest = await store(own)
        assert await orders(own) == {"keywords": [newest, middle, oldest], "topic": [newest, middle, oldest]}


async def test_above_the_threshold_the_configured_weights_rank(servers, tmp_path):
    config = {"ranking": {"importanceWeight": 1.0, "recencyWeight": 0.0, "activationThreshold": 2}}
    async with own_redis(servers, tmp_path / "valkey", MEMORY_CONFIG=json.dumps(config)) as own:
        oldest, middle, newest = await store(own)
        # importance alone: 0.9 (oldest), 0.5 (newest), 0.2 (middle)
        assert await orders(own) == {"keywords": [oldest, newest, middle], "topic": [oldest, newest, middle]}
        redis = own.app.state.l1_redis
        key = layout.key(own.tenant, "default", "default", "kafka")
        assert await redis.zscore(key, oldest) == pytest.approx(0.9), "L1 scores with the configured weights"
        assert (await redis.get(layout.READY_KEY)).decode() == layout.ready_value((1.0, 0.0))


async def test_changed_weights_rebuild_l1_once_at_start(servers, tmp_path):
    async with own_redis(servers, tmp_path / "valkey") as own:
        oldest, _, _ = await store(own)
        key = layout.key(own.tenant, "default", "default", "kafka")
        assert await own.app.state.l1_redis.zscore(key, oldest) > 100, "default weights: recency (months) dominates"
    # the same Valkey (its data kept on disk) under a memory-api configured with other weights
    config = {"ranking": {"importanceWeight": 1.0, "recencyWeight": 0.0}}
    async with own_redis(servers, tmp_path / "valkey", MEMORY_CONFIG=json.dumps(config)) as again:
        redis = again.app.state.l1_redis
        # the keeper's first pass rebuilds (usually before start returns)

        async def ready_under_new_weights():
            marker = await redis.get(layout.READY_KEY)
            return marker is not None and marker.decode() == layout.ready_value((1.0, 0.0))

        await eventually(ready_under_new_weights, 10, "the rebuild under the new weights")
        assert await redis.zscore(key, oldest) == pytest.approx(0.9, abs=1e-6)  # importance is a float4
        generation = await redis.get(layout.GENERATION_KEY)
    # once: a later start under the same weights keeps the marker (no invalidation, no rebuild)
    async with own_redis(servers, tmp_path / "valkey", MEMORY_CONFIG=json.dumps(config)) as third:
        redis = third.app.state.l1_redis
        assert await redis.get(layout.GENERATION_KEY) == generation
        assert (await redis.get(layout.READY_KEY)).decode() == layout.ready_value((1.0, 0.0))


async def test_replicas_of_two_configurations_keep_l1_scored_with_the_newer_ones_weights(
    servers, tmp_path, monkeypatch
):
    """A rolling update or a canary: an older replica must not rebuild L1 with its weights while a newer one runs,
    or L1 would keep them after the update; the newer one gets its claim back after a lapse, and once every newer
    replica is gone the older one takes over."""
    newer_weights = layout.ready_value((1.0, 0.0))
    older_weights = layout.ready_value(layout.DEFAULT_WEIGHTS)
    config = {"ranking": {"importanceWeight": 1.0, "recencyWeight": 0.0}}
    async with own_redis(servers, tmp_path / "valkey") as older:
        await store(older)
        redis = older.app.state.l1_redis

        async def marker() -> str | None:
            value = await redis.get(layout.READY_KEY)
            return value.decode() if value is not None else None

        async with memory_api_on(servers.settings(REDIS_URL=older.valkey.url, MEMORY_CONFIG=json.dumps(config))) as api:

            async def built_with_newer_weights() -> bool:
                return await marker() == newer_weights

            await eventually(built_with_newer_weights, 10, "L1 rebuilt with the newer weights")
            older_keeper, newer_keeper = older.app.state.l1_keeper, api.app.state.l1_keeper
            await older_keeper.stop()  # from here each keeper's passes run by hand
            await newer_keeper.stop()

            await layout.invalidate(redis)  # L1 lost while both run
            await older_keeper.check()
            assert await marker() is None, "the older configuration left the rebuild to the newer one"
            written = await older.call(
                "remember",
                {"content": "kafka acls", "topic": "kafka", "type": "fact", "keywords": ["kafka"], "importance": 0.7},
            )
            kafka = layout.key(older.tenant, "default", "default", "kafka")
            # the older replica's writes score with the wanted weights (importance alone), among the rebuilt ones
            assert await redis.zscore(kafka, written["result"]["id"]) == pytest.approx(0.7, abs=1e-6)
            await newer_keeper.check()
            assert await marker() == newer_weights
            assert 0 < await redis.ttl(layout.WANTED_KEY) <= newer_keeper.claim_ttl_s, "each pass renews the claim"

            # a rebuild with the older weights that was already running cannot mark L1 ready when it ends
            generation = await begin_generation(redis)
            assert not await mark_ready(redis, generation, layout.DEFAULT_WEIGHTS)
            # and stops at its next batch, rather than hold the rebuild lock for minutes at a million fragments
            batches = []

            async def still_wanted() -> bool:
                batches.append(1)
                return await older_keeper._claim_weights()

            monkeypatch.setattr(l1, "REBUILD_BATCH", 1)  # one row per batch: the store holds several
            await layout.invalidate(redis)
            assert not await l1.ensure_ready(redis, older.app.state.pool, layout.DEFAULT_WEIGHTS, still_wanted)
            assert batches == [1] and not await redis.exists(layout.REBUILD_LOCK)
            monkeypatch.undo()
            await newer_keeper.check()
            assert await marker() == newer_weights

            # a claim this version cannot read is dropped, not fatal to the keeper
            await redis.hset(layout.WANTED_KEY, mapping={"weights": "1:2:3", "started": "9e18"})
            assert not await older_keeper.check()
            assert not await redis.exists(layout.WANTED_KEY)
            await newer_keeper.check()
            assert await redis.hget(layout.WANTED_KEY, "weights") == newer_weights.encode()

            # the claim lapses (Redis flushed, or away longer than its lifetime): whoever passes first takes it, and
            # the newer replica takes it back
            await redis.delete(layout.WANTED_KEY)
            await older_keeper.check()
            assert await marker() == older_weights
            await newer_keeper.check()
            assert await marker() == newer_weights
            await older_keeper.check()
            assert await marker() == newer_weights

        await redis.delete(layout.WANTED_KEY)  # the newer replica is gone: its claim lapses (it renews no more)
        await older_keeper.check()
        assert await marker() == older_weights, "the remaining replica rebuilt L1 with its weights"

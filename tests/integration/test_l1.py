"""L1 stays honest: rebuilt from Postgres after Redis loses its data, skipped when Redis is down (§9.1), and never
a way to read across agents."""

from __future__ import annotations

from memento_memory_api.recall.l1 import begin_generation, ensure_ready, mark_ready
from memento_shared import l1 as layout
from tests.fixtures.own_redis import own_redis
from tests.fixtures.waiting import eventually


async def test_flushed_redis_is_rebuilt_from_postgres(memory_api, tenant, redis_client, app_pool):
    stored = await memory_api.call(
        "remember", {"content": "rebuild me", "topic": "t", "type": "fact", "keywords": ["rebuild"]}, tenant=tenant
    )
    frag_id = stored["result"]["id"]
    await redis_client.flushdb()
    during = await memory_api.call("recall", {"keywords": ["rebuild"]}, tenant=tenant)
    assert [(f["id"], f["tier"]) for f in during["result"]["fragments"]] == [(frag_id, "L2")]  # L1 skipped, not wrong
    await redis_client.set("memento:l1:ready", "1")  # as a replica of the old layout would leave it mid-upgrade
    assert await ensure_ready(memory_api.app.state.l1_redis, app_pool) is True
    assert not await redis_client.exists("memento:l1:ready"), "old replicas must not trust sets being rebuilt"
    after = await memory_api.call("recall", {"keywords": ["rebuild"]}, tenant=tenant)
    assert [(f["id"], f["tier"]) for f in after["result"]["fragments"]] == [(frag_id, "L1")]


async def test_the_rebuild_indexes_every_row_across_batches(memory_api, tenant, redis_client, app_pool, monkeypatch):
    from memento_memory_api.recall import l1

    ids = set()
    for i in range(5):
        stored = await memory_api.call(
            "remember",
            {"content": f"batched rebuild {i}", "topic": "t", "type": "fact", "keywords": ["batched"]},
            tenant=tenant,
        )
        ids.add(stored["result"]["id"])
    await redis_client.flushdb()
    monkeypatch.setattr(l1, "REBUILD_BATCH", 2)  # several batches, and a last partial one
    assert await ensure_ready(memory_api.app.state.l1_redis, app_pool) is True
    after = await memory_api.call("recall", {"keywords": ["batched"]}, tenant=tenant)
    assert {f["id"] for f in after["result"]["fragments"] if f["tier"] == "L1"} == ids


async def test_a_foreign_id_planted_in_l1_never_surfaces(memory_api, tenant, redis_client):
    alice = await memory_api.call(
        "remember",
        {"content": "alice's secret", "topic": "t", "type": "fact", "keywords": ["secret"], "agentId": "alice"},
        tenant=tenant,
    )
    await redis_client.zadd(layout.key(tenant, "default", "bob", "secret"), {alice["result"]["id"]: 1e9})
    await redis_client.zadd(layout.key(tenant, "default", "default", "secret"), {alice["result"]["id"]: 1e9})
    bob = await memory_api.call("recall", {"keywords": ["secret"], "agentId": "bob"}, tenant=tenant)
    assert bob["result"]["fragments"] == []
    other_tenant = await memory_api.call("recall", {"keywords": ["secret"]}, tenant=tenant + "-b")
    assert other_tenant["result"]["fragments"] == []


async def test_an_agent_id_with_a_colon_has_keyword_sets_of_its_own(memory_api, tenant):
    """Agent `a` with keyword `b:c` and agent `a:b` with keyword `c` would name the same set unescaped: `a`'s ids would
    take the top places `a:b` reads, and a ready L1 with one keyword is trusted as complete."""
    for i in range(60):
        await memory_api.call(
            "remember",
            {
                "content": f"noise {i}",
                "topic": "t",
                "type": "fact",
                "keywords": ["b:c"],
                "agentId": "a",
                "importance": 0.9,
            },
            tenant=tenant,
        )
    mine = await memory_api.call(
        "remember",
        {"content": "mine", "topic": "t", "type": "fact", "keywords": ["c"], "agentId": "a:b"},
        tenant=tenant,
    )
    found = await memory_api.call("recall", {"keywords": ["c"], "agentId": "a:b"}, tenant=tenant)
    # from L1 itself: an L2 answer would pass whatever the keys were
    assert [(f["id"], f["tier"]) for f in found["result"]["fragments"]] == [(mine["result"]["id"], "L1")]
    assert layout.key(tenant, "default", "a", "b:c") != layout.key(tenant, "default", "a:b", "c")


async def test_recall_and_remember_work_with_redis_stopped(servers, tmp_path):
    async with own_redis(servers, tmp_path / "valkey") as own:
        own.valkey.stop()
        stored = await own.call(
            "remember", {"content": "written without redis", "topic": "t", "type": "fact", "keywords": ["offline"]}
        )
        assert stored["result"]["created"] is True
        found = await own.call("recall", {"keywords": ["offline"]})
        assert [(f["id"], f["tier"]) for f in found["result"]["fragments"]] == [(stored["result"]["id"], "L2")]
        by_text = await own.call("recall", {"text": "written without redis"})
        assert stored["result"]["id"] in [f["id"] for f in by_text["result"]["fragments"]]
        health = await own.client.get("/health")
        assert health.status_code == 200 and health.json()["redis"] == "down"


async def test_a_write_lost_while_redis_was_down_does_not_hide_the_fragment(servers, tmp_path):
    """Redis comes back from its append-only file with the ready marker, but without the fragment stored while it was
    down: one-keyword recall trusts a ready L1 as complete, so L1 must not be read until it is rebuilt."""
    async with own_redis(servers, tmp_path / "valkey") as own:
        app = own.app

        async def call(tool, arguments):
            return (await own.call(tool, arguments))["result"]

        def remember(content):
            return call("remember", {"content": content, "topic": "t", "type": "fact", "keywords": ["lost"]})

        before = (await remember("indexed while redis was up"))["id"]
        own.valkey.stop()
        during = (await remember("stored while redis was down"))["id"]
        own.restart(tmp_path / "valkey")
        assert await app.state.l1_redis.exists(layout.READY_KEY)  # the marker survived the restart
        found = await call("recall", {"keywords": ["lost"]})
        assert {f["id"] for f in found["fragments"]} == {before, during}
        # the keeper drops the marker once Redis answers, then rebuilds L1 from Postgres, lost write included
        await eventually(own.l1_rebuilt, 60, "the keeper to rebuild L1")
        rebuilt = await call("recall", {"keywords": ["lost"]})
        assert {(f["id"], f["tier"]) for f in rebuilt["fragments"]} == {(before, "L1"), (during, "L1")}


async def test_a_removal_lost_while_redis_was_down_is_gone_after_the_rebuild(servers, tmp_path):
    """An amend that drops a keyword while Redis is down leaves the id in that keyword's set; a rebuild that only
    added would keep it, and a one-keyword recall (which trusts a ready L1 as complete) would answer with it."""
    async with own_redis(servers, tmp_path / "valkey") as own:
        args = {"content": "the queue drains at night", "topic": "t", "type": "fact", "keywords": ["queue", "night"]}
        frag_id = (await own.call("remember", args))["result"]["id"]
        own.valkey.stop()
        amended = await own.call("amend", {"id": frag_id, "keywords": ["queue"]})
        assert amended["result"]["success"] is True
        own.restart(tmp_path / "valkey")
        redis = own.app.state.l1_redis
        assert await redis.zscore(layout.key(own.tenant, "default", "default", "night"), frag_id) is not None
        await eventually(own.l1_rebuilt, 60, "the keeper to rebuild L1")
        assert await redis.zscore(layout.key(own.tenant, "default", "default", "night"), frag_id) is None
        assert (await own.call("recall", {"keywords": ["night"]}))["result"]["fragments"] == []
        by_queue = (await own.call("recall", {"keywords": ["queue"]}))["result"]["fragments"]
        assert [(f["id"], f["tier"]) for f in by_queue] == [(frag_id, "L1")]


async def test_a_rebuild_invalidated_while_it_ran_does_not_mark_l1_ready(redis_client):
    """A replica drops the marker (a write it lost) while another replica's rebuild, whose snapshot may predate
    that write, is still running: that rebuild must not make L1 trusted again."""
    generation = await begin_generation(redis_client)
    await layout.invalidate(redis_client)
    assert not await mark_ready(redis_client, generation, layout.DEFAULT_WEIGHTS)
    assert not await redis_client.exists(layout.READY_KEY)
    assert await mark_ready(redis_client, await begin_generation(redis_client), layout.DEFAULT_WEIGHTS)
    assert await redis_client.exists(layout.READY_KEY)


async def test_of_two_overlapping_rebuilds_only_the_later_marks_l1_ready(redis_client):
    """The rebuild lock expires under a very long rebuild: a second one clears the sets the first is filling, so
    the first must not mark them ready when it ends."""
    await redis_client.delete(layout.READY_KEY)
    first = await begin_generation(redis_client)
    second = await begin_generation(redis_client)
    assert not await mark_ready(redis_client, first, layout.DEFAULT_WEIGHTS)
    assert not await redis_client.exists(layout.READY_KEY)
    assert await mark_ready(redis_client, second, layout.DEFAULT_WEIGHTS)


async def test_a_write_lost_during_an_invalidation_keeps_l1_out_of_step(redis_client, app_pool, monkeypatch):
    """The lost write may have committed after the invalidation reached Redis, so a rebuild begun in between could
    miss it: the keeper stays out of step (and invalidates again on its next pass)."""
    from memento_memory_api.recall.l1 import L1Keeper

    keeper = L1Keeper(redis_client, app_pool)
    real = layout.invalidate

    async def invalidate_while_a_write_fails(redis) -> bool:
        done = await real(redis)
        keeper.write_failed()  # reported before the invalidation's answer arrives
        return done

    keeper.write_failed()
    monkeypatch.setattr(layout, "invalidate", invalidate_while_a_write_fails)
    await keeper._invalidate()
    assert keeper.out_of_step
    monkeypatch.setattr(layout, "invalidate", real)
    await keeper._invalidate()
    assert not keeper.out_of_step


async def test_writes_skip_l1_only_while_redis_is_away(redis_client, app_pool, monkeypatch):
    """After a lost write, later writes skip Redis (counted as lost) until a marker drop succeeds; from then on they
    are tried, so a write skipped while that drop was on its way asks for one more drop, not for one after each."""
    from types import SimpleNamespace

    from memento_memory_api.context import ToolContext
    from memento_memory_api.recall.l1 import L1Keeper

    keeper = L1Keeper(redis_client, app_pool)
    ctx = SimpleNamespace(l1=keeper, redis=redis_client)
    keeper.write_failed()
    assert ToolContext.l1_for_write(ctx) is None, "Redis failed the last write: the next one does not wait for it"
    real = layout.invalidate

    async def invalidate_while_a_write_is_skipped(redis) -> bool:
        done = await real(redis)
        assert ToolContext.l1_for_write(ctx) is None  # skipped: the drop's answer has not arrived
        return done

    monkeypatch.setattr(layout, "invalidate", invalidate_while_a_write_is_skipped)
    await keeper._invalidate()
    assert keeper.out_of_step and not keeper.redis_away, "one more drop is owed, and Redis answers"
    assert ToolContext.l1_for_write(ctx) is redis_client, "writes are tried again"
    monkeypatch.setattr(layout, "invalidate", real)
    await keeper._invalidate()
    assert not keeper.out_of_step

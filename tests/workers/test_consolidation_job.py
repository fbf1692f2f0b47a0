"""The consolidator as memory-api uses it: the `consolidate` arq job awaited for its result, runs of one tenant
serialised by the advisory lock, writes continuing during a run, the schedule, and `consolidation.requested`."""

from __future__ import annotations

import asyncio
import logging
import uuid

import pytest

from memento_consolidator import jobs, runner, schedule
from memento_consolidator.handlers import HANDLERS
from memento_consolidator.runner import tenant_lock
from memento_memory_api.uow import Scope, UnitOfWorkFactory
from memento_shared import progress
from memento_shared.consolidation import JOB_NAME, STAGES, progress_key
from memento_shared.events import queue_key
from memento_shared.worker import close_runtime, create_queue_pool, open_runtime
from tests.fixtures.waiting import eventually
from tests.workers.conftest import hosted_worker, running_relay, store_fragments
from tests.workers.test_consolidation_stages import craft


def consolidator(settings, max_jobs: int = 4):
    return hosted_worker("consolidator", HANDLERS, settings, functions=jobs.functions(60), max_jobs=max_jobs)


async def test_consolidate_job_returns_the_ten_counts_while_writes_continue(wenv, tenant):
    o = wenv.owner
    await craft(o, tenant, tier="hot", age_days=10)
    await craft(o, tenant, tier="warm", age_days=45)
    await craft(o, tenant, tier="cold", kind="procedure", age_days=45)
    await craft(o, tenant, content="Rotate the API key monthly.", age_days=2)
    await craft(o, tenant, content="rotate the api key  monthly.", age_days=1)
    first, second = await craft(o, tenant), await craft(o, tenant)
    await o.execute(
        "INSERT INTO agent_memory.fragment_links (tenant_id, workspace, from_id, to_id, relation_type)"
        " VALUES ($1, 'default', $2, $3, 'contradicts')",
        tenant,
        first,
        second,
    )
    settings = wenv.settings(CONSOLIDATION_BATCH_SIZE="5")
    queue = await create_queue_pool(settings)
    try:
        async with consolidator(settings):
            writer = asyncio.create_task(
                store_fragments(wenv.app, tenant, [f"written meanwhile {i}" for i in range(40)])
            )
            job = await queue.enqueue_job(JOB_NAME, tenant, "default", _queue_name=queue_key("consolidator"))
            result = await job.result(timeout=60)
            written = await writer
        progress = await queue.hgetall(progress_key(tenant, "default"))
    finally:
        await queue.aclose()

    assert list(result["stages"]) == list(STAGES)
    counts = result["stages"]
    assert (counts["hot_to_warm"], counts["warm_to_cold"], counts["cold_expiration"]) == (1, 1, 1)
    assert counts["deduplication"] == 1 and counts["contradiction_detection"] == 1
    assert counts["statistics"] == result["stats"]["fragments"] >= 6
    assert result["contradictions"] == [{"kind": "linked", "from_id": first, "to_id": second, "topic": "ops"}]
    assert isinstance(result["duration_ms"], int)
    assert {k.decode(): v.decode() for k, v in progress.items()} == {"stage": "done", "done": "10", "total": "10"}
    assert await o.fetchval("SELECT count(*) FROM agent_memory.fragments WHERE id = ANY($1)", written) == 40
    run = await o.fetchrow(
        "SELECT trigger, finished_at, result FROM agent_memory.consolidation_runs WHERE tenant_id = $1", tenant
    )
    assert run["trigger"] == "on_demand" and run["finished_at"] is not None


async def test_runs_of_one_tenant_never_overlap(wenv, tenant):
    await craft(wenv.owner, tenant)
    settings = wenv.settings(CONSOLIDATION_LOCK_TIMEOUT_SECONDS="0.3")
    queue = await create_queue_pool(settings)
    try:
        async with consolidator(settings):
            async with tenant_lock(wenv.app, tenant, wait_s=None):  # a run elsewhere holds the tenant
                busy = await queue.enqueue_job(JOB_NAME, tenant, "default", _queue_name=queue_key("consolidator"))
                with pytest.raises(Exception, match=f"a consolidation of tenant {tenant} is running"):
                    await busy.result(timeout=30)
        # the second of two runs waits for the first: a wait long enough for a run on a loaded machine (at 0.3 s the
        # second gave up while the first still ran, whenever the suite shared the cores)
        async with consolidator(wenv.settings(CONSOLIDATION_LOCK_TIMEOUT_SECONDS="30")):
            both = [
                await queue.enqueue_job(JOB_NAME, tenant, "default", _queue_name=queue_key("consolidator"))
                for _ in range(2)
            ]
            await asyncio.gather(*(job.result(timeout=30) for job in both))
    finally:
        await queue.aclose()
    runs = await wenv.owner.fetch(
        "SELECT started_at, finished_at FROM agent_memory.consolidation_runs WHERE tenant_id = $1"
        " AND finished_at IS NOT NULL ORDER BY started_at",
        tenant,
    )
    assert len(runs) == 2 and runs[0]["finished_at"] <= runs[1]["started_at"], "the second waited for the first"


async def test_a_call_waiting_for_the_tenant_lock_says_so_on_its_progress_channel(wenv, tenant):
    """memory_consolidate relays its channel as notifications/progress: without this, a call queued behind another
    run of the tenant heard nothing between its start and the end of its first stage."""
    await craft(wenv.owner, tenant)
    settings = wenv.settings(CONSOLIDATION_LOCK_TIMEOUT_SECONDS="60")
    queue = await create_queue_pool(settings)
    channel = uuid.uuid4().hex
    try:
        async with consolidator(settings):
            async with tenant_lock(wenv.app, tenant, wait_s=None):  # a run elsewhere holds the tenant
                job = await queue.enqueue_job(
                    JOB_NAME, tenant, "default", progress_id=channel, _queue_name=queue_key("consolidator")
                )
                done, total, message = await eventually(
                    lambda: progress.read(queue, tenant, channel), 30, "the waiting call's report"
                )
                assert (done, total) == (0.5, len(STAGES)) and message.startswith("waiting for the consolidation")
            result = await job.result(timeout=60)
        assert list(result["stages"]) == list(STAGES)
        assert (await progress.read(queue, tenant, channel))[:2] == (len(STAGES), len(STAGES))
    finally:
        await queue.aclose()


def test_the_schedule_is_read_from_consolidation_cron():
    assert schedule.parse("30 3 * * *") == {"minute": {30}, "hour": {3}, "day": None, "month": None, "weekday": None}
    assert schedule.parse("*/20 */6 1-3 * 0,6")["minute"] == {0, 20, 40}
    assert schedule.parse("*/20 */6 1-3 * 0,6")["weekday"] == {6, 5}, "cron's Sunday=0 is arq's 6"
    assert schedule.cron_jobs("", jobs.consolidate_all, 60) == []
    [job] = schedule.cron_jobs("0 4 * * *", jobs.consolidate_all, 60)
    assert (job.name, job.unique, job.hour, job.minute) == ("consolidate_all", True, {4}, {0})
    with pytest.raises(ValueError):
        schedule.parse("61 * * * *")


async def test_the_scheduled_run_covers_each_tenant_and_skips_a_busy_one(wenv, tenant):
    other = tenant + "-b"
    await craft(wenv.owner, tenant, tier="hot", age_days=30)
    await craft(wenv.owner, other, tier="hot", age_days=30)
    rt = await open_runtime("consolidator", wenv.settings(), 2)
    try:
        async with tenant_lock(wenv.app, other, wait_s=None):
            summary = await jobs.consolidate_all({"runtime": rt})
    finally:
        await close_runtime(rt)
    assert summary["skipped_busy"] >= 1
    runs = {
        r["tenant_id"]: r["trigger"]
        for r in await wenv.owner.fetch(
            "SELECT tenant_id, trigger FROM agent_memory.consolidation_runs WHERE tenant_id = ANY($1)", [tenant, other]
        )
    }
    assert runs == {tenant: "cron"}


async def test_a_failing_scope_does_not_stop_the_scheduled_run(wenv, tenant, monkeypatch, caplog):
    tenants = [tenant, tenant + "-b", tenant + "-c"]
    for t in tenants:
        await craft(wenv.owner, t, content=f"the staging password is hunter2 ({t})")
    failed: list[str] = []

    async def first_scope_fails(ctx):  # whichever scope the sweep takes first, so every other comes after it
        if not failed:
            failed.append(ctx.tenant_id)
            raise RuntimeError("boom: the staging password is hunter2")
        return 0

    pipeline = [(name, first_scope_fails if name == "deduplication" else stage) for name, stage in runner.PIPELINE]
    monkeypatch.setattr(runner, "PIPELINE", pipeline)
    caplog.set_level(logging.WARNING, logger=jobs.__name__)
    rt = await open_runtime("consolidator", wenv.settings(), 2)
    try:
        summary = await jobs.consolidate_all({"runtime": rt})
    finally:
        await close_runtime(rt)

    assert len(failed) == 1 and summary["failed"] == 1 and summary["scopes"] >= len(set(tenants) - set(failed))
    finished = {
        r["tenant_id"]
        for r in await wenv.owner.fetch(
            "SELECT tenant_id FROM agent_memory.consolidation_runs WHERE tenant_id = ANY($1) AND trigger = 'cron'"
            " AND finished_at IS NOT NULL",
            tenants,
        )
    }
    assert finished == set(tenants) - set(failed), "every scope after the failed one still ran"
    [record] = [r for r in caplog.records if r.getMessage() == "consolidation.scope_failed"]
    assert (record.tenant_id, record.workspace, record.error_type) == (failed[0], "default", "RuntimeError")
    assert record.exc_info is None
    assert not any("hunter2" in str(r.__dict__) for r in caplog.records), "no content or error text in the logs"


async def test_consolidation_requested_through_the_outbox(wenv, tenant):
    settings = wenv.settings()
    async with consolidator(settings), running_relay(settings):
        async with UnitOfWorkFactory(wenv.app)(Scope(tenant, "default", "default")) as uow:
            uow.emit("consolidation.requested", {})
        await eventually(
            lambda: wenv.owner.fetchval(
                "SELECT finished_at IS NOT NULL FROM agent_memory.consolidation_runs WHERE tenant_id = $1", tenant
            ),
            20,
            "the requested run",
        )

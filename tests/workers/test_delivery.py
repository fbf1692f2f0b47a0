"""Delivery through the outbox, the relay and the shared worker runtime on real Postgres and Valkey: retries with
backoff, dead letters with their error, `memento-admin dead-letters`, polling without LISTEN, the metrics, and
graceful shutdown returning in-flight jobs to the queue."""

from __future__ import annotations

import asyncio
import json
import time
import uuid

import httpx
import redis.asyncio as aioredis
from arq.constants import in_progress_key_prefix, job_key_prefix
from prometheus_client.parser import text_string_to_metric_families

from memento_devtools.embedded import free_port
from memento_memory_api import outbox_relay
from memento_memory_api.outbox_relay import Relay
from memento_shared.db import dead_letters
from memento_shared.db.pool import create_pool
from memento_shared.db.rls import set_system
from memento_shared.enqueue import JobSpec, add_jobs
from memento_shared.events import envelope, job_id, queue_key
from memento_shared.telemetry.metrics import REGISTRY
from memento_shared.worker import CLAIM_JOB, create_queue_pool
from tests.fixtures.waiting import eventually, truthy
from tests.workers.conftest import admin_cli, hosted_worker, running_relay, store_fragments


def _sample(text: str, name: str, **labels: str) -> float:
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value
    return 0.0


async def test_failing_event_retries_with_backoff_then_dead_letters_and_replays(wenv, tenant):
    settings = wenv.settings(WORKER_MAX_TRIES="3", WORKER_BACKOFF_BASE_SECONDS="0.2")
    calls: list[float] = []
    failing = {"on": True}

    async def flaky(event: dict, rt) -> None:
        calls.append(time.monotonic())
        if failing["on"]:
            raise RuntimeError("scorer exploded")

    port = free_port()
    async with (
        hosted_worker("evaluator", {"fragment.stored": flaky}, settings, port=port) as host,
        running_relay(settings),
    ):
        metrics_url = f"http://127.0.0.1:{port}/metrics"
        async with httpx.AsyncClient() as http:
            before = (await http.get(metrics_url)).text
        [frag_id] = await store_fragments(wenv.app, tenant, ["a fact the evaluator cannot score"])

        async def dead_letter():
            return await wenv.owner.fetchrow(
                "SELECT id, error, attempts, queue, replayed_at FROM agent_memory.dead_letters WHERE tenant_id = $1",
                tenant,
            )

        row = await eventually(dead_letter, 20, "the event to be dead-lettered")
        assert row["queue"] == "evaluator" and row["attempts"] == 3
        assert row["error"] == "RuntimeError: scorer exploded"
        assert len(calls) == 3
        assert calls[1] - calls[0] >= 0.2 and calls[2] - calls[1] >= 0.4, "backoff doubles from the base"

        async with httpx.AsyncClient() as http:
            after = (await http.get(metrics_url)).text
            assert (await http.get(f"http://127.0.0.1:{port}/livez")).status_code == 200
        name = "memento_event_processing_seconds_count"
        for status, expected in (("retry", 2), ("dead_letter", 1)):
            delta = _sample(after, name, event_type="fragment.stored", status=status) - _sample(
                before, name, event_type="fragment.stored", status=status
            )
            assert delta == expected, status

        code, listing = await admin_cli(wenv, "dead-letters", "list", "--queue", "evaluator")
        assert code == 0 and f"{row['id']:>6}" in listing and "RuntimeError: scorer exploded" in listing
        code, shown = await admin_cli(wenv, "dead-letters", "show", str(row["id"]))
        assert code == 0 and json.loads(shown)["payload"] == {"fragment_id": frag_id}

        failing["on"] = False
        code, replayed = await admin_cli(wenv, "dead-letters", "replay", str(row["id"]))
        assert code == 0 and f"replayed 1: {row['id']}" in replayed, replayed
        await eventually(lambda: truthy(len(calls) == 4), 10, "the replayed event to run")
        assert host.worker.jobs_complete >= 2
        replayed_row = await dead_letter()
        assert replayed_row["replayed_at"] is not None
        code, again = await admin_cli(wenv, "dead-letters", "replay", str(row["id"]))
        assert code == 1 and "already replayed" in again, "a replayed dead letter is not replayed twice"
        code, listing = await admin_cli(wenv, "dead-letters", "list", "--queue", "evaluator")
        assert "0 dead letter(s)" in listing


async def test_a_job_whose_tries_all_died_with_their_worker_is_dead_lettered(wenv, tenant):
    """arq counts a try when a job starts; a worker killed mid-job never reaches the retry logic. Such a job is
    dead-lettered when it comes back out of tries, instead of vanishing."""
    settings = wenv.settings(WORKER_MAX_TRIES="2")
    ran: list[str] = []

    async def handler(event: dict, rt) -> None:
        ran.append(event["event_id"])

    event_id = "00000000-0000-4000-8000-" + tenant[2:].ljust(12, "0")[:12]
    job = envelope(event_id, "fragment.stored", tenant, "default", {"fragment_id": "frag-lost"}, None)
    queue = await create_queue_pool(settings)
    try:
        await queue.enqueue_job(
            "handle_event", job, _job_id=f"{event_id}:evaluator", _queue_name=queue_key("evaluator")
        )
        await queue.set(f"arq:retry:{event_id}:evaluator", 2)  # two tries already started and died
    finally:
        await queue.aclose()
    async with hosted_worker("evaluator", {"fragment.stored": handler}, settings):
        row = await eventually(
            lambda: wenv.owner.fetchrow(
                "SELECT error, attempts FROM agent_memory.dead_letters WHERE event_id = $1::uuid", event_id
            ),
            10,
            "the lost job to be dead-lettered",
        )
    assert row["error"] == "no try finished: 2 tries were lost with their worker" and row["attempts"] == 2
    assert ran == []


async def test_the_last_tries_error_is_kept_when_postgres_refuses_the_dead_letter_at_first(wenv, tenant):
    """The last try fails and the dead letter cannot be written (here: INSERT revoked, as Postgres being away would
    refuse it); the job comes back out of tries, and the row written then carries the real error, not 'no try
    finished'."""
    settings = wenv.settings(WORKER_MAX_TRIES="2", WORKER_BACKOFF_BASE_SECONDS="0.05", WORKER_BACKOFF_MAX_SECONDS="0.5")
    calls: list[str] = []

    async def failing(event: dict, rt) -> None:
        calls.append(event["event_id"])
        if len(calls) == 2:  # the last try: refuse its dead letter until the next pass
            await wenv.owner.execute("REVOKE INSERT ON agent_memory.dead_letters FROM memento_app")
        raise RuntimeError("scorer exploded")

    try:
        async with hosted_worker("evaluator", {"fragment.stored": failing}, settings), running_relay(settings):
            await store_fragments(wenv.app, tenant, ["a fact the evaluator cannot score"])
            await eventually(lambda: truthy(len(calls) == 2), 20, "the last try")
            # the refused write happened (its error is kept for the next pass) before Postgres takes it again
            redis = aioredis.from_url(wenv.redis_url)
            try:
                await eventually(
                    lambda: redis.keys("memento:dead-letter-pending:*"), 10, "the refused dead letter's kept error"
                )
            finally:
                await redis.aclose()
            await wenv.owner.execute("GRANT INSERT ON agent_memory.dead_letters TO memento_app")
            row = await eventually(
                lambda: wenv.owner.fetchrow(
                    "SELECT error, attempts FROM agent_memory.dead_letters WHERE tenant_id = $1", tenant
                ),
                20,
                "the dead letter, once Postgres takes it",
            )
    finally:
        await wenv.owner.execute("GRANT INSERT ON agent_memory.dead_letters TO memento_app")
    assert (row["error"], row["attempts"]) == ("RuntimeError: scorer exploded", 2)
    assert len(calls) == 2, "the handler is not run again once out of tries"


async def test_relay_polls_when_it_cannot_listen(wenv, tenant):
    settings = wenv.settings(OUTBOX_POLL_INTERVAL_SECONDS="0.2")
    bad_dsn = settings.database_url.replace("memento_app:", "memento_app:wrong-", 1)
    async with running_relay(settings, dsn=bad_dsn) as relay:
        [frag_id] = await store_fragments(wenv.app, tenant, ["relayed by polling"])
        await eventually(
            lambda: wenv.owner.fetchval(
                "SELECT published_at IS NOT NULL FROM agent_memory.outbox WHERE payload->>'fragment_id' = $1", frag_id
            ),
            10,
            "the polling relay to publish the event",
        )
        assert relay._listener is None, "LISTEN failed, so only polling can have found the event"


async def test_a_listening_relay_waits_for_notifies_and_refreshes_its_gauges_on_its_own_rare_poll(
    wenv, tenant, monkeypatch
):
    """Idle and listening, the relay makes no round at the poll interval (issue 50: each round is two committed
    transactions); its rare poll still brings a dead letter, which no NOTIFY announces, into the gauge."""
    monkeypatch.setattr(outbox_relay, "LISTENING_POLL_S", 2.0)  # 15 s in production; 1 s flaked on a loaded machine
    monkeypatch.setattr(outbox_relay, "GAUGE_INTERVAL_S", 0.0)
    settings = wenv.settings(OUTBOX_POLL_INTERVAL_SECONDS="0.1")  # what a relay without its listener would use
    rounds = 0
    relay_once = outbox_relay.relay_once

    async def counted(*args, **kwargs):
        nonlocal rounds
        rounds += 1
        return await relay_once(*args, **kwargs)

    monkeypatch.setattr(outbox_relay, "relay_once", counted)
    event_type = f"idle.{tenant}"  # a label of this test's own
    async with running_relay(settings) as relay:
        await eventually(lambda: truthy(relay._listener is not None and rounds), 10, "the relay to listen")
        settled = rounds
        await asyncio.sleep(0.6)  # six poll intervals, inside the listening poll
        assert rounds == settled, f"a listening relay made {rounds - settled} rounds in 0.6 s idle"
        letter = envelope(str(uuid.uuid4()), event_type, tenant, "default", {}, None)
        async with wenv.app.acquire() as conn, conn.transaction():
            await set_system(conn)
            await dead_letters.insert(conn, "evaluator", letter, "RuntimeError: idle", 1)

        async def counted_letter():
            return (
                REGISTRY.get_sample_value("memento_dead_letters_open", {"queue": "evaluator", "event_type": event_type})
                == 1
            )

        await eventually(counted_letter, 5, "the idle poll to read the dead letter into its gauge")
        [frag_id] = await store_fragments(wenv.app, tenant, ["relayed on the NOTIFY"])
        started = time.monotonic()
        await eventually(
            lambda: wenv.owner.fetchval(
                "SELECT published_at IS NOT NULL FROM agent_memory.outbox WHERE payload->>'fragment_id' = $1", frag_id
            ),
            10,
            "the NOTIFY to bring the event's round",
        )
        assert time.monotonic() - started < 0.8, "relayed by the NOTIFY, not by the next poll"


async def test_outbox_backlog_gauge_follows_the_unpublished_events(wenv, tenant):
    settings = wenv.settings()
    await store_fragments(wenv.app, tenant, [f"backlog {i}" for i in range(3)])
    pool = await create_pool(settings, "relay-test", max_size=2)
    queue = await create_queue_pool(settings)
    try:
        idle = Relay(pool, queue, settings.database_url, settings=settings)
        await idle._update_gauges()  # what a relay reports before its first round
        assert REGISTRY.get_sample_value("memento_outbox_backlog_total", {"event_type": "fragment.stored"}) >= 3
        async with running_relay(settings):

            async def drained():
                return REGISTRY.get_sample_value("memento_outbox_backlog_total", {"event_type": "fragment.stored"}) == 0

            await eventually(drained, 10, "the relay to drain the backlog and report it")
    finally:
        await queue.aclose()
        await pool.close()


async def test_sigterm_lets_short_jobs_finish_and_returns_long_ones_to_the_queue(wenv, tenant):
    settings = wenv.settings()
    started = asyncio.Event()
    finished_by: dict[str, str] = {}

    def handler_for(worker: str, seconds: float):
        async def handle(event: dict, rt) -> None:
            started.set()
            await asyncio.sleep(seconds)  # a job that takes this long
            finished_by[event["payload"]["fragment_id"]] = worker

        return handle

    async with running_relay(settings):
        async with hosted_worker("evaluator", {"fragment.stored": handler_for("first", 0.3)}, settings) as first:
            [short] = await store_fragments(wenv.app, tenant, ["a short job"])
            await eventually(lambda: truthy(started.is_set()), 10, "the short job to start")
            await first.stop(grace=5)
        assert finished_by == {short: "first"}, "an in-flight job inside the grace period finishes"

        started.clear()
        async with hosted_worker("evaluator", {"fragment.stored": handler_for("first", 60)}, settings) as first:
            [long] = await store_fragments(wenv.app, tenant, ["a long job"])
            await eventually(lambda: truthy(started.is_set()), 10, "the long job to start")
            await first.stop(grace=0.2)
        assert long not in finished_by
        async with hosted_worker("evaluator", {"fragment.stored": handler_for("second", 0)}, settings):
            await eventually(lambda: truthy(long in finished_by), 10, "another worker to take the returned job")
        assert finished_by[long] == "second"


async def test_a_job_is_claimed_once_only_when_due_and_with_the_lease(wenv):
    """The worker's one-round-trip claim makes arq's checks: not running elsewhere, still queued, due."""
    redis = await create_queue_pool(wenv.settings())
    queue, lease_ms = "memento:test-claim", 5000
    now = int(time.time() * 1000)

    async def claim(job_id: str) -> bytes | None:
        return await redis.eval(CLAIM_JOB, 2, in_progress_key_prefix + job_id, queue, job_id, now, lease_ms)

    try:
        await redis.zadd(queue, {"due": now - 10, "later": now + 60_000})
        assert int(float(await claim("due"))) == now - 10
        assert 0 < await redis.pttl(in_progress_key_prefix + "due") <= lease_ms
        assert await claim("due") is None, "claimed twice while its lease holds"
        assert await claim("later") is None, "a job deferred to later was started now"
        assert await claim("gone") is None, "a job no longer queued was started"
        assert not await redis.exists(in_progress_key_prefix + "later", in_progress_key_prefix + "gone")
    finally:
        await redis.delete(queue, *(in_progress_key_prefix + j for j in ("due", "later", "gone")))
        await redis.aclose()


async def test_relayed_jobs_wait_for_a_worker_as_long_as_worker_job_expiry_seconds_says(wenv, tenant):
    """arq's default keeps a queued job one day; a worker down longer would lose events the outbox calls published."""
    three_days_ms = 3 * 86400 * 1000
    settings = wenv.settings(WORKER_JOB_EXPIRY_SECONDS=str(3 * 86400))
    async with running_relay(settings):
        [frag_id] = await store_fragments(wenv.app, tenant, ["queued while no worker runs"])
        event_id = await eventually(
            lambda: wenv.owner.fetchval(
                "SELECT id::text FROM agent_memory.outbox WHERE payload->>'fragment_id' = $1"
                " AND published_at IS NOT NULL",
                frag_id,
            ),
            10,
            "the relay to publish the event",
        )
    redis = await create_queue_pool(wenv.settings())
    try:
        for consumer in ("embedder", "evaluator"):
            ttl = await redis.pttl(job_key_prefix + job_id(event_id, consumer))
            assert three_days_ms - 60_000 < ttl <= three_days_ms, (consumer, ttl)

        # the default: 30 days, for every job enqueued through the queue pool (the relay's add_jobs, replays, cron)
        assert redis.expires_extra_ms == 30 * 86400 * 1000
        async with redis.pipeline(transaction=False) as pipe:
            add_jobs(pipe, redis, [JobSpec("handle_event", ({"event_type": "none"},), "expiry-default", "q:expiry")])
            assert await pipe.execute() == [1, 0]  # the job enqueued, then its queue's wake (no worker listens)
        ttl = await redis.pttl(job_key_prefix + "expiry-default")
        assert 29 * 86400 * 1000 < ttl <= 30 * 86400 * 1000
    finally:
        await redis.delete(job_key_prefix + "expiry-default", "q:expiry")
        await redis.aclose()

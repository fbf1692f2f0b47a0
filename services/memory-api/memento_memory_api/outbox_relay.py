"""The outbox relay: wake on LISTEN/NOTIFY (or every poll interval), claim events with SKIP LOCKED, enqueue one
arq job per consuming queue with a deterministic job id, mark them published — all in one transaction, so an
enqueue failure leaves the events for the next round. Any number of relays can run at once: each claims rows the
others have not locked, and a row relayed twice (a relay died after enqueueing, before committing) collapses
onto the same job id.

Before the transaction commits, `WAITAOF` waits until Redis has the jobs in its append-only file on disk, so
a Redis crash right after the commit cannot lose an event the outbox already calls published. Servers without
WAITAOF (Redis < 7.2) or without an append-only file get at-least-once up to Redis's own durability, logged once.
"""

from __future__ import annotations

import asyncio
import logging

import asyncpg
from arq.connections import ArqRedis
from opentelemetry import context as otel_context
from opentelemetry import trace
from redis.exceptions import ResponseError

from memento_shared.db import dead_letters
from memento_shared.db.outbox import CHANNEL, backlog, claim_batch, mark_published
from memento_shared.db.rls import set_system
from memento_shared.events import CONSUMERS, envelope, job_id, queue_key
from memento_shared.settings import Settings
from memento_shared.telemetry.metrics import DEAD_LETTERS_OPEN, OUTBOX_BACKLOG, OUTBOX_RELAYED
from memento_shared.telemetry.tracing import current_traceparent, extract_context

log = logging.getLogger(__name__)
tracer = trace.get_tracer("memento.relay")
WAITAOF_TIMEOUT_MS = 5000
FENCE_KEY = "memento:relay:fence"


class NotDurable(Exception):
    """Redis did not confirm the jobs are on disk in time; the events stay unpublished and are relayed again."""


async def wait_durable(queue: ArqRedis) -> bool:
    """True once every write made before this call is fsynced to Redis's AOF; False if the server cannot tell.

    WAITAOF waits for the calling connection's own last write, and the enqueues ran on other pooled connections,
    so a fence write goes first on the same connection: offsets only grow, so it covers everything before it.
    """
    try:
        async with queue.pipeline(transaction=False) as pipe:
            pipe.incr(FENCE_KEY)
            pipe.execute_command("WAITAOF", 1, 0, WAITAOF_TIMEOUT_MS)
            _, (local, _replicas) = await pipe.execute()
    except ResponseError as exc:  # unknown command, or appendonly disabled: nothing to wait for
        log.warning("relay.durability_unavailable", extra={"error": str(exc)[:200]})
        return False
    if int(local) < 1:
        raise NotDurable("WAITAOF timed out")
    return True


async def relay_once(pool: asyncpg.Pool, queue: ArqRedis, batch_size: int = 100, *, durable: bool = False) -> int:
    """Relay up to `batch_size` events. With `durable`, returns only after Redis has them on disk."""
    async with pool.acquire() as conn, conn.transaction():
        await set_system(conn)
        rows = await claim_batch(conn, batch_size)
        for row in rows:
            await _enqueue(queue, row)
        if rows:
            if durable:
                await wait_durable(queue)
            await mark_published(conn, [r["id"] for r in rows])
        return len(rows)


async def _enqueue(queue: ArqRedis, row: asyncpg.Record) -> None:
    token = otel_context.attach(extract_context(row["traceparent"]))
    try:
        with tracer.start_as_current_span(
            "outbox relay", kind=trace.SpanKind.PRODUCER, attributes={"memento.event_type": row["event_type"]}
        ):
            job = envelope(
                str(row["id"]),
                row["event_type"],
                row["tenant_id"],
                row["workspace"],
                row["payload"],
                current_traceparent(),
            )
            for consumer in CONSUMERS.get(row["event_type"], ()):
                # None means the job id already exists: a second relay of the same event is a no-op.
                await queue.enqueue_job(
                    "handle_event", job, _job_id=job_id(job["event_id"], consumer), _queue_name=queue_key(consumer)
                )
    finally:
        otel_context.detach(token)
    OUTBOX_RELAYED.labels(row["event_type"]).inc()


class Relay:
    def __init__(
        self,
        pool: asyncpg.Pool,
        queue: ArqRedis,
        dsn: str,
        poll_interval: float | None = None,
        *,
        settings: Settings | None = None,
    ) -> None:
        settings = settings or Settings()
        self.pool = pool
        self.queue = queue
        self.dsn = dsn
        self.poll_interval = settings.outbox_poll_interval_s if poll_interval is None else poll_interval
        self.batch_size = settings.outbox_batch_size
        self.durable = settings.outbox_durable_enqueue
        self.wake = asyncio.Event()
        self.running = False
        self._task: asyncio.Task | None = None
        self._listener: asyncpg.Connection | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._listener is not None and not self._listener.is_closed():
            await self._listener.close()

    async def _listen(self) -> None:
        try:
            self._listener = await asyncpg.connect(self.dsn, server_settings={"application_name": "memento.relay"})
            await self._listener.add_listener(CHANNEL, lambda *_: self.wake.set())
        except (OSError, asyncpg.PostgresError) as exc:
            self._listener = None
            log.warning("relay.listen_failed", extra={"error_type": type(exc).__name__})

    async def _run(self) -> None:
        self.running = True
        failures = 0
        rounds = 0
        if self.durable:
            self.durable = await self._durability_available()
        try:
            while True:
                if self._listener is None or self._listener.is_closed():
                    await self._listen()  # without it the relay still polls every poll_interval
                self.wake.clear()
                try:
                    moved = await relay_once(self.pool, self.queue, self.batch_size, durable=self.durable)
                    failures = 0
                except Exception as exc:  # Postgres or Redis away: back off, the events stay in the outbox
                    failures = min(failures + 1, 8)
                    log.warning("relay.failed", extra={"error_type": type(exc).__name__, "failures": failures})
                    await asyncio.sleep(0.1 * 2**failures)  # reconnect backoff
                    continue
                rounds += 1
                if rounds % 20 == 0 or moved == 0:
                    await self._update_gauges()
                if moved:
                    continue
                try:
                    await asyncio.wait_for(self.wake.wait(), self.poll_interval)
                except TimeoutError:
                    pass
        finally:
            self.running = False

    async def _durability_available(self) -> bool:
        try:
            return await wait_durable(self.queue)
        except Exception:  # Redis not reachable yet: assume it can, the first relay round will tell
            return True

    async def _update_gauges(self) -> None:
        try:
            async with self.pool.acquire() as conn, conn.transaction():
                await set_system(conn)
                counts = await backlog(conn)
                open_letters = await dead_letters.open_counts(conn)
        except Exception:
            return  # a metric can wait for the next round
        for event_type in set(CONSUMERS) | set(counts):
            OUTBOX_BACKLOG.labels(event_type).set(counts.get(event_type, 0))
        for (queue, event_type), n in open_letters.items():
            DEAD_LETTERS_OPEN.labels(queue, event_type).set(n)

"""The outbox relay: wake on LISTEN/NOTIFY (or every poll interval), claim events with SKIP LOCKED, enqueue one
arq job per consuming queue with a deterministic job id, mark them published — all in one transaction, so an
enqueue failure leaves the events for the next round. Any number of relays can run at once.
"""

from __future__ import annotations

import asyncio
import logging

import asyncpg
from arq.connections import ArqRedis
from opentelemetry import context as otel_context
from opentelemetry import trace

from memento_shared.db.outbox import CHANNEL, backlog, claim_batch, mark_published
from memento_shared.db.rls import set_system
from memento_shared.events import CONSUMERS, envelope, job_id, queue_key
from memento_shared.telemetry.metrics import OUTBOX_BACKLOG, OUTBOX_RELAYED
from memento_shared.telemetry.tracing import current_traceparent, extract_context

log = logging.getLogger(__name__)
tracer = trace.get_tracer("memento.relay")


async def relay_once(pool: asyncpg.Pool, queue: ArqRedis, batch_size: int = 100) -> int:
    async with pool.acquire() as conn, conn.transaction():
        await set_system(conn)
        rows = await claim_batch(conn, batch_size)
        for row in rows:
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
                            "handle_event",
                            job,
                            _job_id=job_id(job["event_id"], consumer),
                            _queue_name=queue_key(consumer),
                        )
            finally:
                otel_context.detach(token)
            OUTBOX_RELAYED.labels(row["event_type"]).inc()
        if rows:
            await mark_published(conn, [r["id"] for r in rows])
        return len(rows)


class Relay:
    def __init__(self, pool: asyncpg.Pool, queue: ArqRedis, dsn: str, poll_interval: float = 1.0) -> None:
        self.pool = pool
        self.queue = queue
        self.dsn = dsn
        self.poll_interval = poll_interval
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
        try:
            while True:
                if self._listener is None or self._listener.is_closed():
                    await self._listen()
                self.wake.clear()
                try:
                    moved = await relay_once(self.pool, self.queue)
                    failures = 0
                except Exception as exc:  # Postgres or Redis away: back off, the events stay in the outbox
                    failures += 1
                    moved = 0
                    log.warning("relay.failed", extra={"error_type": type(exc).__name__, "failures": failures})
                    await asyncio.sleep(min(30.0, 0.2 * 2**failures))
                    continue
                rounds += 1
                if rounds % 20 == 0 or moved == 0:
                    await self._update_backlog()
                if moved:
                    continue
                try:
                    await asyncio.wait_for(self.wake.wait(), self.poll_interval)
                except TimeoutError:
                    pass
        finally:
            self.running = False

    async def _update_backlog(self) -> None:
        try:
            async with self.pool.acquire() as conn, conn.transaction():
                await set_system(conn)
                counts = await backlog(conn)
            for event_type in CONSUMERS:
                OUTBOX_BACKLOG.labels(event_type).set(counts.get(event_type, 0))
        except Exception:
            pass

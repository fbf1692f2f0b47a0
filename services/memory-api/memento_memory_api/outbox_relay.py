"""The outbox relay: wake on LISTEN/NOTIFY (or every poll interval), claim events with SKIP LOCKED and mark them
published (one statement), enqueue one arq job per consuming queue with a deterministic job id — all in one
transaction, so an enqueue failure rolls the mark back and leaves the events for the next round. Any number of
relays can run at once: each claims rows the others have not locked, and a row relayed twice (a relay died after
enqueueing, before committing) collapses onto the same job id.

Before the transaction commits, `WAITAOF` waits until Redis has the jobs in its append-only file on disk, so
a Redis crash right after the commit cannot lose an event the outbox already calls published. Servers without
WAITAOF (Redis < 7.2) or without an append-only file get at-least-once up to Redis's own durability, logged once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import asyncpg
from arq.connections import ArqRedis
from opentelemetry import context as otel_context
from opentelemetry import trace
from redis.exceptions import ResponseError

from memento_memory_api import change_notices
from memento_memory_api.settings import MemoryApiSettings
from memento_shared import background
from memento_shared.db import dead_letters, outbox
from memento_shared.db.outbox import CHANNEL, backlog, claim_batch
from memento_shared.db.rls import system_transaction
from memento_shared.enqueue import JobSpec, add_jobs
from memento_shared.events import CONSUMERS, envelope, job_id, queue_key
from memento_shared.telemetry.metrics import DEAD_LETTERS_OPEN, OUTBOX_BACKLOG, OUTBOX_RELAYED
from memento_shared.telemetry.tracing import current_traceparent, extract_context

log = logging.getLogger(__name__)
tracer = trace.get_tracer("memento.relay")
WAITAOF_TIMEOUT_MS = 5000
FENCE_KEY = "memento:relay:fence"
# a Redis found unable to confirm durability (appendonly off) is asked again this often: it may be turned on, or a
# failover may bring a server that can
DURABILITY_RECHECK_S = 60.0
GAUGE_INTERVAL_S = 5.0  # backlog and dead-letter gauges: two queries, not worth running after every event
# while its listener is connected a commit's NOTIFY wakes the relay, and the poll only covers a listener that died
# unnoticed, events a relay that died mid-round left unpublished (no NOTIFY for those; the next write's round takes
# them too) and keeps the gauges current within it: a round a second was a fifth of an idle memory-api's CPU, and a
# round every 5 s (two transactions, each committed with a WAL flush: the sealed principal gives every transaction an
# id) still about 40 % of it, with its Postgres backend's (issue 50)
LISTENING_POLL_S = 15.0
PRUNE_INTERVAL_S = 600.0  # deleting old published events: a chore of its own task, never in the way of delivery
PRUNE_BATCH = 5000


class NotDurable(Exception):
    """Redis did not confirm the jobs are on disk in time; the events stay unpublished and are relayed again."""


async def wait_durable(queue: ArqRedis) -> bool:
    """True once every write made before this call is fsynced to Redis's AOF; False if the server cannot tell."""
    return await enqueue_durably(queue, [], durable=True)


async def enqueue_durably(queue: ArqRedis, jobs: list[JobSpec], *, durable: bool) -> bool:
    """Enqueue the jobs and, with `durable`, wait for Redis's AOF fsync — all in one round trip.

    WAITAOF waits for the calling connection's own last write; the pipeline runs on one connection, and a fence
    write goes last so that even a batch whose jobs all existed already has a write to wait for. Returns False
    when the server cannot tell (no WAITAOF before Redis 7.2, or appendonly off).
    """
    async with queue.pipeline(transaction=False) as pipe:
        add_jobs(pipe, queue, jobs)
        if durable:
            pipe.incr(FENCE_KEY)
            pipe.execute_command("WAITAOF", 1, 0, WAITAOF_TIMEOUT_MS)
        results = await pipe.execute(raise_on_error=False)
    for result in results[: len(jobs)]:
        if isinstance(result, Exception):
            raise result
    if not durable:
        return False
    waited = results[-1]
    if isinstance(waited, ResponseError):  # unknown command, or appendonly disabled: nothing to wait for
        log.warning("relay.durability_unavailable", extra={"error": str(waited)[:200]})
        return False
    if isinstance(waited, Exception):
        raise waited
    if int(waited[0]) < 1:
        raise NotDurable("WAITAOF timed out")
    return True


async def relay_once(
    pool: asyncpg.Pool, queue: ArqRedis, batch_size: int = 100, *, durable: bool = False
) -> tuple[int, bool]:
    """Relay up to `batch_size` events. With `durable`, returns only after Redis has them on disk. Returns how many
    were relayed and whether durable enqueueing is still possible (False once the server said it cannot tell).
    Once committed, the resources they changed are announced to the gateways (change_notices)."""
    claimed: list[asyncpg.Record] = []
    async with pool.acquire() as conn, system_transaction(conn):
        relayed = await relay_batch(conn, queue, batch_size, durable=durable, claimed=claimed)
    await change_notices.announce(queue, claimed)
    return relayed


async def relay_batch(
    conn: asyncpg.Connection, queue: ArqRedis, batch_size: int, *, durable: bool, claimed: list[Any] | None = None
) -> tuple[int, bool]:
    """relay_once's work inside the caller's transaction, which only a successful enqueue may commit; the events
    relayed are added to `claimed`, if given."""
    rows = await claim_batch(conn, batch_size)  # marked published, undone unless the enqueue succeeds
    if claimed is not None:
        claimed.extend(rows)
    if rows:
        confirmed = await enqueue_durably(queue, [job for row in rows for job in _jobs(row)], durable=durable)
        durable = durable and confirmed
    return len(rows), durable


def _jobs(row: asyncpg.Record) -> list[JobSpec]:
    """One job per consuming queue, its trace context a child of the writer's (a PRODUCER span per event)."""
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
    finally:
        otel_context.detach(token)
    OUTBOX_RELAYED.labels(row["event_type"]).inc()
    return [
        JobSpec("handle_event", (job,), job_id(job["event_id"], consumer), queue_key(consumer))
        for consumer in CONSUMERS.get(row["event_type"], ())
    ]


class Relay:
    def __init__(
        self,
        pool: asyncpg.Pool,
        queue: ArqRedis,
        dsn: str,
        poll_interval: float | None = None,
        *,
        settings: MemoryApiSettings | None = None,
    ) -> None:
        settings = settings or MemoryApiSettings()
        self.pool = pool
        self.queue = queue
        self.dsn = dsn
        self.poll_interval = settings.outbox_poll_interval_s if poll_interval is None else poll_interval
        self.batch_size = settings.outbox_batch_size
        self.gather = settings.outbox_gather_s
        self.wants_durable = self.durable = settings.outbox_durable_enqueue
        self.durability_recheck_s = DURABILITY_RECHECK_S
        self.retention_s = settings.outbox_retention_hours * 3600
        self.wake = asyncio.Event()
        self.running = False
        self._task: asyncio.Task[Any] | None = None
        self._pruner: asyncio.Task[Any] | None = None
        self._listener: asyncpg.Connection | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())
        if self.retention_s:
            # its own task: a first prune after an upgrade can delete millions of rows, and delivery must not wait
            self._pruner = asyncio.create_task(self._prune_every(PRUNE_INTERVAL_S))

    async def stop(self) -> None:
        await background.cancel(self._pruner)
        await background.cancel(self._task)
        await background.close(self._listener)

    async def _prune_every(self, interval: float) -> None:
        await asyncio.sleep(interval / 10)  # not in the way of start-up
        while True:
            await self.prune()
            await asyncio.sleep(interval)

    async def _run(self) -> None:
        self.running = True
        failures = 0
        next_gauges = 0.0
        if self.durable:
            self.durable = await self._durability_available()
        next_durability_check = time.monotonic() + self.durability_recheck_s
        try:
            while True:
                if self._listener is None or self._listener.is_closed():
                    # without it the relay still polls every poll_interval
                    self._listener = await background.listen(self.dsn, CHANNEL, self.wake.set, "memento.relay")
                self.wake.clear()
                try:
                    # a server that cannot confirm (no WAITAOF, appendonly off) is asked once, not every round
                    moved, self.durable = await relay_once(self.pool, self.queue, self.batch_size, durable=self.durable)
                    failures = 0
                except Exception as exc:  # Postgres or Redis away: back off, the events stay in the outbox
                    failures = min(failures + 1, 8)
                    log.warning("relay.failed", extra={"error_type": type(exc).__name__, "failures": failures})
                    await asyncio.sleep(0.1 * 2**failures)  # reconnect backoff
                    continue
                if time.monotonic() >= next_gauges:
                    await self._update_gauges()
                    next_gauges = time.monotonic() + GAUGE_INTERVAL_S
                if self.wants_durable and not self.durable and time.monotonic() >= next_durability_check:
                    self.durable = await self._durability_available()
                    next_durability_check = time.monotonic() + self.durability_recheck_s
                if moved == self.batch_size:
                    continue  # a full batch: there may be more right now. Otherwise a NOTIFY wakes us.
                try:
                    async with asyncio.timeout(self._idle_wait(next_durability_check)):
                        await self.wake.wait()
                except TimeoutError:
                    continue
                # Woken by a commit: under load more are a few ms behind it. Each round costs four round trips
                # and an AOF fsync whatever its size, so one round per few ms beats one per event.
                await asyncio.sleep(self.gather)
        finally:
            self.running = False

    def _idle_wait(self, next_durability_check: float) -> float:
        """How long a round with nothing more to move waits for a NOTIFY: poll_interval without a listener, longer with
        one, never past the next check of Redis's durability the relay owes."""
        listening = self._listener is not None and not self._listener.is_closed()
        wait = max(self.poll_interval, LISTENING_POLL_S) if listening else self.poll_interval
        if self.wants_durable and not self.durable:
            wait = min(wait, max(0.0, next_durability_check - time.monotonic()))
        return wait

    async def prune(self) -> int:
        """Delete published events created more than OUTBOX_RETENTION_HOURS ago (created_at is the indexed column), a
        batch per transaction, so the outbox holds what is owed and recent history rather than every event ever
        written."""
        deleted = 0
        try:
            while True:
                async with self.pool.acquire() as conn, system_transaction(conn):
                    n = await outbox.prune(conn, self.retention_s, PRUNE_BATCH)
                deleted += n
                if n < PRUNE_BATCH:
                    break
        except Exception as exc:  # the next interval tries again
            log.warning("relay.prune_failed", extra={"error_type": type(exc).__name__})
        if deleted:
            log.info("relay.pruned", extra={"deleted": deleted})
        return deleted

    async def _durability_available(self) -> bool:
        try:
            return await wait_durable(self.queue)
        except Exception:  # Redis not reachable yet: assume it can, the first relay round will tell
            return True

    async def _update_gauges(self) -> None:
        try:
            async with self.pool.acquire() as conn, system_transaction(conn):
                counts = await backlog(conn)
                open_letters = await dead_letters.open_counts(conn)
        except Exception:
            return  # a metric can wait for the next round
        for event_type in set(CONSUMERS) | set(counts):
            OUTBOX_BACKLOG.labels(event_type).set(counts.get(event_type, 0))
        for (queue, event_type), n in open_letters.items():
            DEAD_LETTERS_OPEN.labels(queue, event_type).set(n)

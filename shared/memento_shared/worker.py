"""The arq runtime every worker shares: JSON jobs, one `handle_event` dispatcher, retries with backoff, dead letters
after the last try, leases that return a killed worker's jobs quickly, a per-provider limiter, and an HTTP side
server for /health (readiness), /livez (liveness) and /metrics.

A worker module only supplies its queue name, a dict of event type → handler, and optionally extra arq functions
(the consolidator's on-demand job) and cron jobs. Delivery guarantees, in one place:
- a job is claimed with a lease in Redis (WORKER_LEASE_SECONDS) that this process renews while the job runs, so
  a killed worker's jobs are picked up by another replica after at most one lease;
- a handler error is retried WORKER_MAX_TRIES times with exponential backoff (or the provider's Retry-After if
  longer), then written to `dead_letters` with the error; nothing is dropped, including tries that died with the
  process (they count as tries, and a job out of tries is dead-lettered before it would run again);
- on SIGTERM the worker stops taking jobs, lets in-flight ones finish for WORKER_SHUTDOWN_GRACE_SECONDS, and
  cancels the rest, which arq leaves in the queue for the next worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import logging
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import asyncpg
from arq.connections import ArqRedis
from arq.constants import in_progress_key_prefix
from arq.utils import timestamp_ms
from arq.worker import Function, Retry, Worker, func
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.instrumentation.utils import suppress_instrumentation
from redis.exceptions import RedisError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from memento_shared import heap, redis_client
from memento_shared.db import dead_letters
from memento_shared.db.pool import create_pool
from memento_shared.db.rls import set_system
from memento_shared.enqueue import wake_channel
from memento_shared.events import queue_key
from memento_shared.http import RequestMetrics, make_server
from memento_shared.settings import QueueSettings, RedisSettings, WorkerSettings
from memento_shared.telemetry.logging import setup_logging
from memento_shared.telemetry.metrics import (
    DEAD_LETTERS,
    EVENT_PROCESSING,
    JOB_FAILURES,
    PROVIDER_THROTTLED,
    metrics_endpoint,
)
from memento_shared.telemetry.tracing import extract_context, setup_tracing

log = logging.getLogger(__name__)

# arq's own try counter only protects against a job that can never be dead-lettered (Postgres away for days);
# handle_event decides when a job is out of tries.
ARQ_MAX_TRIES = 10_000
# an idle worker's longest wait between poll rounds when no wake comes (memento_shared.enqueue.wake_channel): a job
# deferred for later (a retry) or enqueued without a wake starts within it; cron runs are scheduled ahead of it
IDLE_WAIT_S = 2.0


def job_serializer(obj: Any) -> bytes:
    # JSON, never pickle: producer and consumer are different services and versions.
    return json.dumps(obj, default=str).encode()


def job_deserializer(data: bytes) -> Any:
    return json.loads(data)


# Every queue command has a read timeout above the relay's WAITAOF timeout (5 s), the longest one may rightly take.
# arq's own create_pool sets none, so a Redis that stops answering (paused, or a network dropping packets without a
# reset) held every caller for good, the relay inside its Postgres transaction.
QUEUE_SOCKET_TIMEOUT_S = 15.0
QUEUE_CONNECT_TIMEOUT_S = 2.0
QUEUE_CONNECT_TRIES = 5  # at start, one a second (as arq's create_pool): Redis may still be starting


async def create_queue_pool(settings: QueueSettings) -> ArqRedis:
    """Redis as arq's queue (REDIS_QUEUE_URL). Every job enqueued through it (the relay's, a dead letter's replay, the
    cron's) waits WORKER_JOB_EXPIRY_SECONDS for a worker before Redis drops it."""
    connections = redis_client.connection_pool(
        settings.redis_queue_url, timeout=QUEUE_SOCKET_TIMEOUT_S, connect_timeout=QUEUE_CONNECT_TIMEOUT_S
    )
    pool = ArqRedis(
        connections,
        job_serializer=job_serializer,
        job_deserializer=job_deserializer,
        expires_extra_ms=int(settings.worker_job_expiry_s * 1000),
    )
    pool.auto_close_connection_pool = True  # aclose() closes its connections, as arq's own pool does
    attempt = 1
    try:
        while True:
            try:
                await pool.ping()
                return pool
            except (RedisError, OSError):
                if attempt == QUEUE_CONNECT_TRIES:
                    raise
            log.warning("redis.connect_retry", extra={"attempt": attempt})
            attempt += 1
            await asyncio.sleep(1)
    except BaseException:  # out of tries, or cancelled while starting
        await pool.aclose()
        raise


def background_state_redis(settings: RedisSettings, queue: ArqRedis) -> Any:
    """The state Redis (REDIS_URL) for background work (L1's rebuild and expiry, progress), with the queue's long
    timeouts: `queue` itself when both roles are one Redis, as before the split; else a client of its own (a cluster's
    when REDIS_URL names one), which the caller closes with `close_state_redis`."""
    if settings.redis_url == settings.redis_queue_url:
        return queue
    return redis_client.client(
        settings.redis_url, timeout=QUEUE_SOCKET_TIMEOUT_S, connect_timeout=QUEUE_CONNECT_TIMEOUT_S
    )


async def close_state_redis(state_redis: Any, queue: ArqRedis) -> None:
    if state_redis is not None and state_redis is not queue:
        await state_redis.aclose()


def backoff_seconds(job_try: int, base: float = 1.0, cap: float = 300.0) -> float:
    return min(cap, base * 2 ** (job_try - 1))


def parse_retry_after(value: str | None) -> float | None:
    """A Retry-After header in seconds: it is either a number of seconds or an HTTP date (RFC 9110 §10.2.3)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # an HTTP date is GMT; parsedate leaves "-0000" naive
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - time.time())


def retry_after_of(exc: BaseException) -> float:
    """Seconds a provider asked us to wait (429 Retry-After), carried by the provider errors as `retry_after`."""
    value = getattr(exc, "retry_after", None)
    return float(value) if isinstance(value, int | float) and value > 0 else 0.0


Handler = Callable[[dict[str, Any], "Runtime"], Awaitable[None]]


@dataclass
class Runtime:
    """What handlers get: the pool (service role, RLS applies), Redis, settings and worker-specific state."""

    name: str
    settings: WorkerSettings  # the service's own class (its settings_of narrows it)
    pool: asyncpg.Pool
    redis: ArqRedis  # the queue role (REDIS_QUEUE_URL): arq, dead-letter markers, enqueues
    state: dict[str, Any] = field(default_factory=dict)
    # the state role (REDIS_URL: L1, progress), maybe a cluster; the queue's own client when both are one Redis
    state_redis: Any = None

    def __post_init__(self) -> None:
        if self.state_redis is None:
            self.state_redis = self.redis


class ProviderLimiter:
    """Calls to one external provider: at most `concurrency` at once and `rate` per second, and after a 429 every
    caller waits out the provider's Retry-After. Keeps a burst of writes from turning into a burst of 429s.
    Per process: with N replicas the provider sees at most N times these figures."""

    def __init__(self, provider: str, concurrency: int, rate: float = 0.0) -> None:
        self.provider = provider
        self._slots = asyncio.Semaphore(max(1, concurrency))
        self._interval = 1.0 / rate if rate > 0 else 0.0
        self._next_start = 0.0
        self._paused_until = 0.0

    def pause(self, seconds: float) -> None:
        self._paused_until = max(self._paused_until, time.monotonic() + seconds)

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        async with self._slots:
            while (wait := max(self._paused_until, self._next_start) - time.monotonic()) > 0:
                PROVIDER_THROTTLED.labels(self.provider).inc()
                await asyncio.sleep(wait)  # pacing outbound calls, not waiting for a result
            self._next_start = time.monotonic() + self._interval
            yield


async def write_dead_letter(rt: Runtime, envelope: dict[str, Any], error: str, attempts: int) -> None:
    async with rt.pool.acquire() as conn, conn.transaction():
        await set_system(conn)
        await dead_letters.insert(conn, rt.name, envelope, error, attempts)


def _pending_key(job_id: str) -> str:
    return f"memento:dead-letter-pending:{job_id}"


async def _give_up(ctx: dict[str, Any], envelope: dict[str, Any], error: str, attempts: int) -> None:
    rt: Runtime = ctx["runtime"]
    try:
        await write_dead_letter(rt, envelope, error, attempts)
    except Exception as exc:  # Postgres away: keep the job, and its error for the try that writes the row
        log.warning("event.dead_letter_failed", extra={"event_type": envelope.get("event_type")})
        with contextlib.suppress(Exception):
            pending = json.dumps({"error": error, "attempts": attempts})
            await rt.redis.set(_pending_key(ctx["job_id"]), pending, ex=int(rt.settings.worker_job_expiry_s))
        raise Retry(defer=ctx["backoff_max"]) from exc
    DEAD_LETTERS.labels(rt.name, envelope.get("event_type", "unknown")).inc()
    log.error("event.dead_lettered", extra={"event_type": envelope.get("event_type"), "attempts": attempts})


async def _out_of_tries(ctx: dict[str, Any], envelope: dict[str, Any], max_tries: int) -> None:
    """A job back after its last try: its error when that try failed but could not write the dead letter (Postgres
    away), else every try died with its worker (killed, lease lost) before reaching an error."""
    rt: Runtime = ctx["runtime"]
    error, attempts = f"no try finished: {max_tries} tries were lost with their worker", max_tries
    with contextlib.suppress(Exception):
        raw = await rt.redis.get(_pending_key(ctx["job_id"]))
        if raw is not None:
            pending = json.loads(raw)
            error, attempts = str(pending["error"]), int(pending["attempts"])
    await _give_up(ctx, envelope, error, attempts)
    with contextlib.suppress(Exception):  # only this path can find one
        await rt.redis.delete(_pending_key(ctx["job_id"]))


async def handle_event(ctx: dict[str, Any], envelope: dict[str, Any]) -> None:
    """The job function for events: restore the trace, dispatch by event type, retry or dead-letter."""
    rt: Runtime = ctx["runtime"]
    handlers: Mapping[str, Handler] = ctx["handlers"]
    event_type = envelope.get("event_type", "unknown")
    handler = handlers.get(event_type)
    if handler is None:
        log.debug("event.unhandled", extra={"event_type": event_type, "worker": rt.name})
        return
    job_try, max_tries = ctx.get("job_try", 1), ctx["max_tries"]
    if job_try > max_tries:
        await _out_of_tries(ctx, envelope, max_tries)
        return
    token = otel_context.attach(extract_context(envelope.get("traceparent")))
    started = time.perf_counter()
    try:
        with trace.get_tracer("memento.worker").start_as_current_span(
            f"{rt.name} {event_type}",
            kind=trace.SpanKind.CONSUMER,
            attributes={
                "messaging.system": "arq",
                "messaging.destination.name": rt.name,
                "memento.event_type": event_type,
            },
        ):
            async with asyncio.timeout(ctx["job_timeout"]):
                await handler(envelope, rt)
        EVENT_PROCESSING.labels(event_type, "ok").observe(time.perf_counter() - started)
    except Exception as exc:
        JOB_FAILURES.labels(rt.name, event_type).inc()
        if job_try < max_tries:
            EVENT_PROCESSING.labels(event_type, "retry").observe(time.perf_counter() - started)
            defer = max(backoff_seconds(job_try, ctx["backoff_base"], ctx["backoff_max"]), retry_after_of(exc))
            log.warning(
                "event.retry",
                extra={"event_type": event_type, "job_try": job_try, "error_type": type(exc).__name__, "defer": defer},
            )
            raise Retry(defer=defer) from exc
        EVENT_PROCESSING.labels(event_type, "dead_letter").observe(time.perf_counter() - started)
        await _give_up(ctx, envelope, f"{type(exc).__name__}: {exc}", job_try)
    finally:
        otel_context.detach(token)


# KEYS: the job's in-progress key, the queue. ARGV: job id, now (ms), lease (ms). The job's score if claimed, else nil.
CLAIM_JOB = """
if redis.call('EXISTS', KEYS[1]) == 1 then return false end
local score = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not score or tonumber(score) > tonumber(ARGV[2]) then return false end
redis.call('PSETEX', KEYS[1], ARGV[3], '1')
return score
"""


class _Worker(Worker):
    """arq's Worker with a short, renewed lease on running jobs, a one-round-trip claim, a heartbeat timestamp for
    /livez, and an idle loop that waits for a wake (memento_shared.enqueue.wake_channel) instead of polling twenty
    times a second: three idle workers polling that often were most of an idle system's CPU (issue 50)."""

    def __init__(self, *args: Any, lease_s: float, liveness_window_s: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # arq claims a job for job_timeout + 10 s; a killed worker would hold its jobs that long.
        self.in_progress_timeout_s = lease_s
        self.liveness_window_s = liveness_window_s
        self.last_beat = time.monotonic()
        self._wake = asyncio.Event()
        self._found = 0  # jobs the last poll round saw due

    async def _poll_iteration(self) -> None:
        """arq's poll round; then, when it found nothing and nothing runs, a wait of at most IDLE_WAIT_S for a wake. The
        event is cleared before the round reads the queue, so a job enqueued during the round ends the wait at once."""
        self._wake.clear()
        self._found = 0
        await super()._poll_iteration()
        if self._found == 0 and self.running_jobs() == 0 and self.allow_pick_jobs:
            with contextlib.suppress(TimeoutError):  # well inside /livez's window, which each round's beat renews
                async with asyncio.timeout(min(IDLE_WAIT_S, self.liveness_window_s / 3)):
                    await self._wake.wait()

    async def listen_for_wakes(self) -> None:
        """Sets the wake event at each publish to this queue's wake channel. It reads with a timeout of its own
        (redis_client.PUBSUB_READ_WAIT_S), so a quiet channel keeps its connection (the queue's socket timeout would
        end it every 15 s); after an error it subscribes again, and meanwhile the idle wait's bound keeps jobs starting
        within IDLE_WAIT_S."""
        failures = 0
        while True:
            try:
                async with self.pool.pubsub() as pubsub:
                    await pubsub.subscribe(wake_channel(self.queue_name))
                    failures = 0
                    while True:
                        message = await pubsub.get_message(
                            ignore_subscribe_messages=True, timeout=redis_client.PUBSUB_READ_WAIT_S
                        )
                        if message is not None:
                            self._wake.set()
            except Exception as exc:  # Redis away or anything else: never the end of the wakes
                failures = min(failures + 1, 6)
                log.warning(
                    "worker.wake_listener_failed", extra={"worker": self.queue_name, "error_type": type(exc).__name__}
                )
                await asyncio.sleep(0.1 * 2**failures)

    def running_jobs(self) -> int:
        return sum(1 for task in list(self.tasks.values()) if not task.done())

    async def heart_beat(self) -> None:
        # arq's semaphore holds max_jobs + 1 permits, so a poll round never waits for a free slot: the heartbeat keeps
        # beating while every slot runs a long job (tests/workers/test_liveness.py)
        await self.record_health()
        # arq's own heartbeat schedules the cron runs due within the next second (two windows of its poll delay,
        # clamped to 0.5 s); an idle round may wait IDLE_WAIT_S, so it looks twice that far ahead (each run is
        # enqueued for its exact time, once: cron jobs are unique)
        await self.run_cron(datetime.now(tz=self.timezone), max(IDLE_WAIT_S, 0.5))
        self.last_beat = time.monotonic()

    async def start_jobs(self, job_ids: list[bytes]) -> None:
        """arq's start_jobs, with its claim of each job (WATCH, EXISTS, ZSCORE, MULTI/EXEC: four round trips) as one
        script doing the same checks (not running elsewhere, still queued, due) and setting the same lease."""
        self._found = len(job_ids)
        for job_id_b in job_ids:
            await self.sem.acquire()
            if self.job_counter >= self.max_jobs:
                self.sem.release()
                return
            self.job_counter += 1
            job_id = job_id_b.decode()
            try:
                score = await self.pool.eval(
                    CLAIM_JOB,
                    2,
                    in_progress_key_prefix + job_id,
                    self.queue_name,
                    job_id,
                    timestamp_ms(),
                    int(self.in_progress_timeout_s * 1000),
                )
            except BaseException:
                self._release_sem_dec_counter_on_complete()
                raise
            if score is None:  # running elsewhere, finished, or re-queued for later
                self._release_sem_dec_counter_on_complete()
                continue
            task = self.loop.create_task(self.run_job(job_id, int(float(score))))
            task.add_done_callback(lambda _: self._release_sem_dec_counter_on_complete())
            self.tasks[job_id] = task

    async def renew_leases(self) -> None:
        """Runs beside the poll loop (which can block while every job slot is busy)."""
        lease_ms = int(self.in_progress_timeout_s * 1000)
        while True:
            await asyncio.sleep(self.in_progress_timeout_s / 3)
            running = [job_id for job_id, task in list(self.tasks.items()) if not task.done()]
            if not running:
                continue
            try:
                async with self.pool.pipeline(transaction=False) as pipe:
                    for job_id in running:
                        pipe.pexpire(in_progress_key_prefix + job_id, lease_ms)
                    await pipe.execute()
            except RedisError:
                log.warning("worker.lease_renewal_failed", extra={"jobs": len(running)})


def _traced(job: Any) -> Any:
    """An arq Function or CronJob whose coroutine runs traced, from an empty context (no span, nothing suppressed):
    handle_event then continues the event's own trace."""
    inner = job.coroutine

    async def coroutine(ctx: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        token = otel_context.attach(otel_context.Context())
        try:
            return await inner(ctx, *args, **kwargs)
        finally:
            otel_context.detach(token)

    return replace(job, coroutine=coroutine)  # arq named the job when it was made: the name stays


async def _health(request: Request) -> JSONResponse:
    """Readiness: the worker can do its job (Postgres answers); Redis is reported, the worker retries it."""
    rt: Runtime = request.app.state.runtime
    checks = {"postgres": "up", "redis": "up"}
    try:
        await rt.pool.fetchval("SELECT 1", timeout=2)
    except Exception:
        checks["postgres"] = "down"
    try:
        async with asyncio.timeout(2):
            await rt.redis.ping()
    except Exception:
        checks["redis"] = "down"
    ok = checks["postgres"] == "up"
    return JSONResponse(
        {"status": "ok" if ok else "degraded", "service": rt.name, **checks}, status_code=200 if ok else 503
    )


async def _livez(request: Request) -> JSONResponse:
    """Liveness: the job loop is alive and not stuck. Waiting for Redis or Postgres to come back counts as alive:
    restarting the process would not bring them back."""
    host: WorkerHost = request.app.state.host
    worker = host.worker
    crashed = host.crashed()
    age = time.monotonic() - worker.last_beat
    stuck = host.loop_running and age > worker.liveness_window_s
    body = {
        "alive": not (crashed or stuck),
        "last_poll_s": round(age, 3),
        "running_jobs": worker.running_jobs(),
        "max_jobs": worker.max_jobs,
        "redis": "ok" if host.loop_running else "reconnecting",
    }
    return JSONResponse(body, status_code=503 if crashed or stuck else 200)


# Workers whose code holds session advisory locks (the embedder's profile builder, the consolidator's tenant lock):
# their connections keep asyncpg's reset on release, which also drops a lock an interrupted unlock left behind.
# The others keep no session state, and skip the reset's round trip (two per evaluation).
SESSION_STATE_WORKERS = ("embedder", "consolidator")


async def open_runtime(name: str, settings: WorkerSettings, max_jobs: int) -> Runtime:
    pool = await create_pool(
        settings,
        name,
        max_size=min(settings.db_max_connections, max_jobs + 4),
        transaction_state_only=name not in SESSION_STATE_WORKERS,
    )
    try:
        redis = await create_queue_pool(settings)
    except BaseException:
        await pool.close()
        raise
    return Runtime(
        name=name, settings=settings, pool=pool, redis=redis, state_redis=background_state_redis(settings, redis)
    )


async def close_runtime(rt: Runtime) -> None:
    await close_state_redis(rt.state_redis, rt.redis)
    await rt.redis.aclose()
    await rt.pool.close()


class WorkerHost:
    """One worker's job loop, lease renewal and (with a port) HTTP side server. `run_worker` adds process concerns
    (logging, tracing, signals); tests host workers in-process with this directly."""

    def __init__(
        self,
        rt: Runtime,
        handlers: Mapping[str, Handler],
        *,
        functions: Sequence[Function] = (),
        cron_jobs: Sequence[Any] = (),
        max_jobs: int = 16,
        port: int | None = None,
        routes: Sequence[BaseRoute] = (),
        liveness_window_s: float | None = None,
    ) -> None:
        """`liveness_window_s`: how long the job loop may go without a poll round before /livez answers 503
        (default: 30 s, or the lease if longer)."""
        settings = rt.settings
        self.rt = rt
        self.port = port
        self.loop_running = False
        self._stopped = False
        self.worker = _Worker(
            functions=[
                _traced(func(handle_event, name="handle_event", timeout=settings.worker_job_timeout_s + 30)),
                *(_traced(f) for f in functions),
            ],
            queue_name=queue_key(rt.name),
            cron_jobs=[_traced(c) for c in cron_jobs] or None,
            redis_pool=rt.redis,
            handle_signals=False,
            max_jobs=max_jobs,
            max_tries=ARQ_MAX_TRIES,
            job_serializer=job_serializer,
            job_deserializer=job_deserializer,
            ctx={
                "runtime": rt,
                "handlers": handlers,
                "max_tries": settings.worker_max_tries,
                "backoff_base": settings.worker_backoff_base_s,
                "backoff_max": settings.worker_backoff_max_s,
                "job_timeout": settings.worker_job_timeout_s,
            },
            keep_result=settings.worker_result_s,
            poll_delay=0.05,
            log_results=False,
            lease_s=settings.worker_lease_s,
            liveness_window_s=liveness_window_s or max(30.0, settings.worker_lease_s),
        )
        app = Starlette(
            routes=[Route("/health", _health), Route("/livez", _livez), Route("/metrics", metrics_endpoint), *routes]
        )
        app.state.runtime = rt
        app.state.host = self
        self.server = make_server(RequestMetrics(app, rt.name), settings.bind_host, port) if port else None

    async def start(self) -> None:
        # arq's polling and job bookkeeping (about ten Redis commands per job, twenty polls a second) would be most
        # of a worker's spans and say nothing about an event; the jobs themselves are traced again (_traced).
        with suppress_instrumentation():
            self._main = asyncio.create_task(self._run_loop())
            self._renewal = asyncio.create_task(self.worker.renew_leases())
            self._wakes = asyncio.create_task(self.worker.listen_for_wakes())
        self.worker.main_task = self._main  # arq's handle_sig cancels main_task
        self._server = asyncio.create_task(self.server.serve()) if self.server else None
        self._tasks = [t for t in (self._main, self._renewal, self._server) if t]
        deadline = time.monotonic() + 10
        while self.server and not self.server.started and not self._server.done() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)  # until the side server listens (or gave up), so /health answers at once

    async def _run_loop(self) -> None:
        """arq's loop ends at the first Redis error; a worker outlives a Redis restart by starting it again."""
        failures = 0
        while True:
            self.loop_running = True
            try:
                await self.worker.main()
                return
            except RedisError as exc:
                self.loop_running = False
                failures = min(failures + 1, 6)
                log.warning(
                    "worker.redis_unavailable", extra={"worker": self.rt.name, "error_type": type(exc).__name__}
                )
                await asyncio.sleep(0.1 * 2**failures)  # reconnect backoff

    def crashed(self) -> bool:
        return self._main.done() and not self._stopped

    async def wait(self) -> None:
        """Until the job loop or the HTTP server stops by itself (a crash)."""
        await asyncio.wait(self._tasks, return_when=asyncio.FIRST_COMPLETED)

    async def stop(self, grace: float | None = None) -> None:
        if self._stopped:
            return
        self._stopped = True
        grace = self.rt.settings.worker_shutdown_grace_s if grace is None else grace
        self.worker.allow_pick_jobs = False
        in_flight = [t for t in self.worker.tasks.values() if not t.done()]
        log.info("worker.stopping", extra={"worker": self.rt.name, "in_flight": len(in_flight)})
        if in_flight:
            await asyncio.wait(in_flight, timeout=grace)
        # Whatever still runs is cancelled; arq leaves cancelled jobs in the queue for the next worker.
        self.worker.handle_sig(signal.SIGTERM)
        await asyncio.gather(*self.worker.tasks.values(), return_exceptions=True)
        self._renewal.cancel()
        self._wakes.cancel()
        await asyncio.gather(self._wakes, return_exceptions=True)
        if self.server:
            self.server.should_exit = True
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self.loop_running = False


async def run_worker(
    name: str,
    handlers: Mapping[str, Handler],
    *,
    port: int,
    settings: WorkerSettings,
    routes: Sequence[BaseRoute] = (),
    on_startup: Callable[[Runtime], Awaitable[None]] | None = None,
    on_shutdown: Callable[[Runtime], Awaitable[None]] | None = None,
    max_jobs: int = 16,
    cron_jobs: Sequence[Any] = (),
    functions: Sequence[Function] = (),
) -> None:
    """Run one worker process until SIGTERM/SIGINT; in-flight jobs get a grace period, then go back to the queue."""
    setup_logging(name, settings.log_level)
    setup_tracing(f"memento-{name}", settings.otel_exporter_otlp_endpoint)
    heap.observe_pauses()
    max_jobs = settings.worker_max_jobs or max_jobs
    rt = await open_runtime(name, settings, max_jobs)
    if on_startup:
        await on_startup(rt)
    host = WorkerHost(
        rt, handlers, functions=functions, cron_jobs=cron_jobs, max_jobs=max_jobs, port=port, routes=routes
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await host.start()
    heap.settle()  # what startup built (the runtime, a model) is the process's for good (memento_shared.heap)
    log.info("worker.started", extra={"worker": name, "port": port})
    stopper = asyncio.create_task(stop.wait())
    await asyncio.wait([stopper, asyncio.create_task(host.wait())], return_when=asyncio.FIRST_COMPLETED)
    stopper.cancel()
    await host.stop()
    if on_shutdown:
        await on_shutdown(rt)
    await close_runtime(rt)
    log.info("worker.stopped", extra={"worker": name})

"""The arq runtime every worker shares: JSON jobs, one `handle_event` dispatcher, retries with backoff,
dead letters after the last try, and an HTTP side server for /health and /metrics.

A worker module only supplies its queue name and a dict of event type → handler.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import asyncpg
from arq.connections import ArqRedis, RedisSettings
from arq.connections import create_pool as create_arq_pool
from arq.worker import Retry, Worker, func
from opentelemetry import context as otel_context
from opentelemetry import trace
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

from memento_shared.db.pool import create_pool
from memento_shared.db.rls import set_system
from memento_shared.events import queue_key
from memento_shared.http import RequestMetrics, make_server
from memento_shared.settings import Settings
from memento_shared.telemetry.logging import setup_logging
from memento_shared.telemetry.metrics import DEAD_LETTERS, EVENT_PROCESSING, JOB_FAILURES, metrics_endpoint
from memento_shared.telemetry.tracing import extract_context, setup_tracing

log = logging.getLogger(__name__)


def job_serializer(obj: Any) -> bytes:
    # JSON, never pickle: producer and consumer are different services and versions.
    return json.dumps(obj, default=str).encode()


def job_deserializer(data: bytes) -> Any:
    return json.loads(data)


def redis_settings(settings: Settings) -> RedisSettings:
    return RedisSettings.from_dsn(settings.redis_url)


async def create_queue_pool(settings: Settings) -> ArqRedis:
    return await create_arq_pool(
        redis_settings(settings), job_serializer=job_serializer, job_deserializer=job_deserializer
    )


def backoff_seconds(job_try: int, base: float = 1.0, cap: float = 300.0) -> float:
    return min(cap, base * 2 ** (job_try - 1))


Handler = Callable[[dict, "Runtime"], Awaitable[None]]


@dataclass
class Runtime:
    """What handlers get: the pool (service role, RLS applies), Redis, settings and worker-specific state."""

    name: str
    settings: Settings
    pool: asyncpg.Pool
    redis: ArqRedis
    state: dict[str, Any] = field(default_factory=dict)


async def write_dead_letter(rt: Runtime, envelope: dict, error: str, attempts: int) -> None:
    async with rt.pool.acquire() as conn, conn.transaction():
        await set_system(conn)
        await conn.execute(
            "INSERT INTO agent_memory.dead_letters (event_id, queue, tenant_id, workspace, event_type, payload,"
            " traceparent, error, attempts) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
            " ON CONFLICT (event_id, queue) DO UPDATE SET error = EXCLUDED.error, attempts = EXCLUDED.attempts,"
            " created_at = now(), replayed_at = NULL",
            envelope["event_id"],
            rt.name,
            envelope["tenant_id"],
            envelope["workspace"],
            envelope["event_type"],
            envelope["payload"],
            envelope.get("traceparent"),
            error[:2000],
            attempts,
        )


async def handle_event(ctx: dict, envelope: dict) -> None:
    """The only arq job function: restore the trace, dispatch by event type, retry or dead-letter."""
    rt: Runtime = ctx["runtime"]
    handlers: dict[str, Handler] = ctx["handlers"]
    event_type = envelope.get("event_type", "unknown")
    handler = handlers.get(event_type)
    if handler is None:
        log.debug("event.unhandled", extra={"event_type": event_type, "worker": rt.name})
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
            await handler(envelope, rt)
        EVENT_PROCESSING.labels(event_type, "ok").observe(time.perf_counter() - started)
    except Exception as exc:
        EVENT_PROCESSING.labels(event_type, "error").observe(time.perf_counter() - started)
        JOB_FAILURES.labels(rt.name, event_type).inc()
        job_try = ctx.get("job_try", 1)
        error = f"{type(exc).__name__}: {exc}"
        if job_try < ctx["max_tries"]:
            log.warning(
                "event.retry", extra={"event_type": event_type, "job_try": job_try, "error_type": type(exc).__name__}
            )
            raise Retry(defer=backoff_seconds(job_try, ctx["backoff_base"])) from exc
        log.error("event.dead_lettered", extra={"event_type": event_type, "job_try": job_try})
        DEAD_LETTERS.labels(rt.name, event_type).inc()
        await write_dead_letter(rt, envelope, error, job_try)
    finally:
        otel_context.detach(token)


async def _health(request) -> JSONResponse:
    rt: Runtime = request.app.state.runtime
    checks = {"postgres": "up", "redis": "up"}
    try:
        await rt.pool.fetchval("SELECT 1", timeout=2)
    except Exception:
        checks["postgres"] = "down"
    try:
        await asyncio.wait_for(rt.redis.ping(), 2)
    except Exception:
        checks["redis"] = "down"
    ok = checks["postgres"] == "up"
    return JSONResponse(
        {"status": "ok" if ok else "degraded", "service": rt.name, **checks}, status_code=200 if ok else 503
    )


async def run_worker(
    name: str,
    handlers: dict[str, Handler],
    *,
    port: int,
    settings: Settings | None = None,
    routes: Sequence[BaseRoute] = (),
    on_startup: Callable[[Runtime], Awaitable[None]] | None = None,
    on_shutdown: Callable[[Runtime], Awaitable[None]] | None = None,
    max_jobs: int = 16,
    cron_jobs: Sequence[Any] = (),
) -> None:
    """Run one worker process until SIGTERM/SIGINT; in-flight jobs get a grace period, then go back to the queue."""
    settings = settings or Settings()
    setup_logging(name, settings.log_level)
    setup_tracing(f"memento-{name}", settings.otel_exporter_otlp_endpoint)
    pool = await create_pool(settings, name, max_size=min(settings.db_max_connections, max_jobs + 2))
    redis = await create_queue_pool(settings)
    rt = Runtime(name=name, settings=settings, pool=pool, redis=redis)
    if on_startup:
        await on_startup(rt)
    max_tries = int(rt.state.get("max_tries", 5))
    worker = Worker(
        functions=[func(handle_event, name="handle_event")],
        queue_name=queue_key(name),
        cron_jobs=list(cron_jobs) or None,
        redis_pool=redis,
        handle_signals=False,
        max_jobs=max_jobs,
        max_tries=max_tries,
        job_serializer=job_serializer,
        job_deserializer=job_deserializer,
        ctx={
            "runtime": rt,
            "handlers": handlers,
            "max_tries": max_tries,
            "backoff_base": float(rt.state.get("backoff_base", 1.0)),
        },
        keep_result=3600,
        poll_delay=0.05,
        log_results=False,
    )
    app = Starlette(routes=[Route("/health", _health), Route("/metrics", metrics_endpoint), *routes])
    app.state.runtime = rt
    server = make_server(RequestMetrics(app, name), settings.bind_host, port)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    worker_task = asyncio.create_task(worker.main())
    worker.main_task = worker_task  # arq's handle_sig cancels main_task, which only its own run() would set
    server_task = asyncio.create_task(server.serve())
    log.info("worker.started", extra={"worker": name, "port": port})
    await asyncio.wait(
        [asyncio.create_task(stop.wait()), worker_task, server_task], return_when=asyncio.FIRST_COMPLETED
    )

    log.info("worker.stopping", extra={"worker": name, "in_flight": len(worker.tasks)})
    worker.allow_pick_jobs = False
    deadline = time.monotonic() + 20
    while any(not t.done() for t in worker.tasks.values()) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    # Whatever is still running is cancelled; arq re-queues jobs whose in-progress key expires.
    worker.handle_sig(signal.SIGTERM)
    server.should_exit = True
    await asyncio.gather(worker_task, server_task, return_exceptions=True)
    if on_shutdown:
        await on_shutdown(rt)
    await redis.aclose()
    await pool.close()
    log.info("worker.stopped", extra={"worker": name})

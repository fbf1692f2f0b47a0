"""memory-api composition root: every tool and resource as an internal HTTP API, plus the outbox relay."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable
from typing import Any

import asyncpg
from fastapi import FastAPI
from redis.asyncio import Redis

from memento_memory_api import llm, tools  # noqa: F401  (tools: binds the handlers)
from memento_memory_api.access import AccessRecorder
from memento_memory_api.after_ack import AfterAck
from memento_memory_api.context import Profile
from memento_memory_api.embedding_client import EmbeddingClient
from memento_memory_api.outbox_relay import Relay
from memento_memory_api.recall.fresh import VectorWriteBack
from memento_memory_api.recall.l1 import L1Keeper
from memento_memory_api.recall.vector import PartitionVerdicts
from memento_memory_api.routes import console, health, keys, prompts, resources, tasks
from memento_memory_api.routes import tools as tool_routes
from memento_memory_api.settings import MemoryApiSettings
from memento_memory_api.tasks import TaskRunner
from memento_memory_api.uow import UnitOfWorkFactory
from memento_shared import background, redis_client
from memento_shared import l1 as l1_layout
from memento_shared.consolidation import utility_half_life_days
from memento_shared.db.pool import assert_not_privileged, create_pool
from memento_shared.events import PROFILE_CHANNEL
from memento_shared.http import RequestMetrics
from memento_shared.worker import background_state_redis, close_state_redis, create_queue_pool

log = logging.getLogger(__name__)


async def load_active_profile(pool: asyncpg.Pool) -> Profile:
    row = await pool.fetchrow("SELECT id, dimension, provider FROM agent_memory.embedding_profiles WHERE is_active")
    if row is None:
        raise RuntimeError("no active embedding profile; run memento-migrate")
    return Profile(row["id"], row["dimension"], row["provider"])


class ProfileWatch:
    """Follows the active embedding profile: the embedder NOTIFYs on cut-over, and a periodic re-read covers a
    missed notification. Recall then searches, and embeds queries for, the new profile."""

    def __init__(self, state: Any, dsn: str, interval: float = 30.0) -> None:
        self.state = state
        self.dsn = dsn
        self.interval = interval
        self.changed = asyncio.Event()
        self._task: asyncio.Task[Any] | None = None
        self._listener: asyncpg.Connection | None = None

    async def start(self) -> None:
        self._listener = await background.listen(self.dsn, PROFILE_CHANNEL, self.changed.set, "memento.profiles")
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            try:
                async with asyncio.timeout(self.interval):
                    await self.changed.wait()
            except TimeoutError:
                pass
            self.changed.clear()
            try:
                profile = await load_active_profile(self.state.pool)
            except Exception as exc:  # keep searching the profile we have
                log.warning("profiles.reload_failed", extra={"error_type": type(exc).__name__})
                continue
            if profile != self.state.profile:
                log.info("profiles.cut_over", extra={"profile": profile.id})
                self.state.profile = profile

    async def stop(self) -> None:
        await background.cancel(self._task)
        await background.close(self._listener)


SHUTDOWN_STEP_SECONDS = 10.0


async def _bounded(step: str, awaitable: Awaitable[Any]) -> None:
    """One shutdown step, never longer than SHUTDOWN_STEP_SECONDS: a stuck step must not keep the process (or a
    pod being replaced) alive. Which step overran is logged so it can be found."""
    try:
        async with asyncio.timeout(SHUTDOWN_STEP_SECONDS):
            await awaitable
    except TimeoutError:
        log.warning("shutdown.step_timed_out", extra={"step": step})
    except Exception as exc:
        log.warning("shutdown.step_failed", extra={"step": step, "error_type": type(exc).__name__})


async def shutdown(state: Any) -> None:
    await _bounded("tasks", state.tasks.stop())
    await _bounded("after_ack", state.after_ack.stop())  # before the relay: its jobs write events
    await _bounded("relay", state.relay.stop())
    await _bounded("profile_watch", state.profile_watch.stop())
    await _bounded("l1_keeper", state.l1_keeper.stop())
    await _bounded("access_flush", state.access.stop())
    await _bounded("fresh_write_back", state.write_back.stop())
    await _bounded("embedder_client", state.embedder.aclose())
    await _bounded("llm", state.llm.aclose())
    if state.heuristic is not None:
        await _bounded("heuristic", state.heuristic.aclose())
    await _bounded("state_redis", close_state_redis(state.state_redis, state.queue))
    await _bounded("queue", state.queue.aclose())
    if state.l1_redis is not None:
        await _bounded("request_redis", state.l1_redis.aclose())
    try:
        async with asyncio.timeout(SHUTDOWN_STEP_SECONDS):
            await state.pool.close()
    except TimeoutError:
        log.warning("shutdown.step_timed_out", extra={"step": "pool"})
        state.pool.terminate()  # a connection was never given back: close them all without waiting


def request_redis(settings: MemoryApiSettings) -> Redis:
    """The state Redis (REDIS_URL, maybe a cluster) for the work on a request's path (L1, working memory): one that
    stops answering costs a call at most REDIS_TIMEOUT_SECONDS before it goes on without (L1 skipped, §9.1), never a
    hang. Acknowledged writes wait for REDIS_WAIT_REPLICAS replicas."""
    return redis_client.client(
        settings.redis_url,
        timeout=settings.redis_timeout_s,
        wait_replicas=settings.redis_wait_replicas,
        wait_timeout_ms=settings.redis_wait_timeout_ms,
    )


def create_app(settings: MemoryApiSettings) -> FastAPI:
    if not settings.internal_secret:
        raise RuntimeError("MEMENTO_INTERNAL_SECRET is not set: memory-api cannot verify the gateway's principal")

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state = app.state
        state.settings = settings
        state.pool = await create_pool(settings, "memory-api", transaction_state_only=True)
        await assert_not_privileged(state.pool)
        state.queue = await create_queue_pool(settings)
        state.l1_redis = request_redis(settings) if settings.redis_enabled else None
        state.embedder = EmbeddingClient(settings.embedder_url)
        state.llm = llm.from_settings(settings)
        state.heuristic = llm.heuristic_from_settings(settings)
        state.profile = await load_active_profile(state.pool)
        state.profile_watch = ProfileWatch(state, settings.database_url)
        await state.profile_watch.start()
        state.uow = UnitOfWorkFactory(state.pool)
        state.access = AccessRecorder(state.pool, utility_half_life_days(settings))
        state.partition_verdicts = PartitionVerdicts()
        state.write_back = VectorWriteBack(state.pool)
        state.after_ack = AfterAck(settings.memory_heuristic_concurrency)
        state.access.start()
        # the state Redis for background work (tasks' records, L1's rebuild) with the queue's timeouts, not
        # REDIS_TIMEOUT_SECONDS: the gateway reads tasks there, whichever Redis holds the queues
        state.state_redis = background_state_redis(settings, state.queue)
        state.tasks = TaskRunner(state)
        state.relay = Relay(state.pool, state.queue, settings.database_url, settings=settings)
        state.relay.start()
        keeper_redis = state.state_redis if settings.redis_enabled else None
        state.l1_keeper = L1Keeper(keeper_redis, state.pool, weights=l1_layout.weights(settings.memory_config))
        await state.l1_keeper.start()
        log.info("memory_api.started", extra={"profile": state.profile.id})
        try:
            yield
        finally:
            await shutdown(state)

    # FastAPI's native telemetry is off: every service's server span comes from the one ASGI middleware
    # (memento_shared.http.make_server), and FastAPI, not seeing it inside its own stack, added a second server span
    # and three operation spans to every request, and HTTP metrics beside ours.
    app = FastAPI(
        title="memento memory-api",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        telemetry={"tracing": False, "metrics": False, "logs": False, "operation_spans": False},
    )
    app.include_router(tool_routes.router)
    app.include_router(resources.router)
    app.include_router(prompts.router)
    app.include_router(tasks.router)
    app.include_router(health.router)
    app.include_router(keys.router)
    app.include_router(console.router)
    app.add_middleware(RequestMetrics, service="memory-api")
    return app

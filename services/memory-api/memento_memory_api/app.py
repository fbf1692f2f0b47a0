"""memory-api composition root: every tool and resource as an internal HTTP API, plus the outbox relay."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator

import httpx
from fastapi import FastAPI

from memento_memory_api import tools  # noqa: F401  (binds the handlers)
from memento_memory_api.access import AccessRecorder
from memento_memory_api.context import Profile
from memento_memory_api.embedding_client import EmbeddingClient
from memento_memory_api.outbox_relay import Relay
from memento_memory_api.recall.l1 import L1Keeper
from memento_memory_api.routes import health, keys
from memento_memory_api.routes import tools as tool_routes
from memento_memory_api.uow import UnitOfWorkFactory
from memento_shared.db.pool import assert_not_privileged, create_pool
from memento_shared.http import RequestMetrics
from memento_shared.settings import Settings
from memento_shared.worker import create_queue_pool

log = logging.getLogger(__name__)


async def load_active_profile(pool) -> Profile:
    row = await pool.fetchrow("SELECT id, dimension FROM agent_memory.embedding_profiles WHERE is_active")
    if row is None:
        raise RuntimeError("no active embedding profile; run memento-migrate")
    return Profile(row["id"], row["dimension"])


def create_app(settings: Settings) -> FastAPI:
    if not settings.internal_secret:
        raise RuntimeError("MEMENTO_INTERNAL_SECRET is not set: memory-api cannot verify the gateway's principal")

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state = app.state
        state.settings = settings
        state.pool = await create_pool(settings, "memory-api")
        await assert_not_privileged(state.pool)
        state.queue = await create_queue_pool(settings)
        state.l1_redis = state.queue if settings.redis_enabled else None
        state.http = httpx.AsyncClient(limits=httpx.Limits(max_connections=100))
        state.embedder = EmbeddingClient(settings.embedder_url, state.http)
        state.profile = await load_active_profile(state.pool)
        state.uow = UnitOfWorkFactory(state.pool)
        state.background = set()
        state.access = AccessRecorder(state.pool)
        state.access.start()
        state.relay = Relay(state.pool, state.queue, settings.database_url)
        state.relay.start()
        state.l1_keeper = L1Keeper(state.l1_redis, state.pool)
        await state.l1_keeper.start()
        log.info("memory_api.started", extra={"profile": state.profile.id})
        try:
            yield
        finally:
            await state.relay.stop()
            await state.l1_keeper.stop()
            await state.access.stop()
            for task in list(state.background):
                await task
            await state.http.aclose()
            await state.queue.aclose()
            await state.pool.close()

    app = FastAPI(title="memento memory-api", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.include_router(tool_routes.router)
    app.include_router(health.router)
    app.include_router(keys.router)
    app.add_middleware(RequestMetrics, service="memory-api")
    return app

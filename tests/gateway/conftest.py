"""Gateways in this process, on real loopback sockets, in front of a real memory-api (also in this process) on the
session's embedded Postgres and Valkey. Real HTTP matters here: SSE streams, disconnects and the official SDK
client only behave as they would in production over a socket.

`gateways(**env)` starts one more gateway with extra settings; several share Redis, like replicas do.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from starlette.applications import Starlette

from memento_devtools.embedded import free_port
from memento_gateway.app import create_app as create_gateway
from memento_memory_api.app import create_app as create_memory_api
from memento_shared.http import QuietServer, make_server
from tests.fixtures.servers import Servers
from tests.fixtures.settings import Settings

ACCESS_KEY = "gateway-test-key-" + "k" * 16
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@dataclass
class Running:
    app: Starlette
    server: QuietServer
    task: asyncio.Task
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def stop(self) -> None:
        self.server.should_exit = True
        try:
            async with asyncio.timeout(5):
                await asyncio.shield(self.task)
        except TimeoutError:  # a stream a test left open: do not wait for the graceful period
            self.server.force_exit = True
            await self.task


async def serve(app: Any, port: int | None = None) -> Running:
    port = port or free_port()
    server = make_server(app, "127.0.0.1", port)
    task = asyncio.create_task(server.serve())
    deadline = time.monotonic() + 30
    while not server.started:
        assert not task.done(), "server did not start (see its log above)"
        assert time.monotonic() < deadline, "server did not start in time"
        await asyncio.sleep(0.01)  # bounded poll for uvicorn's startup flag
    return Running(app, server, task, port)


@pytest.fixture(scope="session")
async def memory_api_url(servers: Servers) -> AsyncIterator[str]:
    running = await serve(create_memory_api(servers.settings()))
    yield running.url
    await running.stop()


@dataclass
class Gateway:
    running: Running
    settings: Settings

    @property
    def url(self) -> str:
        return self.running.url

    @property
    def mcp_url(self) -> str:
        return self.running.url + "/mcp"

    @property
    def state(self) -> Any:
        return self.running.app.state.gateway

    def client(self, *, key: str | None = ACCESS_KEY, url: str | None = None, **kwargs: Any) -> Client:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        http = create_mcp_http_client(headers=headers)
        return Client(streamable_http_client(url or self.mcp_url, http_client=http), **kwargs)

    def http(self, **headers: str) -> httpx.AsyncClient:
        base = {**MCP_HEADERS, "Authorization": f"Bearer {ACCESS_KEY}", **headers}
        return httpx.AsyncClient(base_url=self.url, headers=base, timeout=10, trust_env=False)

    async def session(self, http: httpx.AsyncClient, version: str = "2025-11-25", path: str = "/mcp") -> str:
        """A raw initialize + initialized; the session id."""
        answer = await http.post(path, json=initialize(version))
        assert answer.status_code == 200, answer.text
        session_id = answer.headers["mcp-session-id"]
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await http.post(path, json=note, headers={"Mcp-Session-Id": session_id})).status_code == 202
        return session_id


def initialize(version: str = "2025-11-25", msg_id: int = 1) -> dict[str, Any]:
    params = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "tests", "version": "1"}}
    return {"jsonrpc": "2.0", "id": msg_id, "method": "initialize", "params": params}


@pytest.fixture(scope="session")
def gateway_data_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Shared by every gateway in the session, as replicas share a data dir or a secret: one OAuth signing key."""
    return str(tmp_path_factory.mktemp("gateway-data"))


async def launch(servers: Servers, memory_api_url: str, data_dir: str, **env: str) -> Gateway:
    values = {"MEMENTO_ACCESS_KEY": ACCESS_KEY, "MEMORY_API_URL": memory_api_url, "MEMENTO_DATA_DIR": data_dir, **env}
    port = free_port()
    settings = servers.settings(**values).model_copy(update={"port": port})
    return Gateway(await serve(create_gateway(settings), port), settings)


@pytest.fixture
async def fresh_buckets(servers: Servers) -> None:
    """Rate buckets live in Redis and outlast a test: each test starts with full ones."""
    redis = aioredis.from_url(servers.valkey.url)
    stale = [key async for key in redis.scan_iter("memento:rate:*")]
    if stale:
        await redis.delete(*stale)
    await redis.aclose()


@pytest.fixture
async def gateways(
    servers: Servers, memory_api_url: str, gateway_data_dir: str, fresh_buckets: None
) -> AsyncIterator[Callable[..., Awaitable[Gateway]]]:
    """Starts gateways with extra settings for one test; several of them are replicas of one another."""
    started: list[Gateway] = []

    async def start(**env: str) -> Gateway:
        started.append(await launch(servers, memory_api_url, gateway_data_dir, **env))
        return started[-1]

    yield start
    for gateway in started:
        await gateway.running.stop()


@pytest.fixture(scope="session")
async def default_gateway(servers: Servers, memory_api_url: str, gateway_data_dir: str) -> AsyncIterator[Gateway]:
    gateway = await launch(servers, memory_api_url, gateway_data_dir)
    yield gateway
    await gateway.running.stop()


@pytest.fixture
async def gateway(default_gateway: Gateway, fresh_buckets: None) -> Gateway:
    """A gateway with the default settings, shared by the tests that need nothing else (stopping one costs time)."""
    return default_gateway

"""The gateway and memory-api on a real three-primary Valkey Cluster (the embedded binary in cluster mode, one replica
per primary, loopback ports) for the state role, and a Valkey of their own for the queue role: the MCP SDK client's
session, rate limits, working memory, L1 and recall all run on the cluster. Mid-run, the primary holding the tenant's
slot is killed and its replica promoted, then the dead node restarts as the new primary's replica; every write the
client was told succeeded is still there afterwards (REDIS_WAIT_REPLICAS=1), and the same MCP session goes on. While
the promoted primary has no replica, session-scope writes are refused (WAIT finds none), never falsely acknowledged.
The short form: bench/cluster_failover.py runs it longer and reports its figures.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from redis.crc import key_slot

from memento_devtools.embedded import EmbeddedValkeyCluster, start_valkey, start_valkey_cluster
from memento_gateway.app import create_app as create_gateway
from memento_memory_api.app import create_app as create_memory_api
from memento_shared import keys, l1, redis_client, working_memory
from tests.fixtures.servers import Servers
from tests.fixtures.waiting import eventually
from tests.gateway.conftest import ACCESS_KEY, Running, serve

TENANT = "default"  # the operator's (the access key's) tenant
WRITES = 24  # per writer; the primary dies after KILL_AFTER acknowledged ones
WRITERS = 2
KILL_AFTER = 8


@dataclass
class Stack:
    cluster: EmbeddedValkeyCluster
    queue_url: str
    memory_api: Running
    gateway: Running
    acked: list[tuple[str, str]] = field(default_factory=list)  # (fragment id, keyword) of durable remembers
    acked_session: list[str] = field(default_factory=list)  # working-memory entry ids
    failed: int = 0
    acked_after_kill: dict[str, int] = field(default_factory=lambda: {"durable": 0, "session": 0})


@pytest.fixture
async def stack(servers: Servers, tmp_path) -> AsyncIterator[Stack]:
    password = secrets.token_urlsafe(12)
    cluster = start_valkey_cluster(tmp_path / "cluster", password=password)
    queue = start_valkey(tmp_path / "queue", password=password)
    env = {
        "REDIS_URL": cluster.url,
        "REDIS_QUEUE_URL": queue.url,
        "REDIS_WAIT_REPLICAS": "1",
        "MEMENTO_ACCESS_KEY": ACCESS_KEY,
        "MEMENTO_DATA_DIR": str(tmp_path / "gateway"),
    }
    try:
        memory_api = await serve(create_memory_api(servers.settings(**env)))
        try:
            gateway = await serve(create_gateway(servers.settings(**env, MEMORY_API_URL=memory_api.url)))
            try:
                yield Stack(cluster, queue.url, memory_api, gateway)
            finally:
                await gateway.stop()
        finally:
            await memory_api.stop()
    finally:
        cluster.stop()
        queue.stop()


def mcp_client(stack: Stack) -> Client:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {ACCESS_KEY}"})
    return Client(streamable_http_client(stack.gateway.url + "/mcp", http_client=http))


async def writer(stack: Stack, client: Client, name: str, killed: asyncio.Event, enough: asyncio.Event) -> None:
    """Durable and session-scope remembers in turn; each answered success is recorded as acknowledged."""
    for i in range(WRITES):
        keyword = f"{name}x{i}"
        durable = {"content": f"{name} fact {i}", "topic": "cluster", "type": "fact", "keywords": [keyword]}
        session = {"content": f"{name} note {i}", "topic": "cluster", "type": "fact", "scope": "session"}
        for arguments in (durable, session):
            try:
                result = await client.call_tool("remember", arguments)
            except Exception:  # a 503 while the slot had no primary: not acknowledged
                stack.failed += 1
                continue
            if result.is_error:
                stack.failed += 1
                continue
            stored = json.loads(result.content[0].text)
            if killed.is_set():
                stack.acked_after_kill["session" if "scope" in arguments else "durable"] += 1
            if "scope" in arguments:
                stack.acked_session.append(stored["id"])
            else:
                stack.acked.append((stored["id"], keyword))
        if len(stack.acked) >= KILL_AFTER:
            enough.set()
        await asyncio.sleep(0.02)  # the writers and the failover interleave


async def all_keys(cluster: EmbeddedValkeyCluster) -> list[str]:
    client = redis_client.client(cluster.url, timeout=5)
    try:
        return [k.decode() async for k in client.scan_iter(count=1000)]
    finally:
        await client.aclose()


async def test_mcp_on_a_valkey_cluster_survives_a_primary_killed_mid_run(stack: Stack):
    cluster = stack.cluster
    async with mcp_client(stack) as client:
        killed, enough = asyncio.Event(), asyncio.Event()
        tasks = [asyncio.create_task(writer(stack, client, f"w{n}", killed, enough)) for n in range(WRITERS)]
        async with asyncio.timeout(60):
            await enough.wait()
        doomed = cluster.primary_for_slot(key_slot(keys.tag(TENANT).encode()))
        promoted = await asyncio.to_thread(cluster.kill_and_promote, doomed)
        killed.set()
        await asyncio.to_thread(cluster.restart, doomed)  # back, as the promoted node's replica
        async with asyncio.timeout(120):
            await asyncio.gather(*tasks)
        assert promoted.port != doomed.port and promoted in cluster.nodes
        assert cluster.primary_for_slot(key_slot(keys.tag(TENANT).encode())).port == promoted.port
        assert stack.acked_after_kill["durable"] and stack.acked_after_kill["session"], "writes went on after it"

        # the same MCP session goes on: its key was on the killed primary, and on the replica before initialize's answer
        found = json.loads((await client.call_tool("recall", {"keywords": [stack.acked[-1][1]]})).content[0].text)
        assert [f["id"] for f in found["fragments"]] == [stack.acked[-1][0]]

    state = redis_client.client(cluster.url, timeout=5)
    try:
        # L1: every acknowledged fragment is in its keyword set once L1 is ready again (an L1 write that failed during
        # the failover had it rebuilt from Postgres; one that was acknowledged by WAIT was on the replica)
        async def l1_whole() -> bool:
            if not await state.exists(l1.READY_KEY):
                return False
            for fragment_id, keyword in stack.acked:
                if await state.zscore(l1.key(TENANT, "default", "default", keyword), fragment_id) is None:
                    return False
            return True

        await eventually(l1_whole, 60, "every acknowledged fragment in L1 after the failover")
        # working memory has no rebuild: each acknowledged entry survived because WAIT saw it on the replica
        session_lists = [k for k in await all_keys(cluster) if k.startswith("memento:wm:")]
        entries = [e["id"] for k in session_lists for e in await working_memory.entries(state, k)]
        assert set(stack.acked_session) <= set(entries) and stack.acked_session
    finally:
        await state.aclose()

    # every key on the cluster is one memento_shared.keys names, with its tag; the queues are elsewhere
    found = await all_keys(cluster)
    assert found and all(keys.known(k) for k in found), [k for k in found if not keys.known(k)]
    assert {key_slot(k.encode()) for k in found if keys.tag(TENANT) in k} == {key_slot(keys.tag(TENANT).encode())}
    queue = redis_client.client(stack.queue_url, timeout=5)
    try:
        assert await queue.exists("memento:queue:embedder"), "the relay enqueued on the queue role"
    finally:
        await queue.aclose()


async def test_a_task_on_split_roles_is_polled_to_completion(stack: Stack):
    """A task's record lives in the state role (memento_shared.tasks, keys.py), where any gateway replica reads and
    cancels it, whichever Redis holds the queues: memory-api wrote it to the queue role's before, and on split roles
    every tasks/get answered "not found"."""
    from tests.gateway.tasks_client import Tasks, get

    tasks = Tasks()
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {ACCESS_KEY}"})
    client = Client(
        streamable_http_client(stack.gateway.url + "/mcp?profile=lifecycle", http_client=http), extensions=[tasks]
    )
    async with client as session:
        result = await session.call_tool("memory_run_maintenance", {"session_id": "s1"})
        assert not result.is_error and result.structured_content["ok"] is True, result.content
        (created,) = tasks.created
        done = await get(session, created.task_id)
        assert done.status == "completed" and done.result["structuredContent"] == result.structured_content
    found = await all_keys(stack.cluster)
    assert any(k.startswith("memento:task:{") for k in found) and all(keys.known(k) for k in found)

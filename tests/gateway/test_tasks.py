"""The tasks extension through the gateway with the official SDK: the long tools answer a client that declares
`io.modelcontextprotocol/tasks` with a task, polled with tasks/get to its result; a task lives in Redis and in
memory-api, so it outlives the gateway replica that started it and any replica answers for it; tasks/cancel
stops one; a task whose runner is gone is reported failed; only its owner sees it. memory_consolidate's work runs on
a consolidator worker hosted here when a test needs one to finish."""

from __future__ import annotations

import secrets

import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from memento_consolidator import jobs
from memento_consolidator.handlers import HANDLERS
from memento_shared import tasks as records
from memento_shared.consolidation import STAGES
from memento_shared.events import queue_key
from tests.fixtures.waiting import eventually
from tests.gateway.conftest import ACCESS_KEY
from tests.gateway.tasks_client import CreatedTask, Tasks, cancel, get, settled
from tests.gateway.test_api_keys import new_key
from tests.workers.conftest import hosted_worker


def client(gateway, workspace: str, *, profile: str, key: str = ACCESS_KEY, tasks: Tasks | None = None) -> Client:
    headers = {"Authorization": f"Bearer {key}", "X-Memento-Workspace": workspace}
    http = create_mcp_http_client(headers=headers)
    extensions = [tasks] if tasks is not None else []
    return Client(
        streamable_http_client(f"{gateway.mcp_url}?profile={profile}", http_client=http), extensions=extensions
    )


async def started(session, tool: str, arguments: dict) -> CreatedTask:
    """The task a tools/call answered with, taken as it is (not resolved by polling)."""
    result = await session.session.call_tool(tool, arguments, allow_claimed=True)
    assert isinstance(result, CreatedTask), result
    return result


@pytest.fixture
def workspace() -> str:
    return "task-" + secrets.token_hex(5)


@pytest.fixture
async def no_stray_consolidations(redis_client):
    """memory_consolidate's jobs that no worker took here are removed afterwards, not left for a later test."""
    yield
    queue = queue_key("consolidator")
    for job in await redis_client.zrange(queue, 0, -1):
        if job.startswith(b"consolidate:"):
            await redis_client.zrem(queue, job)


async def test_a_long_tool_runs_as_a_task_polled_to_completion(gateway, workspace):
    tasks = Tasks()
    async with client(gateway, workspace, profile="lifecycle", tasks=tasks) as session:
        assert "io.modelcontextprotocol/tasks" in session.server_capabilities.extensions
        result = await session.call_tool("memory_run_maintenance", {"session_id": "s1"})
        assert not result.is_error and result.structured_content["ok"] is True
        (created,) = tasks.created
        assert created.status == "working" and created.ttl_ms == records.TTL_S * 1000 and created.poll_interval_ms
        done = await get(session, created.task_id)
        assert done.status == "completed" and done.result["structuredContent"] == result.structured_content
        # arguments it cannot take: answered at once as the tool's error, no task
        refused = await session.call_tool("memory_run_maintenance", {"session_id": 5})
        assert refused.is_error and "session_id" in refused.content[0].text and len(tasks.created) == 1
        # a short tool is never a task
        listed = await session.call_tool("memory_list_dir_with_abstract", {"session_id": "s1"})
        assert not listed.is_error and len(tasks.created) == 1
    async with client(gateway, workspace, profile="lifecycle") as plain:  # no extension declared: no task
        answered = await plain.call_tool("memory_run_maintenance", {"session_id": "s1"})
        assert not answered.is_error and answered.structured_content["ok"] is True


async def test_memento_consolidate_as_a_task(gateway, workspace):
    tasks = Tasks()
    async with client(gateway, workspace, profile="protocol", tasks=tasks) as session:
        ids = []
        for text in ("The API runs on port 8080", "The API listens on port 8080 in staging too"):
            stored = await session.call_tool("memento_store", {"content": text, "type": "fact"})
            ids.append(stored.structured_content["id"])
        merged = await session.call_tool("memento_consolidate", {"source_ids": ids, "content": "The API: port 8080"})
        assert not merged.is_error and merged.structured_content["sources"] == ids and len(tasks.created) == 1
        assert merged.content[0].text.startswith("Consolidated 2 memories")  # the dialect's own words, kept


async def test_a_task_outlives_the_replica_that_started_it(gateways, servers, workspace, no_stray_consolidations):
    first, second = await gateways(), await gateways()
    async with client(first, workspace, profile="fragments", tasks=Tasks()) as session:
        await session.call_tool("remember", {"content": "consolidate me", "topic": workspace, "type": "fact"})
        created = await started(session, "memory_consolidate", {})
    await first.running.stop()  # the replica that took the call is gone; no worker has run the job yet
    async with client(second, workspace, profile="fragments", tasks=Tasks()) as other:
        assert (await get(other, created.task_id)).status == "working"
        async with hosted_worker("consolidator", HANDLERS, servers.settings(), functions=jobs.functions(60)):
            done = await settled(other, created.task_id)
    assert done.status == "completed", done
    assert list(done.result["structuredContent"]["stages"]) == list(STAGES) and not done.result["isError"]


async def test_a_task_is_cancelled_and_only_its_owner_sees_it(
    gateway, workspace, app_pool, tenant, redis_client, no_stray_consolidations
):
    async with client(gateway, workspace, profile="fragments", tasks=Tasks()) as session:
        created = await started(session, "memory_consolidate", {})  # no worker: it waits until cancelled
        stranger_key = await new_key(app_pool, tenant, scopes=["read", "write", "admin"])
        async with client(gateway, workspace, profile="fragments", key=stranger_key, tasks=Tasks()) as stranger:
            for attempt in (get, cancel):
                with pytest.raises(MCPError) as hidden:
                    await attempt(stranger, created.task_id)
                assert hidden.value.error.code == -32602 and "not found" in hidden.value.error.message
        await cancel(session, created.task_id)
        task = await get(session, created.task_id)
        assert task.status == "cancelled" and task.result is None
        # the runner in memory-api stopped: its lease is dropped
        await eventually(lambda: _gone(redis_client, records.lease_key(created.task_id)), 10, "the runner to stop")
        await cancel(session, created.task_id)  # cancelling again is acknowledged, and changes nothing
        assert (await get(session, created.task_id)).status == "cancelled"
        with pytest.raises(MCPError) as unknown:
            await get(session, "no-such-task")
        assert unknown.value.error.code == -32602


async def _gone(redis, key: str) -> bool:
    return not await redis.exists(key)


async def test_a_task_whose_runner_is_gone_is_reported_failed(
    gateway, workspace, redis_client, no_stray_consolidations
):
    async with client(gateway, workspace, profile="fragments", tasks=Tasks()) as session:
        created = await started(session, "memory_consolidate", {})
        await redis_client.delete(records.lease_key(created.task_id))  # what a killed memory-api replica leaves
        task = await get(session, created.task_id)
        assert task.status == "failed" and task.error["code"] == -32603 and "stopped" in task.status_message
        await cancel(session, created.task_id)  # the runner, still alive here, stops; the record stays failed
        assert (await get(session, created.task_id)).status == "failed"


async def test_tasks_methods_need_the_extension(gateway):
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"_meta": meta, "taskId": "x"}}
    headers = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tasks/get", "Mcp-Name": "x"}
    async with gateway.http() as http:
        answer = (await http.post("/mcp", json=body, headers=headers)).json()
        assert answer["error"]["code"] == -32021
        assert answer["error"]["data"] == {
            "requiredCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}
        }
        session = await gateway.session(http)  # 2025 sessions have no tasks
        legacy = {"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"taskId": "x"}}
        assert (await http.post("/mcp", json=legacy, headers={"Mcp-Session-Id": session})).json()["error"][
            "code"
        ] == -32601

"""Issue 51's features through the whole system as `make run` starts it, with the official SDK: a consolidation
run as a task on the real consolidator process and polled to completion, prompts and completions, and a
subscription on a second gateway process that hears a change made through the first."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.subscriptions import ResourceUpdated
from mcp_types import PromptReference

from memento_shared.consolidation import STAGES
from tests.e2e.conftest import ACCESS_KEY, another_gateway
from tests.gateway.tasks_client import Tasks

pytestmark = pytest.mark.e2e


def client(mcp_url: str, workspace: str, profile: str, **kwargs) -> Client:
    headers = {"Authorization": f"Bearer {ACCESS_KEY}", "X-Memento-Workspace": workspace}
    return Client(
        streamable_http_client(f"{mcp_url}?profile={profile}", http_client=create_mcp_http_client(headers=headers)),
        **kwargs,
    )


async def test_a_consolidation_runs_as_a_task_on_the_consolidator(system):
    workspace, tasks = f"e2e-task-{time.time_ns()}", Tasks()
    async with client(system.mcp_url, workspace, "fragments", extensions=[tasks]) as session:
        await session.call_tool("remember", {"content": "the nightly job runs at 2am", "topic": "ops", "type": "fact"})
        result = await session.call_tool("memory_consolidate", {})
    assert not result.is_error and list(result.structured_content["stages"]) == list(STAGES)
    assert len(tasks.created) == 1 and tasks.created[0].status == "working"


async def test_prompts_and_completions(system):
    workspace = f"e2e-prompts-{time.time_ns()}"
    async with client(system.mcp_url, workspace, "fragments") as session:
        await session.call_tool(
            "remember", {"content": "we ship on Thursdays", "topic": "release-train", "type": "decision"}
        )
        prompt = await session.get_prompt("decisions", {"subject": "ship Thursdays"})
        assert "we ship on Thursdays" in prompt.messages[0].content.text
        done = await session.complete(
            PromptReference(type="ref/prompt", name="catch_up"), {"name": "topic", "value": "rel"}
        )
        assert done.completion.values == ["release-train"]


async def test_a_listener_on_another_gateway_process_hears_a_change(system):
    workspace = f"e2e-listen-{time.time_ns()}"

    async def upsert(session, text: str) -> str:
        content = f"# Spec\n\n{text}"
        arguments = {"canonicalKey": "spec", "docClass": "app_spec", "title": "Spec", "contentMarkdown": content,
                     "idempotencyKey": str(uuid.uuid4())}  # fmt: skip
        return (
            "memento://items/" + (await session.call_tool("canonical.upsert", arguments)).structured_content["itemId"]
        )

    with another_gateway(system) as replica:
        async with client(system.mcp_url, workspace, "documents") as writer:
            uri = await upsert(writer, "v1")
            async with client(replica + "/mcp", workspace, "documents") as listener:
                async with listener.listen(resource_subscriptions=[uri]) as subscription:
                    await upsert(writer, "v2")
                    async with asyncio.timeout(20):
                        assert await anext(subscription) == ResourceUpdated(uri)

"""The `protocol` dialect (seed 003) as a Memento Protocol client uses it: the official MCP client with
`?profile=protocol`, through the gateway, against the whole system. Answers read like the reference server's; the JSON
is in structuredContent."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.e2e.conftest import ACCESS_KEY

pytestmark = pytest.mark.e2e
TOOLS = {
    "memento_store", "memento_remember", "memento_recall", "memento_memory_delete", "memento_init", "memento_read",
    "memento_update", "memento_item_create", "memento_item_update", "memento_item_delete", "memento_item_list",
    "memento_skip_add", "memento_skip_check", "memento_skip_list", "memento_skip_remove", "memento_context",
    "memento_identity", "memento_identity_update", "memento_identity_crystallize", "memento_consolidate",
    "memento_extract", "memento_memory_graph", "memento_health",
}  # fmt: skip


def client_for(system, workspace: str, profile: str = "protocol") -> Client:
    headers = {"Authorization": f"Bearer {ACCESS_KEY}", "X-Memento-Workspace": workspace}
    http = create_mcp_http_client(headers=headers)
    return Client(streamable_http_client(f"{system.mcp_url}?profile={profile}", http_client=http))


async def call(client: Client, tool: str, arguments: dict) -> tuple[dict, str]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text
    return result.structured_content, result.content[0].text


async def test_the_profile_lists_every_tool_with_an_output_schema(system):
    async with client_for(system, f"proto-list-{time.time_ns()}") as client:
        tools = (await client.list_tools()).tools
        assert {t.name for t in tools} == TOOLS
        assert all(t.output_schema for t in tools)


async def test_a_session_of_the_protocol_as_its_client_runs_it(system):
    workspace = f"proto-session-{time.time_ns()}"
    future = (datetime.now(UTC) + timedelta(days=7)).date().isoformat()
    async with client_for(system, workspace) as client:
        _, text = await call(client, "memento_init", {})
        assert text.startswith("Memento workspace initialized")
        stored, text = await call(
            client, "memento_remember", {"content": "Kp above 4 means aurora is visible from here", "tags": ["aurora"]}
        )
        assert text == f"Stored memory {stored['id']} (observation) [aurora]"
        await call(client, "memento_store", {"content": "Aurora was forecast last winter", "expires": "2020-01-01"})
        found, text = await call(client, "memento_recall", {"query": "aurora visible", "tags": ["aurora"]})
        assert [m["id"] for m in found["results"]] == [stored["id"]]
        assert text.startswith(f"Found 1 memory:\n\n**{stored['id']}** (observation) [aurora]\n")

        item, _ = await call(
            client, "memento_item_create", {"category": "active_work", "title": "Watch the sky", "priority": 7}
        )
        await call(client, "memento_item_update", {"id": item["id"], "status": "paused"})
        listed, text = await call(client, "memento_item_list", {})
        assert [i["status"] for i in listed["items"]] == ["paused"]
        assert text == f"Found 1 item:\n\n**{item['id']}** active_work: Watch the sky (paused)"

        await call(client, "memento_skip_add", {"item": "aurora alerts", "reason": "cloudy week", "expires": future})
        _, text = await call(client, "memento_skip_check", {"query": "aurora alerts"})
        assert text.startswith('SKIP: "aurora alerts"\nReason: cloudy week\n')
        context, text = await call(client, "memento_context", {"message": "should I send aurora alerts?"})
        assert [w["item"] for w in context["warnings"]] == ["aurora alerts"]
        assert context["memories"]["matches"][0]["id"] == stored["id"]

        await call(client, "memento_update", {"section": "standing_decisions", "content": "Report in UTC"})
        _, text = await call(client, "memento_read", {"section": "standing_decisions"})
        assert text == "## Standing Decisions\n\nReport in UTC"
        crystal, text = await call(client, "memento_identity_crystallize", {})
        assert "Report in UTC" in crystal["crystal"]
        _, text = await call(client, "memento_identity", {})
        assert text == crystal["crystal"]

        bad = await client.call_tool("memento_item_create", {"category": "active_work", "title": "t", "priority": 11})
        assert bad.is_error and '"field":"priority"' in bad.content[0].text.replace(" ", "")

        _, text = await call(client, "memento_health", {})
        assert "Total: 2 (1 active, 1 expired, 0 consolidated)" in text


async def test_memories_are_shared_with_the_other_dialects(system):
    workspace = f"proto-cross-{time.time_ns()}"
    async with client_for(system, workspace) as protocol:
        stored, _ = await call(protocol, "memento_store", {"content": "The build farm is called forge", "type": "fact"})
    async with client_for(system, workspace, "simple,fragments") as others:
        searched, _ = await call(others, "search_memories", {"query": "build farm"})
        assert searched["memories"][0]["id"] == stored["id"]
        remembered, _ = await call(
            others, "remember", {"content": "The deploy bot is called hermes", "topic": "infra", "type": "fact"}
        )
    async with client_for(system, workspace) as protocol:
        found, _ = await call(protocol, "memento_recall", {"query": "deploy bot"})
        assert found["results"][0]["id"] == remembered["id"]


async def test_consolidate_extract_graph_identity_and_the_deletes(system):
    workspace = f"proto-rest-{time.time_ns()}"
    future = (datetime.now(UTC) + timedelta(days=7)).isoformat()
    async with client_for(system, workspace) as client:
        a, _ = await call(client, "memento_store", {"content": "The floor-2 coffee machine leaks", "tags": ["office"]})
        b, _ = await call(
            client,
            "memento_store",
            {"content": "The floor-2 coffee machine was fixed", "linkages": [{"type": "memory", "id": a["id"]}]},
        )
        graph, _ = await call(client, "memento_memory_graph", {"id": b["id"], "depth": 1})
        assert {n["id"] for n in graph["nodes"]} == {a["id"], b["id"]}
        merged, text = await call(client, "memento_consolidate", {"source_ids": [a["id"], b["id"]]})
        assert text.startswith(f"Consolidated 2 memories into {merged['id']}.")
        found, _ = await call(client, "memento_recall", {"query": "coffee machine"})
        assert [m["id"] for m in found["results"]] == [merged["id"]]

        transcript = "Ana: We decided to freeze deploys on Fridays.\nBo: The staging cluster runs Kubernetes 1.31."
        extracted, _ = await call(client, "memento_extract", {"transcript": transcript})
        assert extracted["count"] == 2
        again, text = await call(client, "memento_extract", {"transcript": transcript})
        assert again["count"] == 0 and text.startswith("No novel memories found")
        _, text = await call(client, "memento_memory_delete", {"id": extracted["stored"][0]["id"]})
        assert text == f"Memory {extracted['stored'][0]['id']} deleted."

        item, _ = await call(client, "memento_item_create", {"category": "waiting_for", "title": "Vendor reply"})
        _, text = await call(client, "memento_item_delete", {"id": item["id"]})
        assert text == f"Deleted item {item['id']}."
        entry, _ = await call(
            client, "memento_skip_add", {"item": "friday deploys", "reason": "freeze", "expires": future}
        )
        listed, _ = await call(client, "memento_skip_list", {})
        assert [e["id"] for e in listed["entries"]] == [entry["id"]]
        _, text = await call(client, "memento_skip_remove", {"id": entry["id"]})
        assert text == f"Skip entry {entry['id']} removed."

        stored, text = await call(client, "memento_identity_update", {"crystal": "I keep the office running."})
        assert text == f"Identity crystal {stored['id']} stored (26 chars)."
        _, text = await call(client, "memento_identity", {})
        assert text == "I keep the office running."


async def test_a_recall_is_counted_before_the_next_one(system):
    """The reference server raises access_count and last_accessed_at of what memento_recall returns, so the next
    call already shows (and ranks by) it; here the count is written before the answer leaves."""
    async with client_for(system, f"proto-access-{time.time_ns()}") as client:
        stored, _ = await call(client, "memento_store", {"content": "The staging cluster is called nimbus"})
        counts = []
        for _ in range(3):
            found, _ = await call(client, "memento_recall", {"query": "staging cluster"})
            (memory,) = found["results"]
            assert memory["id"] == stored["id"]
            counts.append((memory["access_count"], memory["last_accessed_at"] is not None))
        assert counts == [(0, False), (1, True), (2, True)]

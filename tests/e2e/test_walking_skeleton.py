"""A real MCP client (the official SDK) over Streamable HTTP, through all five services."""

from __future__ import annotations

import json
import time

import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.conftest import ACCESS_KEY

pytestmark = pytest.mark.e2e


def mcp_client(system, workspace: str | None = None, **kwargs) -> Client:
    headers = {"Authorization": f"Bearer {ACCESS_KEY}"}
    if workspace:
        headers["X-Memento-Workspace"] = workspace
    http = create_mcp_http_client(headers=headers)
    return Client(streamable_http_client(system.mcp_url, http_client=http), **kwargs)


def payload(result) -> dict:
    return json.loads(result.content[0].text)


async def test_tools_list_remember_and_recall_by_keywords_then_by_meaning(system):
    # a workspace of its own: other tests' fragments, once embedded, would also pass the 0.5 threshold
    async with mcp_client(system, workspace=f"skeleton-{time.time_ns()}") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert {"remember", "recall"} <= set(tools)
        assert tools["remember"].input_schema["required"] == ["content", "topic", "type"]

        stored = await client.call_tool(
            "remember",
            {
                "content": "Releases go to production every Tuesday right after the morning standup",
                "topic": "deployment",
                "type": "procedure",
                "keywords": ["release", "tuesday"],
                "importance": 0.7,
            },
        )
        assert not stored.is_error, stored
        frag_id = payload(stored)["id"]
        assert stored.structured_content == {"success": True, "id": frag_id, "created": True, "indexed": False}

        # by keywords: found at once, from Redis L1, before any embedding exists
        by_keywords = payload(await client.call_tool("recall", {"keywords": ["tuesday"]}))
        assert [(f["id"], f["tier"]) for f in by_keywords["fragments"]] == [(frag_id, "L1")]

        # by a paraphrase with no word in common: only meaning can find it, by the search's own scoring of the caller's
        # fresh row (docs/fresh-writes.md) or from the index once the embedder wrote it
        query = {"text": "which weekday do we ship new versions?", "threshold": 0.5, "includeLinks": False}
        deadline = time.monotonic() + 120
        while True:
            found = payload(await client.call_tool("recall", query))["fragments"]
            if found:
                break
            assert time.monotonic() < deadline, "the embedder never made the fragment searchable by meaning"
            await _pause()
        assert found[0]["id"] == frag_id and found[0]["tier"] == "L3" and found[0]["similarity"] >= 0.5


async def _pause() -> None:
    import asyncio

    await asyncio.sleep(0.2)  # between bounded polls of an asynchronous pipeline


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"topic": "e2e-bad", "type": "fact"}, "content"),
        ({"content": "c", "topic": "e2e-bad", "type": "rumour"}, "type"),
        ({"content": "c", "topic": "e2e-bad", "type": "fact", "importance": 2}, "importance"),
    ],
)
async def test_bad_input_is_an_error_result_naming_the_field(system, arguments, field):
    async with mcp_client(system) as client:
        result = await client.call_tool("remember", arguments)
        assert result.is_error
        error = payload(result)["error"]
        assert error["code"] == "INVALID_PARAMETER" and error["field"] == field
        left = payload(await client.call_tool("recall", {"topic": "e2e-bad"}))
        assert left["fragments"] == []


def tool_requests_seen_by_memory_api(system) -> float:
    text = httpx.get(system.service_url("memory-api") + "/metrics").text
    total = 0.0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "memento_http_requests_total" and sample.labels.get("route") == "/v1/tools/{name}":
                total += sample.value
    return total


@pytest.mark.parametrize("authorization", [None, "Bearer wrong-key", "Basic " + ACCESS_KEY])
def test_requests_without_a_valid_key_never_reach_memory_api(system, authorization):
    before = tool_requests_seen_by_memory_api(system)
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    if authorization:
        headers["Authorization"] = authorization
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "remember", "arguments": {"content": "x", "topic": "t", "type": "fact"}},
    }
    response = httpx.post(system.mcp_url, json=body, headers=headers)
    assert response.status_code == 401
    challenge = response.headers["WWW-Authenticate"]
    assert challenge.startswith("Bearer ") and "resource_metadata=" in challenge
    metadata_url = challenge.split('resource_metadata="', 1)[1].rstrip('"')
    assert httpx.get(metadata_url).json()["resource"] == system.mcp_url
    assert tool_requests_seen_by_memory_api(system) == before


def test_health_and_metrics_on_every_service(system):
    assert httpx.get(system.base_url + "/health").status_code == 200
    gateway_health = httpx.get(system.base_url + "/health").json()
    assert gateway_health["postgres"] == "up" and "active" in gateway_health["sessions"]
    for service in ("memory-api", "embedder", "evaluator", "consolidator"):
        health = httpx.get(system.service_url(service) + "/health")
        assert health.status_code == 200 and health.json()["postgres"] == "up", service
    for url in [system.base_url] + [
        system.service_url(s) for s in ("memory-api", "embedder", "evaluator", "consolidator")
    ]:
        names = {f.name for f in text_string_to_metric_families(httpx.get(url + "/metrics").text)}
        assert "memento_http_requests" in names, url


async def test_memory_consolidate_runs_the_ten_stages_on_the_consolidator(system):
    from memento_shared.consolidation import STAGES

    reported: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        reported.append((done, total, message))

    async with mcp_client(system) as client:
        await client.call_tool("remember", {"content": "consolidate me", "topic": "e2e-consolidate", "type": "fact"})
        result = await client.call_tool("memory_consolidate", {}, progress_callback=on_progress)
        assert not result.is_error, result.content[0].text
        body = payload(result)
        assert list(body["stages"]) == list(STAGES) and all(isinstance(v, int) for v in body["stages"].values())
        assert body["stages"]["statistics"] >= 1 and body["duration_ms"] >= 0
        assert result.structured_content["success"] is True

    # the consolidator's last step, relayed by the gateway (a run this small ends before its first reading of the
    # channel; tests/gateway/test_progress.py shows the steps in between)
    assert reported[0] == (0, 1, "memory_consolidate started")
    assert reported[-1] == (10, 10, f"stage 10/10 statistics: {body['stages']['statistics']}")


def test_liveness_needs_no_dependency(system):
    for url in (system.base_url, system.service_url("memory-api")):
        response = httpx.get(url + "/livez")
        assert response.status_code == 200 and response.json()["status"] == "alive"

"""MCP 2026-07-28, the stateless form, through the whole system (`make run`) and a second gateway replica, with the
official Python SDK client behind a round-robin balancer (every HTTP request goes to the other replica). In its
default mode the client takes the stateless path, which the gateways' per-version metric shows; pinned to the
legacy handshake it still gets a session. Then working memory in both forms, progress, the revision's errors,
and the edge's refusals (401, 403, 413, 429) in the stateless form."""

from __future__ import annotations

import itertools
import json
import time
import uuid
from collections.abc import Iterator
from contextlib import asynccontextmanager

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.conftest import ACCESS_KEY, System, another_gateway

pytestmark = pytest.mark.e2e
STATELESS, HANDSHAKE = "2026-07-28", "2025-11-25"
HANDLE_KEY = "dev.memento/sessionId"
META = {
    "io.modelcontextprotocol/protocolVersion": STATELESS,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "e2e", "version": "1"},
}


class RoundRobin(httpx2.AsyncBaseTransport):
    """A load balancer in front of the replicas: each HTTP request goes to the next one in turn."""

    def __init__(self, base_urls: list[str]) -> None:
        self.ports = [httpx2.URL(url).port for url in base_urls]
        self.sent = [0] * len(base_urls)
        self.turn = itertools.count()
        self.inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        replica = next(self.turn) % len(self.ports)
        self.sent[replica] += 1
        request.url = request.url.copy_with(port=self.ports[replica])
        request.headers["host"] = f"{request.url.host}:{self.ports[replica]}"
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.fixture(scope="module")
def replicas(system: System) -> Iterator[list[str]]:
    with another_gateway(system) as second:
        yield [system.base_url, second]


@asynccontextmanager
async def sdk_client(system: System, balancer: RoundRobin, workspace: str, mode: str = "auto", **kwargs):
    headers = {"Authorization": f"Bearer {ACCESS_KEY}", "X-Memento-Workspace": workspace}
    async with httpx2.AsyncClient(headers=headers, transport=balancer, timeout=httpx2.Timeout(30, read=300)) as http:
        transport = streamable_http_client(f"{system.mcp_url}?profile=all", http_client=http)
        async with Client(transport, mode=mode, **kwargs) as client:
            yield client


def served(base_url: str, version: str, method: str = "tools/call") -> float:
    """How many `method` messages at `version` this replica has served (memento_mcp_messages_total)."""
    text = httpx.get(base_url + "/metrics", trust_env=False).text
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "memento_mcp_messages"
        for sample in family.samples
        if sample.name.endswith("_total") and sample.labels == {"method": method, "transport": "streamable-http",
                                                                  "version": version}
    )  # fmt: skip


def counts(replicas: list[str], version: str) -> list[float]:
    return [served(url, version) for url in replicas]


def workspace(name: str) -> str:
    return f"{name}-{time.time_ns()}"


async def call(client: Client, tool: str, arguments: dict, **kwargs) -> dict:
    result = await client.call_tool(tool, arguments, **kwargs)
    assert not result.is_error, result.content[0].text
    return result.structured_content


async def one_call_per_dialect(client: Client) -> int:
    """A write and a read in each built dialect; how many tool calls that took."""
    stored = await call(client, "remember", {"content": "stateless fragments", "topic": "e2e-sl", "type": "fact"})
    found = await call(client, "recall", {"topic": "e2e-sl"})
    assert [f["id"] for f in found["fragments"]] == [stored["id"]]
    simple = await call(client, "store_memory", {"content": "The stateless form needs no session"})
    listed = await call(client, "list_recent_memories", {})
    assert simple["created"]["id"] in [m["id"] for m in listed["memories"]]
    aurora = {"content": "Kp above 4 means aurora is visible from here", "tags": ["aurora"]}
    remembered = await call(client, "memento_remember", aurora)
    recalled = await call(client, "memento_recall", {"query": "aurora visible", "tags": ["aurora"]})
    assert [m["id"] for m in recalled["results"]] == [remembered["id"]]
    turn = await call(client, "memory_before_turn", {"session_id": "sl", "current_input_text": "hello there"})
    assert turn["turn_id"] and turn["input_items"]
    markdown = "# App\n\n## Auth\n\nTokens refresh every hour.\n"
    document = {"canonicalKey": "app", "docClass": "app_spec", "title": "App", "contentMarkdown": markdown,
                "idempotencyKey": str(uuid.uuid4())}  # fmt: skip
    assert (await call(client, "canonical.upsert", document))["created"] is True
    assert (await call(client, "canonical.get", {"canonicalKey": "app"}))["contentMarkdown"] == markdown
    return 9


async def test_the_sdk_default_mode_is_stateless_on_both_replicas_in_every_dialect(system, replicas):
    stateless_before, legacy_before = counts(replicas, STATELESS), counts(replicas, HANDSHAKE)
    balancer = RoundRobin(replicas)
    async with sdk_client(system, balancer, workspace("sl-dialects")) as client:
        assert client.protocol_version == STATELESS
        assert client.server_capabilities.tools is not None and client.server_info.name == "memento"
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"remember", "store_memory", "memento_recall", "memory_before_turn", "canonical.upsert"} <= names
        made = await one_call_per_dialect(client)
    stateless_after = counts(replicas, STATELESS)
    assert sum(stateless_after) - sum(stateless_before) == made
    assert all(after > before for after, before in zip(stateless_after, stateless_before, strict=True))
    assert counts(replicas, HANDSHAKE) == legacy_before  # no tool call took the session path
    assert min(balancer.sent) >= made // 2


async def test_the_sdk_pinned_to_the_handshake_still_gets_a_session_across_replicas(system, replicas):
    stateless_before, legacy_before = counts(replicas, STATELESS), counts(replicas, HANDSHAKE)
    balancer = RoundRobin(replicas)
    async with sdk_client(system, balancer, workspace("sl-legacy"), mode="legacy") as client:
        assert client.protocol_version == HANDSHAKE
        made = await one_call_per_dialect(client)
    legacy_after = counts(replicas, HANDSHAKE)
    assert sum(legacy_after) - sum(legacy_before) == made
    assert all(after > before for after, before in zip(legacy_after, legacy_before, strict=True))
    assert counts(replicas, STATELESS) == stateless_before
    assert min(balancer.sent) > 0


async def test_working_memory_round_trips_in_both_forms(system, replicas):
    note = {"topic": "task", "type": "fact", "scope": "session"}
    async with sdk_client(system, RoundRobin(replicas), workspace("sl-wm")) as client:
        first = await call(client, "remember", {"content": "editing lexer.py", **note})
        handle = first["sessionId"]  # minted for the request, as no handle came with it
        again = await call(client, "remember", {"content": "editing parser.py", **note}, meta={HANDLE_KEY: handle})
        assert again["sessionId"] == handle
        other = await call(client, "remember", {"content": "unrelated", **note})
        assert other["sessionId"] != handle  # a request without the handle is a working memory of its own
        context = await call(client, "context", {"sessionId": handle})
        assert [w["content"] for w in context["workingMemory"]] == [
            "editing parser.py",
            "editing lexer.py",
        ]  # newest first
    async with sdk_client(system, RoundRobin(replicas), workspace("sl-wm"), mode="legacy") as client:
        stored = await call(client, "remember", {"content": "editing lexer.py", **note})
        context = await call(client, "context", {})  # the session's own working memory, on either replica
        assert [w["content"] for w in context["workingMemory"]] == ["editing lexer.py"]
        assert stored["sessionId"] != handle


async def test_progress_streams_on_the_stateless_request_itself(system, replicas):
    reported: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        reported.append((done, total, message))

    async with sdk_client(system, RoundRobin(replicas), workspace("sl-progress")) as client:
        result = await client.call_tool("memory_consolidate", {}, progress_callback=on_progress)
    assert not result.is_error and result.structured_content["success"] is True
    assert reported[0] == (0, 1, "memory_consolidate started")
    assert reported[-1][:2] == (10, 10) and reported[-1][2].startswith("stage 10/10 statistics")


async def test_log_messages_stream_only_on_requests_that_ask_for_them(system):
    """A replica whose memory-api calls all time out logs a warning per failed call: on the request's own stream
    when its `_meta` names a log level, never otherwise (2026-07-28: logging/setLevel is gone)."""
    heard: list[tuple[str, dict]] = []

    async def on_log(params) -> None:
        heard.append((params.level, params.data))

    with another_gateway(system, UPSTREAM_TIMEOUT_SECONDS="0.001") as impatient:
        balancer = RoundRobin([impatient])
        async with sdk_client(
            system, balancer, workspace("sl-logs"), log_level="warning", logging_callback=on_log
        ) as c:
            asked = await c.call_tool("recall", {"topic": "e2e-logs"})
        async with sdk_client(system, balancer, workspace("sl-logs"), logging_callback=on_log) as client:
            unasked = await client.call_tool("recall", {"topic": "e2e-logs"})
    for result in (asked, unasked):
        assert result.is_error and json.loads(result.content[0].text)["error"]["code"] == "RESOURCE_BUSY"
    assert heard == [("warning", {"tool": "recall", "error": "RESOURCE_BUSY"})]


def post(
    url: str, body: dict, version: str | None = STATELESS, key: str | None = ACCESS_KEY, **headers
) -> httpx.Response:
    sent = {"Accept": "application/json, text/event-stream", **({"Authorization": f"Bearer {key}"} if key else {})}
    if version:
        sent["MCP-Protocol-Version"] = version
    if "method" in body:
        sent["Mcp-Method"] = body["method"]
    return httpx.post(url, json=body, headers={**sent, **headers}, trust_env=False)


def request(method: str, meta: dict = META, **params) -> dict:
    return {"jsonrpc": "2.0", "id": 7, "method": method, "params": {**params, "_meta": meta}}


def test_server_discover_and_the_revisions_errors(system):
    discovered = post(system.mcp_url, request("server/discover"))
    result = discovered.json()["result"]
    assert discovered.status_code == 200 and "mcp-session-id" not in discovered.headers
    assert result["supportedVersions"][-2:] == [HANDSHAKE, STATELESS] and result["resultType"] == "complete"
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "memento"
    assert result["ttlMs"] >= 0 and result["cacheScope"] == "public" and result["capabilities"]["tools"] is not None

    listed = post(system.mcp_url, request("tools/list")).json()["result"]
    assert listed["resultType"] == "complete" and listed["cacheScope"] == "private" and listed["tools"]

    missing = post(system.mcp_url, request("tools/list", meta={"io.modelcontextprotocol/clientCapabilities": {}}))
    assert missing.status_code == 400 and missing.json()["error"]["code"] == -32602 and missing.json()["id"] == 7

    unsupported_meta = {**META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}
    unsupported = post(system.mcp_url, request("tools/list", meta=unsupported_meta), version="2099-01-01")
    error = unsupported.json()["error"]
    assert unsupported.status_code == 400 and error["code"] == -32022
    assert error["data"] == {"supported": result["supportedVersions"], "requested": "2099-01-01"}

    mismatch = post(system.mcp_url, request("tools/list", meta=unsupported_meta))
    assert mismatch.status_code == 400 and mismatch.json()["error"]["code"] == -32020
    no_header = post(system.mcp_url, request("tools/list"), version=None)
    assert no_header.status_code == 400 and no_header.json()["error"]["code"] == -32020
    wrong_name = post(system.mcp_url, request("tools/call", name="recall", arguments={}), **{"Mcp-Name": "forget"})
    assert wrong_name.status_code == 400 and wrong_name.json()["error"]["code"] == -32020

    for removed in ("initialize", "ping", "logging/setLevel", "resources/subscribe", "no/such-method"):
        answer = post(system.mcp_url, request(removed))
        assert answer.status_code == 404 and answer.json()["error"]["code"] == -32601, removed
    auth = {"Authorization": f"Bearer {ACCESS_KEY}"}
    stream = httpx.get(system.mcp_url, headers={"MCP-Protocol-Version": STATELESS, **auth}, trust_env=False)
    assert stream.status_code == 405


def test_the_edge_refuses_in_the_stateless_form_as_before(system):
    listing = request("tools/list")
    unauthenticated = post(system.mcp_url, listing, key=None)
    assert unauthenticated.status_code == 401 and "resource_metadata=" in unauthenticated.headers["www-authenticate"]
    foreign = post(system.mcp_url, listing, Origin="http://evil.example")
    assert foreign.status_code == 403
    huge = request("tools/call", name="remember", arguments={"content": "x" * 1_100_000, "topic": "t", "type": "fact"})
    too_large = post(system.mcp_url, huge, **{"Mcp-Name": "remember"})
    assert too_large.status_code == 413
    with another_gateway(system, MEMENTO_RATE_LIMIT_PER_MINUTE="2") as strict:
        answers = [post(strict + "/mcp", listing, **{"X-Memento-Workspace": "sl-rate"}) for _ in range(4)]
    assert answers[0].status_code == 200 and answers[-1].status_code == 429
    assert int(answers[-1].headers["retry-after"]) >= 1
    assert json.loads(answers[0].text)["result"]["tools"]

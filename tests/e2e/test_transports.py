"""Every transport and protocol version through the whole system (`make run`), with the official SDK client, and a
second gateway process sharing the first one's Redis: sessions and streams work across replicas."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.conftest import ACCESS_KEY, System, another_gateway
from tests.gateway.sdk import sse_session, streamable_session

pytestmark = pytest.mark.e2e
VERSIONS = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]
HEADERS = {"Authorization": f"Bearer {ACCESS_KEY}"}
MCP = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json", **HEADERS}


def initialize(version: str = "2025-11-25") -> dict:
    params = {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}}
    return {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
@pytest.mark.parametrize("version", VERSIONS)
async def test_sdk_client_at_every_version_over_every_transport(system, transport, version):
    connect = (
        streamable_session(system.mcp_url, version, HEADERS)
        if transport == "streamable-http"
        else sse_session(system.base_url + "/sse", version, HEADERS)
    )
    topic, content = f"e2e-{transport}-{version}", f"stored via {transport} at {version}"
    async with connect as (session, init):
        assert init.protocol_version == version
        stored = await session.call_tool("remember", {"content": content, "topic": topic, "type": "fact"})
        assert not stored.is_error
        assert (stored.structured_content is not None) == (version >= "2025-06-18")
        found = json.loads((await session.call_tool("recall", {"topic": topic})).content[0].text)
        assert [f["content"] for f in found["fragments"]] == [content]


def test_protocol_errors_at_the_edge(system):
    with httpx.Client(base_url=system.base_url, headers=MCP, trust_env=False) as http:
        assert http.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "ping"}).status_code == 400
        unknown = http.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "ping"}, headers={"Mcp-Session-Id": "x"})
        assert unknown.status_code == 404
        session = http.post("/mcp", json=initialize()).headers["mcp-session-id"]
        bad_version = {"Mcp-Session-Id": session, "MCP-Protocol-Version": "2019-01-01"}
        assert (
            http.post("/mcp", json={"jsonrpc": "2.0", "id": 3, "method": "ping"}, headers=bad_version).status_code
            == 400
        )
        assert http.post("/mcp", content=b"{", headers={"Mcp-Session-Id": session}).json()["error"]["code"] == -32700


@pytest.fixture(scope="module")
def second_gateway(system: System) -> Iterator[str]:
    with another_gateway(system) as url:
        yield url


def test_a_session_initialized_on_one_gateway_is_used_on_a_second(system, second_gateway):
    with httpx.Client(headers=MCP, trust_env=False) as http:
        session = http.post(system.mcp_url, json=initialize()).headers["mcp-session-id"]
        call = {"jsonrpc": "2.0", "id": 5, "method": "tools/call"}
        call["params"] = {
            "name": "remember",
            "arguments": {"content": "two replicas", "topic": "e2e-r", "type": "fact"},
        }
        stored = http.post(second_gateway + "/mcp", json=call, headers={"Mcp-Session-Id": session}).json()
        assert stored["result"]["structuredContent"]["created"] is True
        assert http.delete(second_gateway + "/mcp", headers={"Mcp-Session-Id": session}).status_code == 200
        ping = {"jsonrpc": "2.0", "id": 6, "method": "ping"}
        assert http.post(system.mcp_url, json=ping, headers={"Mcp-Session-Id": session}).status_code == 404


def test_legacy_sse_answers_reach_the_stream_from_a_second_gateway(system, second_gateway):
    with httpx.Client(headers=MCP, trust_env=False, timeout=30) as http:
        with http.stream("GET", system.base_url + f"/sse?accessKey={ACCESS_KEY}") as stream:
            lines = stream.iter_lines()
            assert next(lines) == "event: endpoint"
            endpoint = next(lines).removeprefix("data: ")
            assert http.post(second_gateway + endpoint, json=initialize("2024-11-05")).status_code == 202
            answer = next(json.loads(line[5:]) for line in lines if line.startswith("data:"))
            assert answer["id"] == 1 and answer["result"]["protocolVersion"] == "2024-11-05"


def test_health_reports_active_sessions(system):
    with httpx.Client(headers=MCP, trust_env=False) as http:
        http.post(system.mcp_url, json=initialize())
        assert http.get(system.base_url + "/health").json()["sessions"]["active"] >= 1


async def test_a_per_tenant_api_key_made_with_memento_admin(system):
    made = subprocess.run(
        # as a user beside `make run` would: the installed command, told only where the data dir is
        [
            str(Path(sys.executable).with_name("memento-admin")),
            "keys",
            "create",
            "--tenant",
            "e2e-tenant",
            "--scope",
            "read",
        ],
        env={**os.environ, "MEMENTO_DATA_DIR": str(system.data_dir)},
        capture_output=True,
        text=True,
        check=True,
    )
    key = next(line.split(":", 1)[1].strip() for line in made.stdout.splitlines() if line.startswith("key:"))
    async with streamable_session(system.mcp_url, "2025-11-25", {"Authorization": f"Bearer {key}"}) as (session, _):
        refused = await session.call_tool("remember", {"content": "read-only key", "topic": "e2e-k", "type": "fact"})
        assert refused.is_error and json.loads(refused.content[0].text)["error"]["code"] == "FORBIDDEN"
        assert not (await session.call_tool("recall", {"topic": "e2e-k"})).is_error

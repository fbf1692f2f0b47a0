"""Every tool of every dialect fuzzed from its published inputSchema through the gateway with the official client
(memento_devtools.fuzz): valid arguments and near-misses, each answer a success or a documented error naming its
field, never an internal error, a 5xx or a traceback, and no row changed by an invalid call. A bounded run (a few
calls a tool); `python -m bench.fuzz --examples N` runs long ones."""

from __future__ import annotations

import json
import time
from urllib.parse import urlsplit

import asyncpg
import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from memento_devtools import fuzz
from tests.e2e.conftest import ACCESS_KEY

pytestmark = pytest.mark.e2e


def owner_url(system) -> str:
    secrets = json.loads((system.data_dir / "secrets.json").read_text())
    parts = urlsplit(system.info["database_url"])
    return parts._replace(
        netloc=f"postgres:{secrets['postgres_owner_password']}@{parts.hostname}:{parts.port}"
    ).geturl()


async def test_every_tool_answers_fuzzed_arguments_with_a_documented_outcome(system):
    headers = {"Authorization": f"Bearer {ACCESS_KEY}", "X-Memento-Workspace": f"fuzz-{time.time_ns()}"}
    http = create_mcp_http_client(headers=headers)
    transport = streamable_http_client(f"{system.mcp_url}?profile=all", http_client=http)
    owner = await asyncpg.connect(owner_url(system))
    try:
        async with Client(transport) as client:
            tools = (await client.list_tools()).tools
            assert len(tools) >= 50  # every dialect's
            report = await fuzz.run(client, tools, examples=2, seed=31, owner=owner)
    finally:
        await owner.close()
    summary = report.summary()
    assert summary["calls"] >= 2 * len(tools), summary
    assert summary["by_kind"]["valid"] >= len(tools), summary  # each tool was also called the right way
    failures = [f"{o.tool} [{o.kind} {o.expected_field}] {o.answer}: {o.failure}" for o in report.failures]
    assert not failures, "\n".join(failures)


SURROGATE_CALLS = [
    ("remember", {"content": "a\ud800b", "topic": "t", "type": "fact"}, "content"),
    ("store_memory", {"content": "lone \udc00 surrogate"}, "content"),
    ("memento_store", {"content": "x", "tags": ["\ud83d"]}, "tags.0"),
    ("memory.search", {"query": "q\udfff"}, "query"),
]


@pytest.mark.parametrize(("tool", "arguments", "field"), SURROGATE_CALLS)
def test_a_lone_surrogate_sent_as_a_json_escape_is_refused_naming_its_field(system, tool, arguments, field):
    """The official client cannot encode a lone surrogate at all; a raw client can, as a JSON escape."""
    headers = {"Authorization": f"Bearer {ACCESS_KEY}", "X-Memento-Workspace": f"fuzz-s-{time.time_ns()}",
               "Accept": "application/json, text/event-stream", "Content-Type": "application/json"}  # fmt: skip
    url = f"{system.mcp_url}?profile=all"
    with httpx.Client(headers=headers, trust_env=False, timeout=30) as http:
        params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "1"}}
        opened = http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
        session = {"Mcp-Session-Id": opened.headers["mcp-session-id"]}
        http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
        body = json.dumps(call)  # ensure_ascii: the surrogate travels as its \\u escape
        assert "\\ud" in body or "\\udc" in body
        answer = http.post(url, content=body.encode(), headers=session)
    assert answer.status_code == 200, answer.text
    text = answer.text
    message = json.loads(text[text.index("{") :].splitlines()[0]) if text.startswith("event") else answer.json()
    assert "result" in message, message
    result = message["result"]
    error = json.loads(result["content"][0]["text"])["error"]
    assert result["isError"] and error["code"] == "INVALID_PARAMETER" and error["field"] == field, error

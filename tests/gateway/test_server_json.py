"""The registry entry works: a client that fills in server.json's remote templates (host, profile, access key) with
a running gateway's values reaches it with the official SDK and gets the tools the entry lists for that profile,
over Streamable HTTP (the SDK's 2026-07-28 form) and over legacy SSE. The gateway here speaks plain HTTP on
loopback, so the entry's https:// becomes http://; a deployment serves it behind TLS."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.gateway.conftest import ACCESS_KEY
from tests.gateway.sdk import sse_session

ENTRY = json.loads((Path(__file__).resolve().parents[2] / "server.json").read_text())
PROFILES = ENTRY["_meta"]["io.modelcontextprotocol.registry/publisher-provided"]["profiles"]


def filled(template: str, values: dict[str, str]) -> str:
    """A registry URL or header template with its {variables} replaced, as a client following the entry does."""
    return re.sub(r"\{([a-z_]+)\}", lambda m: values[m[1]], template)


def remote(kind: str) -> dict:
    return next(r for r in ENTRY["remotes"] if r["type"] == kind)


def connection(gateway, kind: str, profile: str) -> tuple[str, dict[str, str]]:
    entry = remote(kind)
    values = {"host": f"127.0.0.1:{gateway.running.port}", "profile": profile, "access_key": ACCESS_KEY}
    url = filled(entry["url"], values).replace("https://", "http://", 1)
    headers = {h["name"]: filled(h["value"], values) for h in entry["headers"]}
    return url, headers


@pytest.mark.parametrize("profile", ["simple", "documents"])
async def test_the_streamable_http_remote_serves_the_profile_it_names(gateway, profile):
    url, headers = connection(gateway, "streamable-http", profile)
    async with Client(streamable_http_client(url, http_client=create_mcp_http_client(headers=headers))) as client:
        assert client.protocol_version == "2026-07-28"
        assert [tool.name for tool in (await client.list_tools()).tools] == PROFILES[profile]


async def test_the_sse_remote_serves_the_profile_it_names(gateway):
    url, headers = connection(gateway, "sse", "lifecycle")
    async with sse_session(url, "2024-11-05", headers) as (session, _):
        assert [tool.name for tool in (await session.list_tools()).tools] == PROFILES["lifecycle"]

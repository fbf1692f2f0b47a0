"""The official SDK client at each protocol version, over both transports: what it negotiates and what the tool
listing and results carry at that version (annotations from 2025-03-26; outputSchema, structuredContent and
title from 2025-06-18)."""

from __future__ import annotations

import pytest

from tests.gateway.conftest import ACCESS_KEY
from tests.gateway.sdk import sse_session, streamable_session

VERSIONS = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]
HEADERS = {"Authorization": f"Bearer {ACCESS_KEY}"}


def connect(gateway, transport: str, version: str):
    if transport == "sse":
        return sse_session(gateway.url + "/sse", version, HEADERS)
    return streamable_session(gateway.mcp_url, version, HEADERS)


@pytest.mark.parametrize("transport", ["streamable-http", "sse"])
@pytest.mark.parametrize("version", VERSIONS)
async def test_each_version_over_each_transport(gateway, tenant, transport, version):
    modern = version >= "2025-06-18"
    async with connect(gateway, transport, version) as (session, init):
        assert init.protocol_version == version
        assert init.capabilities.tools is not None and init.capabilities.logging is not None
        await session.send_ping()
        remember = {t.name: t for t in (await session.list_tools()).tools}["remember"]
        assert (remember.annotations is not None) == (version >= "2025-03-26")
        assert (remember.output_schema is not None) == modern and (remember.title is not None) == modern
        stored = await session.call_tool("remember", {"content": f"v {version}", "topic": tenant, "type": "fact"})
        assert not stored.is_error
        assert (stored.structured_content is not None) == modern

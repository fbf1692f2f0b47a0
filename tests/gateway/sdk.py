"""The official SDK's client session at a chosen protocol version.

`Client` always offers the newest handshake version; a client of an older revision is the same session sending
`initialize` with its own version, which is what this does, through the SDK's public session API.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


async def _handshake(session: ClientSession, version: str) -> types.InitializeResult:
    params = types.InitializeRequestParams(
        protocol_version=version,
        capabilities=types.ClientCapabilities(),
        client_info=types.Implementation(name="memento-tests", version="1.0"),
    )
    result = await session.send_request(types.InitializeRequest(params=params), types.InitializeResult)
    session.adopt(result)
    await session.send_notification(types.InitializedNotification())
    return result


@asynccontextmanager
async def streamable_session(
    url: str, version: str, headers: dict[str, str], **session_kwargs: Any
) -> AsyncIterator[tuple[ClientSession, types.InitializeResult]]:
    http = create_mcp_http_client(headers=headers)
    async with streamable_http_client(url, http_client=http) as (read, write):
        async with ClientSession(read, write, **session_kwargs) as session:
            yield session, await _handshake(session, version)


@asynccontextmanager
async def sse_session(
    url: str, version: str, headers: dict[str, str] | None = None, **session_kwargs: Any
) -> AsyncIterator[tuple[ClientSession, types.InitializeResult]]:
    async with sse_client(url, headers=headers) as (read, write):
        async with ClientSession(read, write, **session_kwargs) as session:
            yield session, await _handshake(session, version)

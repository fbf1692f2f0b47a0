"""The 2026-07-28 envelope: what every stateless request carries (its `_meta` and the HTTP headers mirroring its
body) and what every result carries back (`resultType`, the server's identity, cache hints).

A request is checked in the order the revision's errors imply: its required `_meta` fields (-32602), the
`MCP-Protocol-Version` header against them (-32020), the version itself (-32022), then `Mcp-Method` and `Mcp-Name`
(-32020). Every failure is a 400 with a JSON-RPC error; nothing here touches Redis or memory-api.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from typing import Any

from starlette.datastructures import Headers

from memento_gateway.mcp import versions
from memento_gateway.mcp.call import LOG_LEVELS
from memento_gateway.mcp.jsonrpc import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    UNSUPPORTED_PROTOCOL_VERSION,
    Message,
    RpcError,
)
from memento_gateway.mcp.methods import SERVER_INFO

PREFIX = "io.modelcontextprotocol/"
VERSION_KEY, CAPABILITIES_KEY = PREFIX + "protocolVersion", PREFIX + "clientCapabilities"
CLIENT_INFO_KEY, LOG_LEVEL_KEY, SERVER_INFO_KEY = PREFIX + "clientInfo", PREFIX + "logLevel", PREFIX + "serverInfo"
# Working memory (`remember` with scope "session") across stateless requests: the handle a `remember` returned as
# `sessionId`, sent back in `_meta` (the revision: state spanning requests is named by an explicit identifier).
SESSION_KEY = "dev.memento/sessionId"
HANDLE = re.compile(r"^[A-Za-z0-9_-]{8,64}$")
# the body field Mcp-Name mirrors (the tasks extension names its methods' task, so a balancer can route by it)
NAMED_BY = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",
    "tasks/cancel": "taskId",
    "tasks/update": "taskId",
}
# Cache hints (SEP-2549) per cacheable method: (ttlMs, cacheScope). Tool lists depend on the credential's profiles;
# resources and prompts are the tenant's own, so they are private and immediately stale.
CACHEABLE = {
    "server/discover": (3_600_000, "public"),
    "tools/list": (300_000, "private"),
    "resources/list": (0, "private"),
    "resources/templates/list": (0, "private"),
    "resources/read": (0, "private"),
    "prompts/list": (0, "private"),
}


@dataclass(frozen=True)
class Envelope:
    version: str
    client: str  # clientInfo's name, for logs only: the revision says never to act on it
    log_level: str | None  # notifications/message for this request only, at or above this level
    handle: str | None  # the working-memory handle the client sent back, if any
    extensions: tuple[str, ...] = ()  # the extensions its clientCapabilities declare (io.modelcontextprotocol/tasks)


class Rejected(Exception):
    """A request the revision says to refuse: always HTTP 400, with this JSON-RPC error."""

    def __init__(self, error: RpcError) -> None:
        super().__init__(error.message)
        self.error = error


def declared(headers: Headers) -> bool:
    """The request says it speaks a stateless revision in its header."""
    return versions.is_stateless(headers.get("mcp-protocol-version"))


def carried(body: Any) -> bool:
    """A single request or notification whose `_meta` declares a protocol version: the stateless form."""
    params = body.get("params") if isinstance(body, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and VERSION_KEY in meta


def read(message: Message, headers: Headers) -> Envelope:
    """The request's envelope, or Rejected naming what is wrong with it."""
    meta = message.params.get("_meta")
    meta = meta if isinstance(meta, dict) else {}
    version, capabilities = meta.get(VERSION_KEY), meta.get(CAPABILITIES_KEY)

    def reject(code: int, text: str, data: Any = None) -> Rejected:
        return Rejected(RpcError(code, text, message.id, data))

    required = ((VERSION_KEY, isinstance(version, str)), (CAPABILITIES_KEY, isinstance(capabilities, dict)))
    missing = [key for key, present in required if not present]
    if missing:
        raise reject(INVALID_PARAMS, f"Invalid params: _meta must carry {' and '.join(missing)}")
    header = _header(headers, "mcp-protocol-version")
    if header != version:
        raise reject(HEADER_MISMATCH, f"Header mismatch: MCP-Protocol-Version {header!r} but _meta says {version!r}")
    if not versions.is_stateless(version):
        supported = {"supported": list(versions.ALL), "requested": version}
        raise reject(UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version", supported)
    method = _header(headers, "mcp-method")
    if method != message.method:
        raise reject(HEADER_MISMATCH, f"Header mismatch: Mcp-Method {method!r} but the body says {message.method!r}")
    field = NAMED_BY.get(message.method)
    if field is not None and isinstance(message.params.get(field), str):
        name = _decoded(_header(headers, "mcp-name"))
        if name != message.params[field]:
            raise reject(HEADER_MISMATCH, f"Header mismatch: Mcp-Name does not match params.{field}")
    level = meta.get(LOG_LEVEL_KEY)
    if level is not None and level not in LOG_LEVELS:
        raise reject(INVALID_PARAMS, f"Invalid params: {LOG_LEVEL_KEY} must be one of {', '.join(LOG_LEVELS)}")
    handle = meta.get(SESSION_KEY)
    if handle is not None and not (isinstance(handle, str) and HANDLE.match(handle)):
        raise reject(INVALID_PARAMS, f"Invalid params: {SESSION_KEY} must be a sessionId a remember returned")
    info = meta.get(CLIENT_INFO_KEY)
    client = str(info.get("name", ""))[:100] if isinstance(info, dict) else ""
    declared_extensions = capabilities.get("extensions")
    extensions = tuple(declared_extensions) if isinstance(declared_extensions, dict) else ()
    return Envelope(version, client, level, handle, extensions)


def _header(headers: Headers, name: str) -> str | None:
    value = headers.get(name)
    return value.strip(" \t") if value is not None else None  # RFC 9110 §5.5: no surrounding whitespace


def _decoded(value: str | None) -> str | None:
    """An `Mcp-Name` value, its `=?base64?…?=` form decoded; None when the header is missing or undecodable."""
    if value is None or not (value.startswith("=?base64?") and value.endswith("?=")):
        return value
    try:
        return base64.b64decode(value[9:-2], validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None


def stamp(method: str, result: dict[str, Any]) -> dict[str, Any]:
    """A result as the revision shapes it: `resultType`, our identity in `_meta`, cache hints where they apply."""
    meta = result.get("_meta") if isinstance(result.get("_meta"), dict) else {}
    # "complete" unless the result is of another kind (a task the tasks extension returns in its place)
    out = {"resultType": "complete", **result, "_meta": {**meta, SERVER_INFO_KEY: SERVER_INFO}}
    if method in CACHEABLE:
        out["ttlMs"], out["cacheScope"] = CACHEABLE[method]
    return out

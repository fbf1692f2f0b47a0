"""What each MCP request method does. Tools come from the shared registry; resources and prompts belong to
memory-api and are forwarded there; the rest (ping, logging) is answered here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from memento_gateway.mcp import tasks, tools, versions
from memento_gateway.mcp.call import LOG_LEVELS, Call
from memento_gateway.mcp.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, Message, RpcError
from memento_gateway.mcp.sessions import SessionStore
from memento_gateway.mcp.subscriptions import MAX_URI_CHARS, MAX_URIS
from memento_gateway.upstream import Upstream, UpstreamUnavailable
from memento_shared.errors import MementoError
from memento_shared.tools.spec import refuse_unencodable

if TYPE_CHECKING:
    from memento_gateway.gateway import Gateway

SERVER_INFO = {"name": "memento", "title": "Memento memory server", "version": "0.1.0"}
INSTRUCTIONS = (
    "Memento stores typed knowledge fragments across sessions. Call `context` or `recall` at the start "
    "of a task, `remember` facts, decisions, errors, preferences and procedures as you learn them."
)
# Capabilities we actually serve. Completions: of prompt arguments and the resource template's id (memory-api).
# Resources: subscriptions to one resource's updates in a session (resources/subscribe); in 2026-07-28 the listen
# stream also carries the resource list's changes.
CAPABILITIES = {
    "tools": {"listChanged": False},
    "resources": {"subscribe": True, "listChanged": False},
    "prompts": {"listChanged": False},
    "completions": {},
    "logging": {},
}
STATELESS_CAPABILITIES = {
    **CAPABILITIES,
    "resources": {"subscribe": True, "listChanged": True},
    "extensions": {tasks.EXTENSION: {}},
}
TASKS = tasks.METHODS  # 2026-07-28 only, for clients declaring the extension
SUBSCRIBING = ("resources/subscribe", "resources/unsubscribe")  # sessions only: 2026-07-28 listens instead
# memory-api owns these; until it serves a route (a replica older than the gateway), the lists and completions are
# empty and nothing can be read.
FORWARDED = {
    "resources/list": {"resources": []},
    "resources/templates/list": {"resourceTemplates": []},
    "resources/read": None,
    "prompts/list": {"prompts": []},
    "prompts/get": None,
    "completion/complete": {"completion": {"values": [], "total": 0, "hasMore": False}},
}
RESOURCE_NOT_FOUND = -32002  # resources/read of an unknown URI, up to 2025-11-25 (2026-07-28: invalid params)


def initialize_result(version: str) -> dict[str, Any]:
    return {
        "protocolVersion": version,
        "capabilities": CAPABILITIES,
        "serverInfo": SERVER_INFO,
        "instructions": INSTRUCTIONS,
    }


def discover_result() -> dict[str, Any]:
    """server/discover (2026-07-28): every version we speak, the handshake ones included, as a dual-era server."""
    return {
        "supportedVersions": list(versions.ALL),
        "capabilities": STATELESS_CAPABILITIES,
        "instructions": INSTRUCTIONS,
    }


async def dispatch(message: Message, call: Call, gw: Gateway) -> dict[str, Any]:
    method, params = message.method, message.params
    if method == "ping":
        return {}
    if method == "tools/list":
        return tools.list_tools(call)
    if method == "tools/call":
        return await tools.call_tool(gw.upstream, gw.redis, call, message.id, params)
    if method == "logging/setLevel":
        return await _set_level(message, call, gw.sessions)
    if method in FORWARDED:
        return await _forward(message, call, gw.upstream)
    if method in SUBSCRIBING and not versions.is_stateless(call.session.protocol_version):
        return await _subscription(message, call, gw)
    if method in TASKS and versions.is_stateless(call.session.protocol_version):
        return await tasks.handle(message.id, method, params, call, gw, _task_result(call))
    raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}", message.id)


async def _set_level(message: Message, call: Call, sessions: SessionStore) -> dict[str, Any]:
    level = message.params.get("level")
    if level not in LOG_LEVELS:
        raise RpcError(INVALID_PARAMS, f"level must be one of {', '.join(LOG_LEVELS)}", message.id)
    await sessions.save(replace(call.session, log_level=level))
    return {}


def _task_result(call: Call) -> Callable[[str, dict[str, Any]], dict[str, Any]]:
    def shape(tool: str, body: dict[str, Any]) -> dict[str, Any]:
        return tools.shaped(tool, body, call.session.protocol_version)

    return shape


async def _subscription(message: Message, call: Call, gw: Gateway) -> dict[str, Any]:
    """resources/subscribe and /unsubscribe: notifications/resources/updated on the session's stream when the
    resource changes in the request's workspace (mcp/subscriptions.py)."""
    uri = message.params.get("uri")
    if not isinstance(uri, str) or not uri or len(uri) > MAX_URI_CHARS:
        raise RpcError(INVALID_PARAMS, f"uri: a resource URI of at most {MAX_URI_CHARS} characters", message.id)
    principal = call.principal
    if not principal.has_scope("read"):
        raise RpcError(INVALID_PARAMS, "this credential lacks the 'read' scope", message.id)
    if not principal.allows_workspace(principal.workspace):  # a tool call's is checked by memory-api; this is not one
        raise RpcError(
            INVALID_PARAMS, f"workspace: {principal.workspace!r} is not allowed for this credential", message.id
        )
    if message.method == "resources/unsubscribe":
        await gw.subscriptions.unsubscribe(call.session.id, principal.tenant_id, principal.workspace, uri)
        return {}
    if not await gw.subscriptions.subscribe(call.session.id, principal.tenant_id, principal.workspace, uri):
        raise RpcError(INVALID_PARAMS, f"uri: a session holds at most {MAX_URIS} subscriptions", message.id)
    return {}


async def _forward(message: Message, call: Call, upstream: Upstream) -> dict[str, Any]:
    try:
        refuse_unencodable(message.params)
    except MementoError as exc:  # a lone surrogate (as a JSON escape): nothing can answer it but this
        raise RpcError(INVALID_PARAMS, exc.message, message.id) from None
    try:
        body = await upstream.forward(message.method, message.params, call.principal, call.session.id)
    except UpstreamUnavailable:
        raise RpcError(INTERNAL_ERROR, "memory-api is unavailable; retry", message.id) from None
    not_found = INVALID_PARAMS if versions.is_stateless(call.session.protocol_version) else RESOURCE_NOT_FOUND
    unknown = {"uri": message.params.get("uri")}  # the revisions' error data for an unknown resource
    if body is None:
        empty = FORWARDED[message.method]
        if empty is not None:
            return dict(empty)
        if message.method == "resources/read":
            raise RpcError(not_found, "Resource not found", message.id, unknown)
        raise RpcError(INVALID_PARAMS, "Unknown prompt", message.id)
    if "error" in body:
        error = body["error"] if isinstance(body["error"], dict) else {}
        code = error.get("code")
        text = str(error.get("message", "request failed"))
        if code == "MEMORY_NOT_FOUND" and message.method == "resources/read":
            raise RpcError(not_found, text, message.id, unknown)
        if code in ("INVALID_PARAMETER", "MEMORY_NOT_FOUND", "FORBIDDEN"):
            raise RpcError(INVALID_PARAMS, text, message.id)
        raise RpcError(INTERNAL_ERROR, text, message.id)
    return body["result"]

"""JSON-RPC dispatch for MCP: initialize, ping, tools/list, tools/call. No memory logic: tools are contracts
from the shared registry and calls go to memory-api."""

from __future__ import annotations

import json
from typing import Any

from opentelemetry import trace

from memento_gateway.mcp import versions
from memento_gateway.mcp.sessions import Session
from memento_gateway.upstream import Upstream
from memento_shared.tools.registry import TOOLS, tools_for

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
SERVER_INFO = {"name": "memento", "title": "Memento memory server", "version": "0.1.0"}
INSTRUCTIONS = (
    "Memento stores typed knowledge fragments across sessions. Call `context` or `recall` at the start "
    "of a task, `remember` facts, decisions, errors, preferences and procedures as you learn them."
)
tracer = trace.get_tracer("memento.gateway")


class RpcError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def error_response(msg_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}}


def initialize_result(version: str) -> dict[str, Any]:
    return {
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": False}},
        "serverInfo": SERVER_INFO,
        "instructions": INSTRUCTIONS,
    }


def list_tools(session: Session) -> dict[str, Any]:
    version = session.protocol_version
    tools = []
    for spec in tools_for(session.profiles):
        tool: dict[str, Any] = {"name": spec.name, "description": spec.description, "inputSchema": spec.input_schema()}
        if versions.has_annotations(version):
            tool["annotations"] = spec.annotations()
        if versions.has_structured_output(version):
            tool["title"] = spec.title
            tool["outputSchema"] = spec.output_schema()
        tools.append(tool)
    return {"tools": tools}


async def call_tool(session: Session, params: dict[str, Any], upstream: Upstream) -> dict[str, Any]:
    name = params.get("name")
    arguments = params.get("arguments")
    allowed = {spec.name for spec in tools_for(session.profiles)}
    if not isinstance(name, str) or name not in TOOLS or name not in allowed:
        raise RpcError(INVALID_PARAMS, f"Unknown tool: {name!r}")
    if arguments is not None and not isinstance(arguments, dict):
        raise RpcError(INVALID_PARAMS, "arguments must be an object")
    with tracer.start_as_current_span(f"tools/call {name}", attributes={"mcp.tool": name}):
        body = await upstream.call_tool(name, arguments, session.principal, session.id)
    if "error" in body:
        return {
            "content": [{"type": "text", "text": json.dumps({"error": body["error"]}, ensure_ascii=False)}],
            "isError": True,
        }
    result = body["result"]
    out: dict[str, Any] = {
        "content": [{"type": "text", "text": json.dumps(result, ensure_ascii=False)}],
        "isError": False,
    }
    if versions.has_structured_output(session.protocol_version):
        out["structuredContent"] = result
    return out


async def dispatch(session: Session, method: str, params: dict[str, Any], upstream: Upstream) -> dict[str, Any]:
    if method == "ping":
        return {}
    if method == "tools/list":
        return list_tools(session)
    if method == "tools/call":
        return await call_tool(session, params, upstream)
    raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")

"""tools/list and tools/call: contracts from the shared registry shaped for the session's protocol version, calls
forwarded to memory-api. No memory logic lives here."""

from __future__ import annotations

from typing import Any

from opentelemetry import trace
from redis.asyncio import Redis

from memento_gateway.mcp import tasks, versions
from memento_gateway.mcp.call import Call
from memento_gateway.mcp.jsonrpc import INVALID_PARAMS, RpcError
from memento_gateway.mcp.progress import ToolProgress
from memento_gateway.upstream import Upstream
from memento_shared import jsonio
from memento_shared.errors import MementoError
from memento_shared.tools.registry import TOOLS, tools_for
from memento_shared.tools.spec import refuse_unencodable

tracer = trace.get_tracer("memento.gateway")
UPSTREAM_FAILURES = ("RESOURCE_BUSY", "STORAGE_ERROR")


def list_tools(call: Call) -> dict[str, Any]:
    version = call.session.protocol_version
    tools = []
    for spec in tools_for(call.session.profiles):
        tool: dict[str, Any] = {"name": spec.name, "description": spec.description, "inputSchema": spec.input_schema()}
        if versions.has_annotations(version):
            tool["annotations"] = spec.annotations()
        if versions.has_structured_output(version):
            tool["title"] = spec.title
            tool["outputSchema"] = spec.output_schema()
        tools.append(tool)
    return {"tools": tools}


async def call_tool(
    upstream: Upstream, redis: Redis, call: Call, msg_id: Any, params: dict[str, Any]
) -> dict[str, Any]:
    name = params.get("name")
    arguments = params.get("arguments")
    if not isinstance(name, str) or name not in {spec.name for spec in tools_for(call.session.profiles)}:
        profiles = ", ".join(call.session.profiles)
        known = "exists but is outside this session's profiles" if name in TOOLS else "does not exist"
        raise RpcError(INVALID_PARAMS, f"Unknown tool: {name!r} {known} (profiles: {profiles})", msg_id)
    if arguments is not None and not isinstance(arguments, dict):
        raise RpcError(INVALID_PARAMS, "arguments must be an object", msg_id)
    try:
        refuse_unencodable(arguments)
    except MementoError as exc:
        return _tool_error(name, exc.to_body())
    if tasks.wanted(call, name):
        with tracer.start_as_current_span(f"tools/call {name} (task)", attributes={"mcp.tool": name}):
            body = await upstream.start_task(name, arguments, call.principal, call.session.id)
        return tasks.created(body["task"]) if "task" in body else shaped(name, body, call.session.protocol_version)
    progress = ToolProgress(call, params, redis, reports_steps=TOOLS[name].reports_progress)
    await progress.start(f"{name} started")
    with tracer.start_as_current_span(f"tools/call {name}", attributes={"mcp.tool": name}):
        body = await progress.around(
            upstream.call_tool(name, arguments, call.principal, call.session.id, progress_id=progress.id)
        )
    await progress.finish(f"{name} finished")
    if "error" in body and body["error"].get("code") in UPSTREAM_FAILURES:
        await call.log("warning", {"tool": name, "error": body["error"]["code"]})
    return shaped(name, body, call.session.protocol_version)


def shaped(name: str, body: dict[str, Any], version: str) -> dict[str, Any]:
    """The CallToolResult of memory-api's answer to a call of `name`, for a client of `version` (also a task's
    result, on tasks/get)."""
    if "error" in body:
        return _tool_error(name, body)
    result = body["result"]
    # the text content is the JSON, unless the dialect answers in words of its own (memory-api's `text`)
    text = body["text"] if isinstance(body.get("text"), str) else jsonio.dumps_str(result)
    out: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
    out["isError"] = False
    if versions.has_structured_output(version):
        out["structuredContent"] = result
    return out


def _tool_error(name: str, body: dict[str, Any]) -> dict[str, Any]:
    body = TOOLS[name].error_body(body)  # the gateway's own errors too, in the dialect's codes
    return {"content": [{"type": "text", "text": jsonio.dumps_str({"error": body["error"]})}], "isError": True}

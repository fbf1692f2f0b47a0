"""The tasks extension (`io.modelcontextprotocol/tasks`, 2026-07-28): a long tool call answered with a task handle
instead of holding the request open, then `tasks/get`, `tasks/cancel` and `tasks/update`.

The gateway decides which calls become tasks: the LONG tools, for a request whose client capabilities declare the
extension (never for one that does not). memory-api starts and runs the call (memento_memory_api.tasks); the record
lives in Redis (memento_shared.tasks), so any replica answers a poll and the task outlives the replica that
received the call. A working task whose runner's lease lapsed (its memory-api replica died) is reported failed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from memento_gateway.mcp import versions
from memento_gateway.mcp.call import Call
from memento_gateway.mcp.jsonrpc import INVALID_PARAMS, MISSING_CLIENT_CAPABILITY, RpcError
from memento_shared import progress, tasks

if TYPE_CHECKING:
    from memento_gateway.gateway import Gateway

EXTENSION = "io.modelcontextprotocol/tasks"
# seconds to minutes of work: the consolidation pipeline (on the consolidator worker), seed 003's consolidation (an
# LLM's summary when one is configured) and seed 004's maintenance. Re-embedding has no tool: it starts by itself
# when the embedding provider changes.
LONG = frozenset({"memory_consolidate", "memento_consolidate", "memory_run_maintenance"})
METHODS = ("tasks/get", "tasks/cancel", "tasks/update")
LOST = {"code": -32603, "message": "the server running this task stopped before it finished; the work may have been "
        "done in part: check before running it again"}  # fmt: skip


def declared(call: Call) -> bool:
    return EXTENSION in call.session.client_extensions


def wanted(call: Call, tool: str) -> bool:
    """This call runs as a task: a long tool, from a client that takes tasks, in the revision that has them."""
    return tool in LONG and declared(call) and versions.is_stateless(call.session.protocol_version)


def _public(record: dict[str, Any]) -> dict[str, Any]:
    """The Task fields of a record."""
    task = {
        "taskId": record["id"],
        "status": record["status"],
        "createdAt": record["createdAt"],
        "lastUpdatedAt": record["lastUpdatedAt"],
        "ttlMs": tasks.TTL_S * 1000,
        "pollIntervalMs": tasks.POLL_INTERVAL_MS,
    }
    if record.get("statusMessage"):
        task["statusMessage"] = record["statusMessage"]
    return task


def created(record: dict[str, Any]) -> dict[str, Any]:
    """The CreateTaskResult answering the tools/call."""
    return {**_public(record), "resultType": "task", "statusMessage": f"{record['tool']} is running"}


async def handle(
    message_id: Any,
    method: str,
    params: dict[str, Any],
    call: Call,
    gw: Gateway,
    shape: Callable[[str, dict[str, Any]], dict[str, Any]],
) -> dict[str, Any]:
    """tasks/get, tasks/cancel, tasks/update for the caller's own tasks. `shape(tool, body)` makes a tool call's
    result of memory-api's answer, as tools/call would have answered it."""
    if not declared(call):
        data = {"requiredCapabilities": {"extensions": {EXTENSION: {}}}}
        raise RpcError(MISSING_CLIENT_CAPABILITY, "Missing required client capability", message_id, data)
    task_id = params.get("taskId")
    record = await tasks.get(gw.redis, task_id) if isinstance(task_id, str) and 0 < len(task_id) <= 64 else None
    if record is None or record["owner"] != tasks.owner(call.principal.tenant_id, call.principal.subject):
        raise RpcError(INVALID_PARAMS, "Failed to retrieve task: Task not found", message_id)
    if method == "tasks/cancel":
        await tasks.request_cancel(gw.redis, task_id)
        return {}
    if method == "tasks/update":
        return {}  # these tasks never ask for input: any inputResponses answer nothing outstanding
    if record["status"] == "working":
        if not await tasks.has_runner(gw.redis, task_id):
            await tasks.settle(gw.redis, task_id, "failed", error=json.dumps(LOST))
            record = await tasks.get(gw.redis, task_id) or record
        else:
            reported = await progress.read(gw.redis, call.principal.tenant_id, record["progressId"])
            if reported is not None:
                done, total, text = reported
                record["statusMessage"] = f"{text} ({done} of {total})" if text else f"{done} of {total}"
    detailed = _public(record)
    if record["status"] == "completed":
        detailed["result"] = shape(record["tool"], json.loads(record["body"]))
    elif record["status"] == "failed":
        error = json.loads(record["error"])
        detailed["error"] = error
        detailed.setdefault("statusMessage", error["message"])
    return detailed

"""The tasks extension on the official SDK's client: a `ClientExtension` declaring `io.modelcontextprotocol/tasks`,
claiming `resultType: "task"` on tools/call and resolving it by polling `tasks/get` until the task settles, as a
host that supports the extension does. `get` and `cancel` send the methods themselves (Mcp-Name set to the task id
by the SDK, from `name_param`)."""

from __future__ import annotations

from typing import Any, Literal

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError

EXTENSION = "io.modelcontextprotocol/tasks"
TERMINAL = ("completed", "failed", "cancelled")


class CreatedTask(types.Result):
    result_type: Literal["task"]
    task_id: str
    status: str
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None


class DetailedTask(types.Result):
    result_type: str | None = None
    task_id: str
    status: str
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class TaskParams(types.RequestParams):
    task_id: str


class GetTask(types.Request[TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskParams
    name_param = "taskId"


class CancelTask(types.Request[TaskParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskParams
    name_param = "taskId"


def _session(client: Client | ClientSession) -> ClientSession:
    return client.session if isinstance(client, Client) else client


async def get(client: Client | ClientSession, task_id: str) -> DetailedTask:
    return await _session(client).send_request(GetTask(params=TaskParams(task_id=task_id)), DetailedTask)


async def cancel(client: Client | ClientSession, task_id: str) -> None:
    await _session(client).send_request(CancelTask(params=TaskParams(task_id=task_id)), types.EmptyResult)


async def settled(session: Client | ClientSession, task_id: str, timeout_s: float = 60) -> DetailedTask:
    """Poll until the task is terminal, at the interval the server suggests."""
    with anyio.fail_after(timeout_s):
        while True:
            task = await get(session, task_id)
            if task.status in TERMINAL:
                return task
            await anyio.sleep((task.poll_interval_ms or 1000) / 1000)


class Tasks(ClientExtension):
    identifier = EXTENSION

    def __init__(self) -> None:
        self.created: list[CreatedTask] = []
        self.polled: list[DetailedTask] = []

    def claims(self):
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=self.resolve)]

    async def resolve(self, created: CreatedTask, ctx: ClaimContext) -> types.CallToolResult:
        self.created.append(created)
        task = await settled(ctx.session, created.task_id)
        self.polled.append(task)
        if task.status == "completed":
            return types.CallToolResult.model_validate(task.result)
        raise MCPError(task.error["code"] if task.error else -32603, task.status_message or task.status)

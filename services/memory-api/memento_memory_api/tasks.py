"""Tool calls run as tasks (memento_shared.tasks): the gateway asks for one, this checks the call as a tool call
would be checked (known tool, the credential's scope, the arguments, the agent), records the task in Redis and runs
the call in the background on this replica, through the same path as POST /v1/tools/{name} (routes.tools.run_tool).
Its answer lands in the record whichever gateway replica the client polls, or whether the one that asked is still
up. While it runs it holds the record's lease and watches for a cancel; at shutdown it settles as failed."""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

from memento_memory_api.routes.tools import resolve_scope, run_tool
from memento_shared import jsonio, tasks
from memento_shared.errors import ErrorCode, MementoError
from memento_shared.principal import Principal
from memento_shared.tools.registry import TOOLS

log = logging.getLogger(__name__)
WATCH_S = 0.5  # how often a running task looks for a cancel; its lease is renewed every few of these
STOPPED = {"code": -32603, "message": "the server running this task stopped before it finished; the work may have "
           "been done in part: check before running it again"}  # fmt: skip


async def _given(value: Any) -> Any:
    return value


class TaskRunner:
    def __init__(self, state: Any) -> None:
        self.state = state
        self.running: set[asyncio.Task[None]] = set()

    @property
    def redis(self) -> Any:
        return self.state.state_redis  # the state role's (REDIS_URL), where the gateway reads and cancels tasks

    async def start(self, principal: Principal, name: str, arguments: Any, session_id: str | None) -> dict[str, Any]:
        """The new task's record; MementoError for a call that would fail at once (answered as the tool's error)."""
        spec = TOOLS[name]
        if arguments is not None and not isinstance(arguments, dict):
            raise MementoError(ErrorCode.INVALID_PARAMETER, "arguments: must be an object", field="arguments")
        if not principal.has_scope(spec.scope):
            raise MementoError(ErrorCode.FORBIDDEN, f"this credential lacks the {spec.scope!r} scope")
        resolve_scope(principal, getattr(spec.parse(arguments), "agentId", None), session_id)
        stamp = tasks.now()
        record = {
            "id": tasks.new_id(),
            "owner": tasks.owner(principal.tenant_id, principal.subject),
            "tool": name,
            "status": "working",
            "createdAt": stamp,
            "lastUpdatedAt": stamp,
            "progressId": uuid.uuid4().hex,  # the work's steps (memento_shared.progress), read for statusMessage
        }
        await tasks.create(self.redis, record)
        work = asyncio.create_task(self._run(record, principal, arguments, session_id))
        self.running.add(work)
        work.add_done_callback(self.running.discard)
        return record

    async def _run(self, record: dict[str, Any], principal: Principal, arguments: Any, session_id: str | None) -> None:
        task_id = record["id"]
        body = {"arguments": arguments}
        call = asyncio.create_task(
            run_tool(self.state, principal, record["tool"], _given(body), session_id, record["progressId"])
        )
        try:
            watched = 0
            while not (await asyncio.wait({call}, timeout=WATCH_S))[0]:
                watched += 1
                if await tasks.cancel_requested(self.redis, task_id):
                    call.cancel()  # the record says cancelled already (the gateway settled it)
                    log.info("task.cancelled", extra={"tool": record["tool"]})
                    return
                if watched % 10 == 0:
                    await tasks.renew_lease(self.redis, task_id)
            await tasks.settle(self.redis, task_id, "completed", body=jsonio.dumps_str(call.result()))
        except asyncio.CancelledError:  # this replica stops: the task cannot finish here
            call.cancel()
            await asyncio.shield(tasks.settle(self.redis, task_id, "failed", error=jsonio.dumps_str(STOPPED)))
            raise
        except Exception as exc:  # Redis failing us: the lease lapses and pollers are told the task was lost
            call.cancel()
            log.warning("task.unrecorded", extra={"tool": record["tool"], "error_type": type(exc).__name__})
        finally:
            try:
                await asyncio.shield(tasks.drop_lease(self.redis, task_id))
            except Exception:
                pass

    async def stop(self) -> None:
        for work in list(self.running):
            work.cancel()
        await asyncio.gather(*self.running, return_exceptions=True)

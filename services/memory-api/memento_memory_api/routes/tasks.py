"""POST /v1/tasks/{name}: start a tool call as a task (memento_memory_api.tasks) for the gateway, which answers the
client's tools/call with the task and its tasks/get from Redis. Answered `{"task": record}`, or like a tool call
that failed at once: `{"error": ...}` in the tool's dialect."""

from __future__ import annotations

import logging

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from memento_shared.errors import ErrorCode, MementoError
from memento_shared.jsonio import JSONBody
from memento_shared.principal import HEADER, PrincipalError, decode_principal
from memento_shared.tools.registry import TOOLS

log = logging.getLogger(__name__)
router = APIRouter()


@router.post("/v1/tasks/{name}")
async def start_task(name: str, request: Request) -> JSONResponse:
    state = request.app.state
    try:
        principal = decode_principal(request.headers.get(HEADER), state.settings.internal_secret)
    except (PrincipalError, ValueError, TypeError):
        return JSONResponse({"error": {"code": "UNAUTHORIZED", "message": "caller is not authenticated"}}, 401)
    spec = TOOLS.get(name)
    if spec is None:
        return JSONResponse({"error": {"code": "INVALID_PARAMETER", "message": f"unknown tool {name!r}"}}, 404)
    try:
        body = await request.json()
        arguments = body.get("arguments") if isinstance(body, dict) else None
        record = await state.tasks.start(principal, name, arguments, request.headers.get("X-Memento-Session-Id"))
    except MementoError as exc:
        return JSONBody(spec.error_body(exc.to_body()))
    except Exception as exc:  # Redis or the body: nothing was started
        log.warning("task.not_started", extra={"tool": name, "error_type": type(exc).__name__})
        body = MementoError(ErrorCode.RESOURCE_BUSY, "the task could not be started; nothing was run").to_body()
        return JSONBody(spec.error_body(body))
    return JSONBody({"task": record})

"""POST /v1/tools/{name}: verify the principal, validate arguments, run the handler in one transaction.

Tool failures are answered 200 with `{"error": {...}}` (the gateway turns them into `isError` results);
only a bad principal is an HTTP error, because it means the caller is not the gateway.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable
from typing import Any

import asyncpg
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from opentelemetry import trace

from memento_memory_api import server_timing
from memento_memory_api.context import ToolContext
from memento_memory_api.tools.registry import HANDLERS, Answer
from memento_memory_api.uow import Scope
from memento_shared import progress
from memento_shared.db.clashes import CLASHES
from memento_shared.db.rls import CommitOutcomeUnknown
from memento_shared.errors import ErrorCode, MementoError, outcome_unknown, unavailable
from memento_shared.jsonio import JSONBody
from memento_shared.principal import HEADER, Principal, PrincipalError, decode_principal
from memento_shared.telemetry.metrics import TOOL_CALLS, TOOL_LATENCY
from memento_shared.tools.registry import TOOLS

log = logging.getLogger(__name__)
router = APIRouter()
# database errors that say the server could not be reached or could not serve now, rather than refusing the work
_UNREACHABLE = (
    asyncpg.PostgresConnectionError,
    asyncpg.CannotConnectNowError,
    asyncpg.TooManyConnectionsError,
    asyncpg.QueryCanceledError,
    asyncpg.AdminShutdownError,
)
# the work met a concurrent transaction's and was rolled back: the same call may well pass when that one is done
_CONFLICTED = (*CLASHES, asyncpg.LockNotAvailableError)
tracer = trace.get_tracer("memento.memory_api")


def storage_error(exc: Exception) -> MementoError:
    """What a client is told of a database error: a lost or refused connection, a timeout or a clash with a concurrent
    write may pass if retried; an error the database raised about the work itself will not."""
    if isinstance(exc, _CONFLICTED):
        return unavailable("the operation clashed with a concurrent one and was undone; nothing was changed")
    if isinstance(exc, asyncpg.PostgresError) and not isinstance(exc, _UNREACHABLE):
        return MementoError(ErrorCode.STORAGE_ERROR, "the database refused the operation; nothing was changed")
    return unavailable("the database is unavailable; nothing was changed")


def resolve_scope(principal: Principal, requested_agent: str | None, session_id: str | None) -> Scope:
    workspace = principal.workspace
    if not principal.allows_workspace(workspace):
        raise MementoError(ErrorCode.FORBIDDEN, f"workspace {workspace!r} is not allowed for this credential")
    if requested_agent in ("admin", "system"):
        if not principal.has_scope("admin"):
            raise MementoError(ErrorCode.FORBIDDEN, "agentId: admin access needs an admin credential")
        return Scope(principal.tenant_id, workspace, "admin", "admin", session_id)
    if requested_agent is None:
        requested_agent = "default" if principal.allows_agent("default") else principal.agents[0]
    if not principal.allows_agent(requested_agent):
        raise MementoError(ErrorCode.FORBIDDEN, f"agentId: {requested_agent!r} is not allowed for this credential")
    return Scope(principal.tenant_id, workspace, requested_agent, "agent", session_id)


def tool_context(state: Any, principal: Principal, scope: Scope, progress_id: str | None = None) -> ToolContext:
    """The context a handler runs with, from the app's shared clients (also for the console, routes/console.py)."""
    return ToolContext(
        principal=principal,
        scope=scope,
        uow=state.uow,
        redis=state.l1_redis,
        embedder=state.embedder,
        profile=state.profile,
        settings=state.settings,
        queue=state.queue,
        access=state.access,
        partition_verdicts=state.partition_verdicts,
        l1=state.l1_keeper,
        write_back=state.write_back,
        progress_id=progress_id,
        llm=state.llm,
        heuristic=state.heuristic,
        after_ack=state.after_ack,
    )


@router.post("/v1/tools/{name}")
async def call_tool(name: str, request: Request) -> JSONResponse:
    """The call's answer, with where its time went in a Server-Timing header (memento_memory_api.server_timing)."""
    timing = server_timing.begin()
    state = request.app.state
    try:
        principal = decode_principal(request.headers.get(HEADER), state.settings.internal_secret)
    except (PrincipalError, ValueError, TypeError):
        return JSONResponse({"error": {"code": "UNAUTHORIZED", "message": "caller is not authenticated"}}, 401)
    if TOOLS.get(name) is None or HANDLERS.get(name) is None:
        return JSONResponse({"error": {"code": "INVALID_PARAMETER", "message": f"unknown tool {name!r}"}}, 404)
    session_id = request.headers.get("X-Memento-Session-Id")
    progress_id = progress.valid_id(request.headers.get(progress.HEADER))
    response = JSONBody(await run_tool(state, principal, name, request.json(), session_id, progress_id))
    response.headers[server_timing.HEADER] = timing.header()
    return response


async def run_tool(
    state: Any, principal: Principal, name: str, body: Awaitable[Any], session_id: str | None, progress_id: str | None
) -> dict[str, Any]:
    """One call of a known tool, answered as `{"result": ...}` (and `text`) or `{"error": ...}` in its dialect's
    codes: the request's body (awaited here, so a body that is no JSON is answered like any failure), its arguments
    validated, the handler run in the caller's scope. Also run by background tasks (memento_memory_api.tasks)."""
    spec, handler = TOOLS[name], HANDLERS[name]
    started = time.perf_counter()
    status = "ok"
    with tracer.start_as_current_span(f"tool {name}", attributes={"memento.tool": name}):
        try:
            body = await body
            arguments = body.get("arguments") if isinstance(body, dict) else None
            if arguments is not None and not isinstance(arguments, dict):
                raise MementoError(ErrorCode.INVALID_PARAMETER, "arguments: must be an object", field="arguments")
            if not principal.has_scope(spec.scope):
                raise MementoError(ErrorCode.FORBIDDEN, f"this credential lacks the {spec.scope!r} scope")
            args = spec.parse(arguments)
            scope = resolve_scope(principal, getattr(args, "agentId", None), session_id)
            ctx = tool_context(state, principal, scope, progress_id)
            result = await handler(ctx, args)
            payload = (
                {"result": result.result, "text": result.text} if isinstance(result, Answer) else {"result": result}
            )
        except MementoError as exc:
            status = exc.code.value
            payload = exc.to_body()
        except CommitOutcomeUnknown:
            status = ErrorCode.STORAGE_ERROR.value
            log.error("tool.commit_outcome_unknown", extra={"tool": name})
            payload = outcome_unknown().to_body()
        except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError) as exc:
            status = ErrorCode.STORAGE_ERROR.value
            log.error("tool.storage_error", extra={"tool": name, "error_type": type(exc).__name__})
            payload = storage_error(exc).to_body()
        except Exception as exc:
            status = ErrorCode.STORAGE_ERROR.value
            log.exception("tool.failed", extra={"tool": name, "error_type": type(exc).__name__})
            payload = MementoError(ErrorCode.STORAGE_ERROR, "internal error; nothing was changed").to_body()
    if "error" in payload:
        payload = spec.error_body(payload)
    TOOL_CALLS.labels(name, status).inc()
    TOOL_LATENCY.labels(name, status).observe(time.perf_counter() - started)
    return payload

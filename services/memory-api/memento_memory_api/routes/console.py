"""`POST /v1/console/view/{view}` and `POST /v1/console/action/{action}`: the web console's reads and changes, for
the gateway only (a signed principal, as tool calls carry). Scopes are the tools': a read-scoped credential reads,
writes need `write`, dead letters, keys and the audit trail need `admin`. Errors are `{"error": {...}}` with the
HTTP status a page shows (400 bad input, 403 scope, 404 not found or not yours, 409 conflict, 503 storage)."""

from __future__ import annotations

import logging
from typing import Any

import asyncpg
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from memento_memory_api.console import actions, queries
from memento_memory_api.routes.tools import resolve_scope, storage_error, tool_context
from memento_shared.db.rls import CommitOutcomeUnknown
from memento_shared.errors import ErrorCode, MementoError, outcome_unknown
from memento_shared.jsonio import JSONBody
from memento_shared.principal import HEADER, Principal, PrincipalError, decode_principal

log = logging.getLogger(__name__)
router = APIRouter()
STATUS = {
    ErrorCode.INVALID_PARAMETER: 400,
    ErrorCode.FORBIDDEN: 403,
    ErrorCode.UNAUTHORIZED: 401,
    ErrorCode.MEMORY_NOT_FOUND: 404,
    ErrorCode.CONFLICT: 409,
    ErrorCode.PAYLOAD_TOO_LARGE: 413,
}


async def _caller(request: Request) -> tuple[Principal | None, dict[str, Any]]:
    try:
        principal = decode_principal(request.headers.get(HEADER), request.app.state.settings.internal_secret)
    except (PrincipalError, ValueError, TypeError):
        return None, {}
    try:
        body = await request.json()
    except ValueError:
        body = None
    params = body.get("params") if isinstance(body, dict) else None
    return principal, params if isinstance(params, dict) else {}


def _failure(exc: Exception) -> JSONResponse:
    if isinstance(exc, MementoError):
        return JSONResponse(exc.to_body(), STATUS.get(exc.code, 503 if exc.retryable else 500))
    log.error("console.failed", extra={"error_type": type(exc).__name__})
    if isinstance(exc, CommitOutcomeUnknown):
        return JSONResponse(outcome_unknown().to_body(), 503)
    if isinstance(exc, asyncpg.PostgresError | asyncpg.InterfaceError | OSError | TimeoutError):
        error = storage_error(exc)  # as the tools say it: a retry may pass, or the database refused the work
        return JSONResponse(error.to_body(), 503 if error.retryable else 500)
    return JSONResponse(MementoError(ErrorCode.STORAGE_ERROR, "internal error; nothing was changed").to_body(), 500)


def _unauthenticated() -> JSONResponse:
    return JSONResponse({"error": {"code": "UNAUTHORIZED", "message": "caller is not authenticated"}}, 401)


@router.post("/v1/console/view/{view}")
async def view(view: str, request: Request) -> JSONResponse:
    principal, params = await _caller(request)
    if principal is None:
        return _unauthenticated()
    found = queries.VIEWS.get(view)
    if found is None:
        return JSONResponse({"error": {"code": "INVALID_PARAMETER", "message": f"unknown view {view!r}"}}, 404)
    reader, needed = found
    try:
        if not principal.has_scope(needed):
            raise MementoError(ErrorCode.FORBIDDEN, f"this credential lacks the {needed!r} scope")
        # an admin reads every agent's rows; anyone else its own namespace and the shared one, as recall does
        agent = params.get("agent") if isinstance(params.get("agent"), str) and params.get("agent") else None
        wanted = "admin" if principal.has_scope("admin") else agent
        ctx = tool_context(request.app.state, principal, resolve_scope(principal, wanted, None))
        return JSONBody(await reader(ctx, params))
    except Exception as exc:
        return _failure(exc)


@router.post("/v1/console/action/{action}")
async def act(action: str, request: Request) -> JSONResponse:
    principal, params = await _caller(request)
    if principal is None:
        return _unauthenticated()
    if action not in actions.ACTIONS:
        return JSONResponse({"error": {"code": "INVALID_PARAMETER", "message": f"unknown action {action!r}"}}, 404)
    try:
        if not principal.allows_workspace(principal.workspace):
            raise MementoError(ErrorCode.FORBIDDEN, f"workspace {principal.workspace!r} is not allowed")
        return JSONBody({"result": await actions.run(request.app.state, principal, action, params)})
    except Exception as exc:
        return _failure(exc)

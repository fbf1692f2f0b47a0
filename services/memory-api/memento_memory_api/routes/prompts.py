"""MCP prompts and completions, which the gateway forwards here with the caller's principal:
POST /v1/prompts/list, /v1/prompts/get (memento_memory_api.prompts) and /v1/completion/complete
(memento_memory_api.completion). Answered like tools: `{"result": ...}` or `{"error": ...}`; the gateway turns an
INVALID_PARAMETER or MEMORY_NOT_FOUND into JSON-RPC's invalid params."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from memento_memory_api import completion, prompts
from memento_memory_api.context import ToolContext
from memento_memory_api.routes.tools import resolve_scope, storage_error, tool_context
from memento_shared.errors import ErrorCode, MementoError
from memento_shared.jsonio import JSONBody
from memento_shared.principal import HEADER, Principal, PrincipalError, decode_principal

log = logging.getLogger(__name__)
router = APIRouter()
Work = Callable[[Request, Principal, dict[str, Any]], Awaitable[dict[str, Any]]]


async def _answer(request: Request, method: str, work: Work) -> JSONResponse:
    """The principal verified and its read scope checked, then `work`'s result; failures as tool errors."""
    state = request.app.state
    try:
        principal = decode_principal(request.headers.get(HEADER), state.settings.internal_secret)
    except (PrincipalError, ValueError, TypeError):
        return JSONResponse({"error": {"code": "UNAUTHORIZED", "message": "caller is not authenticated"}}, 401)
    try:
        body = await request.json()
        params = body.get("params") if isinstance(body, dict) else None
        if not principal.has_scope("read"):
            raise MementoError(ErrorCode.FORBIDDEN, "this credential lacks the 'read' scope")
        return JSONBody({"result": await work(request, principal, params if isinstance(params, dict) else {})})
    except MementoError as exc:
        return JSONBody(exc.to_body())
    except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError) as exc:
        log.error("prompts.storage_error", extra={"method": method, "error_type": type(exc).__name__})
        return JSONBody(storage_error(exc).to_body())


def _context(request: Request, principal: Principal) -> ToolContext:
    """The tool context of a call with no agentId: the caller's own namespace, as a tool call without one."""
    scope = resolve_scope(principal, None, request.headers.get("X-Memento-Session-Id"))
    return tool_context(request.app.state, principal, scope)


@router.post("/v1/prompts/list")
async def prompts_list(request: Request) -> JSONResponse:
    async def work(request: Request, principal: Principal, params: dict[str, Any]) -> dict[str, Any]:
        return prompts.listed()

    return await _answer(request, "prompts/list", work)


@router.post("/v1/prompts/get")
async def prompts_get(request: Request) -> JSONResponse:
    async def work(request: Request, principal: Principal, params: dict[str, Any]) -> dict[str, Any]:
        return await prompts.rendered(_context(request, principal), params.get("name"), params.get("arguments"))

    return await _answer(request, "prompts/get", work)


@router.post("/v1/completion/complete")
async def completion_complete(request: Request) -> JSONResponse:
    async def work(request: Request, principal: Principal, params: dict[str, Any]) -> dict[str, Any]:
        ctx = _context(request, principal)
        async with ctx.uow(ctx.scope) as uow:
            return await completion.complete(uow.conn, ctx.scope, ctx.visible_agents(), params)

    return await _answer(request, "completion/complete", work)

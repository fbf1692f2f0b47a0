"""MCP resources (seed 001 Part 5), which the gateway forwards here: `memento://items/{id}` for the workspace's
documents. POST /v1/resources/list (pinned first, then newest; a cursor pages on), /v1/resources/templates/list and
/v1/resources/read (the latest version, text/markdown). Answered like tools: `{"result": ...}` or `{"error": ...}`
(MEMORY_NOT_FOUND for an unknown or invisible item, which the gateway turns into MCP's resource-not-found)."""

from __future__ import annotations

import base64
import json
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

import asyncpg
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from memento_memory_api.repositories import documents as docs
from memento_memory_api.uow import Scope
from memento_shared.errors import ErrorCode, MementoError, invalid, not_found
from memento_shared.jsonio import JSONBody
from memento_shared.principal import HEADER, PrincipalError, decode_principal

router = APIRouter()
PREFIX = "memento://items/"
PAGE = 50
TEMPLATE = {
    "uriTemplate": PREFIX + "{id}",
    "name": "Memory item",
    "title": "Memory item",
    "description": "A document of this workspace (spec, plan, decision, troubleshooting, note), its latest version",
    "mimeType": "text/markdown",
}


async def _answer(request: Request, work: Callable[..., Awaitable[dict[str, Any]]]) -> JSONResponse:
    state = request.app.state
    try:
        principal = decode_principal(request.headers.get(HEADER), state.settings.internal_secret)
    except (PrincipalError, ValueError, TypeError):
        return JSONResponse({"error": {"code": "UNAUTHORIZED", "message": "caller is not authenticated"}}, 401)
    try:
        body = await request.json()
        params = body.get("params") if isinstance(body, dict) else None
        params = params if isinstance(params, dict) else {}
        if not principal.allows_workspace(principal.workspace):
            raise MementoError(ErrorCode.FORBIDDEN, f"workspace {principal.workspace!r} is not allowed")
        if not principal.has_scope("read"):
            raise MementoError(ErrorCode.FORBIDDEN, "this credential lacks the 'read' scope")
        scope = Scope(principal.tenant_id, principal.workspace, "default")
        async with state.uow(scope) as uow:
            return JSONBody({"result": await work(uow.conn, scope, params)})
    except MementoError as exc:
        return JSONBody(exc.to_body())


def _cursor(row: Any) -> str:
    raw = json.dumps([row["pinned"], row["updated_at"].isoformat(), row["id"]])
    return base64.urlsafe_b64encode(raw.encode()).decode()


def _after(cursor: Any) -> tuple[Any, ...] | None:
    if cursor is None:
        return None
    try:
        pinned, updated, item_id = json.loads(base64.urlsafe_b64decode(str(cursor).encode()))
        return bool(pinned), datetime.fromisoformat(updated), str(item_id)
    except (ValueError, TypeError):
        raise invalid("cursor", "is not a cursor this server gave") from None


@router.post("/v1/resources/list")
async def resources_list(request: Request) -> JSONResponse:
    async def work(conn: asyncpg.Connection, scope: Scope, params: dict[str, Any]) -> dict[str, Any]:
        rows = await docs.page(conn, scope, _after(params.get("cursor")), PAGE + 1)
        resources = [
            {
                "uri": PREFIX + row["id"],
                "name": row["title"],
                "mimeType": "text/markdown",
                "description": row["kind"] + (f" ({row['canonical_key']})" if row["canonical_key"] else ""),
            }
            for row in rows[:PAGE]
        ]
        answer: dict[str, Any] = {"resources": resources}
        if len(rows) > PAGE:
            answer["nextCursor"] = _cursor(rows[PAGE - 1])
        return answer

    return await _answer(request, work)


@router.post("/v1/resources/templates/list")
async def resource_templates(request: Request) -> JSONResponse:
    async def work(conn: asyncpg.Connection, scope: Scope, params: dict[str, Any]) -> dict[str, Any]:
        return {"resourceTemplates": [TEMPLATE]}

    return await _answer(request, work)


@router.post("/v1/resources/read")
async def resources_read(request: Request) -> JSONResponse:
    async def work(conn: asyncpg.Connection, scope: Scope, params: dict[str, Any]) -> dict[str, Any]:
        uri = params.get("uri")
        if not isinstance(uri, str) or not uri.startswith(PREFIX):
            raise not_found(f"resource {uri!r}")
        found = await docs.item(conn, uri[len(PREFIX) :])
        latest = await docs.version(conn, found["id"]) if found is not None else None
        if latest is None:
            raise not_found(f"resource {uri!r}")
        return {"contents": [{"uri": uri, "mimeType": "text/markdown", "text": latest["content"]}]}

    return await _answer(request, work)

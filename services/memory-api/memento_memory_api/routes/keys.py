"""`POST /internal/keys/verify` and `/internal/keys/lookup`: the gateway asks whether an API key (or, for
credentials derived from one, its id) is active, and what it is bound to.

Only the gateway can call these: the request must carry a principal signed with the internal secret, as tool
calls do. The gateway never forwards /internal/* for MCP clients, and memory-api is not published.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from memento_memory_api.repositories import api_keys
from memento_shared.db.rls import set_system
from memento_shared.principal import HEADER, PrincipalError, decode_principal

router = APIRouter()


def binding(row: asyncpg.Record) -> dict[str, Any]:
    return {k: list(row[k]) if isinstance(row[k], list) else row[k] for k in api_keys.BINDING}


async def _answer(request: Request, field: str, find: Callable[..., Awaitable[Any]]) -> JSONResponse:
    state = request.app.state
    try:
        caller = decode_principal(request.headers.get(HEADER), state.settings.internal_secret)
    except (PrincipalError, ValueError, TypeError):
        caller = None
    if caller is None or caller.subject != "gateway":
        return JSONResponse({"error": {"code": "UNAUTHORIZED", "message": "caller is not the gateway"}}, 401)
    body = await request.json()
    value = body.get(field) if isinstance(body, dict) else None
    if not isinstance(value, str) or not value or len(value) > 200:
        return JSONResponse({"valid": False})
    async with state.pool.acquire() as conn, conn.transaction():
        await set_system(conn)
        row = await find(conn, value)
    return JSONResponse({"valid": True, "key": binding(row)} if row else {"valid": False})


@router.post("/internal/keys/verify")
async def verify(request: Request) -> JSONResponse:
    return await _answer(request, "key", api_keys.verify)


@router.post("/internal/keys/lookup")
async def lookup(request: Request) -> JSONResponse:
    return await _answer(request, "id", api_keys.get_active)

"""`GET /health`: Redis, memory-api (and through it Postgres), and how many sessions are alive (seed 000 §12)."""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from memento_gateway.gateway import gateway
from memento_shared import jsonio
from memento_shared.telemetry.metrics import ACTIVE_SESSIONS


async def health(request: Request) -> Response:
    gw = gateway(request)
    checks: dict[str, Any] = {"redis": "up", "memory_api": "up"}
    try:
        async with asyncio.timeout(2):
            sessions = await gw.sessions.active_count()
        ACTIVE_SESSIONS.set(sessions)
        checks["sessions"] = {"active": sessions, "streams_here": gw.hub.open_streams}
    except Exception:
        checks["redis"] = "down"
    try:
        upstream = await gw.upstream.client.get("/health", timeout_s=3)
        checks["postgres"] = jsonio.loads(upstream.content).get("postgres", "down")
        if upstream.status != 200:
            checks["memory_api"] = "degraded"
    except Exception:
        checks["memory_api"] = "down"
        checks["postgres"] = "unknown"
    ok = checks["memory_api"] == "up" and checks["redis"] == "up"
    return JSONResponse(
        {"status": "ok" if ok else "degraded", "service": "gateway", **checks}, status_code=200 if ok else 503
    )


async def livez(request: Request) -> Response:
    """Liveness: the process answers. No dependency is checked, so a Postgres or Redis outage never restarts pods."""
    return JSONResponse({"status": "alive", "service": "gateway"})

"""/health (Postgres, Redis; 503 when Postgres is down, §9.2) and /metrics."""

from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from memento_shared.telemetry.metrics import metrics_endpoint

router = APIRouter()


@router.get("/health")
async def health(request: Request) -> JSONResponse:
    state = request.app.state
    checks = {"postgres": "up", "redis": "up"}
    try:
        await state.pool.fetchval("SELECT 1", timeout=2)
    except Exception:
        checks["postgres"] = "down"
    try:
        async with asyncio.timeout(2):
            await state.queue.ping()
    except Exception:
        checks["redis"] = "down"
    ok = checks["postgres"] == "up"
    body = {
        "status": "ok" if ok else "degraded",
        "service": "memory-api",
        **checks,
        "relay": "running" if state.relay.running else "stopped",
    }
    return JSONResponse(body, status_code=200 if ok else 503)


@router.get("/livez")
async def livez() -> JSONResponse:
    """Liveness: the process answers. Dependencies are /health's business, so an outage never restarts pods."""
    return JSONResponse({"status": "alive", "service": "memory-api"})


router.add_api_route("/metrics", metrics_endpoint, methods=["GET"], include_in_schema=False)

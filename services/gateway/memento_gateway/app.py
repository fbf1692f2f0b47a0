"""Gateway composition root and the Streamable HTTP transport (`POST/GET/DELETE /mcp`)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import redis.asyncio as aioredis
from opentelemetry import trace
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from memento_gateway.auth import WORKSPACE, AuthError, bearer_token, resolve_principal
from memento_gateway.mcp import versions
from memento_gateway.mcp.protocol import (
    INVALID_REQUEST,
    PARSE_ERROR,
    RpcError,
    dispatch,
    error_response,
    initialize_result,
)
from memento_gateway.mcp.sessions import SessionStore
from memento_gateway.upstream import Upstream
from memento_shared.http import RequestMetrics
from memento_shared.settings import Settings
from memento_shared.telemetry.metrics import ACTIVE_SESSIONS, metrics_endpoint
from memento_shared.tools.registry import DEFAULT_PROFILES, PROFILES

log = logging.getLogger(__name__)
tracer = trace.get_tracer("memento.gateway")
MAX_BODY_BYTES = 1_000_000
SESSION_HEADER = "mcp-session-id"


def _base_url(request: Request) -> str:
    return f"{request.url.scheme}://{request.url.netloc}"


def unauthorized(request: Request) -> Response:
    metadata = _base_url(request) + "/.well-known/oauth-protected-resource"
    return JSONResponse(
        {"error": "invalid_token", "error_description": "missing or invalid access key"},
        status_code=401,
        headers={"WWW-Authenticate": f'Bearer error="invalid_token", resource_metadata="{metadata}"'},
    )


def rpc_error(status: int, code: int, message: str, msg_id: Any = None) -> JSONResponse:
    return JSONResponse(error_response(msg_id, code, message), status_code=status)


def _profiles(request: Request) -> tuple[str, ...] | None:
    raw = request.query_params.get("profile")
    if not raw:
        return DEFAULT_PROFILES
    chosen = tuple(p.strip() for p in raw.split(",") if p.strip())
    if not chosen or any(p not in PROFILES and p != "all" for p in chosen):
        return None
    return chosen


async def _read_json(request: Request) -> tuple[Any, Response | None]:
    body = await request.body()
    if len(body) > MAX_BODY_BYTES:
        return None, rpc_error(413, INVALID_REQUEST, f"request body larger than {MAX_BODY_BYTES} bytes")
    try:
        return json.loads(body), None
    except ValueError:
        return None, rpc_error(400, PARSE_ERROR, "Parse error: body is not JSON")


def _origin_allowed(request: Request, settings: Settings) -> bool:
    origin = request.headers.get("origin")
    allowed = settings.allowed_origin_list
    return origin is None or not allowed or origin in allowed


async def mcp_post(request: Request) -> Response:
    state = request.app.state
    settings: Settings = state.settings
    if not _origin_allowed(request, settings):
        return JSONResponse({"error": "origin not allowed"}, status_code=403)
    workspace = request.headers.get("x-memento-workspace", "default")
    if not WORKSPACE.match(workspace):
        return rpc_error(400, INVALID_REQUEST, "X-Memento-Workspace: 1-64 letters, digits, '_', '.', '-'")
    try:
        principal = resolve_principal(
            bearer_token(request.headers.get("authorization")), settings.memento_access_key, workspace
        )
    except AuthError:
        return unauthorized(request)
    header_version = request.headers.get("mcp-protocol-version")
    if header_version and header_version not in versions.SUPPORTED:
        return rpc_error(
            400,
            INVALID_REQUEST,
            f"Unsupported MCP-Protocol-Version {header_version!r}; supported: {', '.join(versions.SUPPORTED)}",
        )
    message, problem = await _read_json(request)
    if problem:
        return problem
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return rpc_error(400, INVALID_REQUEST, "Invalid Request: expected one JSON-RPC 2.0 message")
    msg_id = message.get("id")
    method = message.get("method")
    if method is None:  # a response from the client (to a server request): acknowledged
        return Response(status_code=202)
    params = message.get("params") or {}
    if not isinstance(method, str) or not isinstance(params, dict):
        return rpc_error(400, INVALID_REQUEST, "Invalid Request: method must be a string, params an object", msg_id)

    if method == "initialize":
        profiles = _profiles(request)
        if profiles is None:
            return rpc_error(400, INVALID_REQUEST, f"profile: choose from {', '.join(PROFILES)} or all", msg_id)
        version = versions.negotiate(params.get("protocolVersion"))
        client = (params.get("clientInfo") or {}).get("name", "") if isinstance(params.get("clientInfo"), dict) else ""
        session = await state.sessions.create(principal, version, profiles, str(client))
        body = {"jsonrpc": "2.0", "id": msg_id, "result": initialize_result(version)}
        return JSONResponse(body, headers={"Mcp-Session-Id": session.id})

    session_id = request.headers.get(SESSION_HEADER)
    if not session_id:
        return rpc_error(
            400, INVALID_REQUEST, "Bad Request: Mcp-Session-Id header is required after initialize", msg_id
        )
    session = await state.sessions.get(session_id)
    if session is None or session.principal.tenant_id != principal.tenant_id:
        return rpc_error(404, INVALID_REQUEST, "Session not found; initialize again", msg_id)
    if "id" not in message:  # notifications (initialized, cancelled, ...) need no answer
        return Response(status_code=202)
    try:
        with tracer.start_as_current_span(
            f"mcp {method}", kind=trace.SpanKind.SERVER, attributes={"mcp.method": method}
        ):
            result = await dispatch(session, method, params, state.upstream)
    except RpcError as exc:
        return JSONResponse(error_response(msg_id, exc.code, exc.message))
    return JSONResponse({"jsonrpc": "2.0", "id": msg_id, "result": result})


async def mcp_get(request: Request) -> Response:
    # The server-to-client stream arrives with the transport work (issue 3); clients treat 405 as "no stream".
    return Response(status_code=405, headers={"Allow": "POST, DELETE"})


async def mcp_delete(request: Request) -> Response:
    state = request.app.state
    try:
        resolve_principal(
            bearer_token(request.headers.get("authorization")), state.settings.memento_access_key, "default"
        )
    except AuthError:
        return unauthorized(request)
    session_id = request.headers.get(SESSION_HEADER)
    if not session_id:
        return rpc_error(400, INVALID_REQUEST, "Mcp-Session-Id header is required")
    if not await state.sessions.delete(session_id):
        return rpc_error(404, INVALID_REQUEST, "Session not found")
    return Response(status_code=200)


async def protected_resource(request: Request) -> Response:
    base = _base_url(request)
    return JSONResponse(
        {"resource": base + "/mcp", "bearer_methods_supported": ["header"], "resource_name": "Memento memory server"}
    )


async def health(request: Request) -> Response:
    state = request.app.state
    checks: dict[str, Any] = {"redis": "up", "memory_api": "up"}
    try:
        sessions = await asyncio.wait_for(state.sessions.active_count(), 2)
        ACTIVE_SESSIONS.set(sessions)
        checks["sessions"] = {"active": sessions}
    except Exception:
        checks["redis"] = "down"
    try:
        upstream = await state.upstream.client.get("/health", timeout=3)
        checks["postgres"] = upstream.json().get("postgres", "down")
        if upstream.status_code != 200:
            checks["memory_api"] = "degraded"
    except Exception:
        checks["memory_api"] = "down"
        checks["postgres"] = "unknown"
    ok = checks["memory_api"] == "up" and checks["redis"] == "up"
    return JSONResponse(
        {"status": "ok" if ok else "degraded", "service": "gateway", **checks}, status_code=200 if ok else 503
    )


def create_app(settings: Settings) -> Starlette:
    if not settings.internal_secret:
        raise RuntimeError("MEMENTO_INTERNAL_SECRET is not set: the gateway cannot sign principals for memory-api")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        redis = aioredis.from_url(settings.redis_url, socket_connect_timeout=2, socket_timeout=5)
        app.state.settings = settings
        app.state.sessions = SessionStore(redis, settings.session_ttl_minutes * 60)
        app.state.upstream = Upstream(settings.memory_api_url, settings.internal_secret, settings.upstream_timeout_s)
        try:
            yield
        finally:
            await app.state.upstream.aclose()
            await redis.aclose()

    app = Starlette(
        routes=[
            Route("/mcp", mcp_post, methods=["POST"]),
            Route("/mcp", mcp_get, methods=["GET"]),
            Route("/mcp", mcp_delete, methods=["DELETE"]),
            Route("/.well-known/oauth-protected-resource", protected_resource, methods=["GET"]),
            Route("/.well-known/oauth-protected-resource/mcp", protected_resource, methods=["GET"]),
            Route("/health", health, methods=["GET"]),
            Route("/metrics", metrics_endpoint, methods=["GET"]),
        ],
        lifespan=lifespan,
    )
    app.add_middleware(RequestMetrics, service="gateway")
    return app

"""Gateway composition root: create_app(settings) wires Redis, memory-api, sessions, the stream hub, credentials
and limits, then mounts the MCP transports, OAuth and the operational routes."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from redis.exceptions import RedisError
from starlette.applications import Starlette
from starlette.middleware.gzip import GZipMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from memento_gateway.auth.api_keys import ApiKeys
from memento_gateway.auth.authenticator import Authenticator
from memento_gateway.console import routes as console_routes
from memento_gateway.edge import edge_from
from memento_gateway.gateway import Gateway
from memento_gateway.http.guard import McpCors, OriginGuard
from memento_gateway.http.limits import RateLimiter, StreamSlots
from memento_gateway.mcp.hub import StreamHub
from memento_gateway.mcp.inflight import InFlight
from memento_gateway.mcp.jsonrpc import error_response
from memento_gateway.mcp.sessions import SessionStore
from memento_gateway.mcp.subscriptions import Subscriptions
from memento_gateway.oauth import routes as oauth_routes
from memento_gateway.oauth.cimd import ClientDocuments
from memento_gateway.oauth.provider import MementoOAuthProvider
from memento_gateway.oauth.signing import load_signer
from memento_gateway.oauth.store import OAuthStore
from memento_gateway.routes.health import health, livez
from memento_gateway.settings import GatewaySettings
from memento_gateway.transports import legacy_sse, streamable_http
from memento_gateway.upstream import Upstream
from memento_shared import redis_client
from memento_shared.http import RequestMetrics
from memento_shared.internal_http import InternalClient
from memento_shared.telemetry.metrics import metrics_endpoint

log = logging.getLogger(__name__)
GZIP_MIN_BYTES = 4096  # tools/list with every schema is the big one; SSE is never compressed
# Level 1: JSON still shrinks by most of what level 9 achieves, for a fraction of the CPU (profiled: at starlette's
# default level 9, compression was 9% of the gateway's CPU under recall-by-text load).
GZIP_LEVEL = 1
REDIS_DOWN_RETRY_AFTER_S = 2  # Valkey restarts in about a second (AOF); sessions, rate and streams all wait on it
# JSON-RPC's range for implementation-defined server errors: the server is fine, a store it needs is not (not
# -32603, an internal error, which says the request itself broke something)
SERVER_UNAVAILABLE = -32000


async def redis_unavailable(request: Request, exc: Exception) -> JSONResponse:
    """Redis (sessions, rate limits, streams) down: a retryable 503 with a JSON-RPC error, not a bare 500."""
    log.warning("gateway.redis_unavailable", extra={"error": type(exc).__name__})
    body = error_response(None, SERVER_UNAVAILABLE, f"Redis is unavailable; retry in {REDIS_DOWN_RETRY_AFTER_S} s")
    return JSONResponse(body, status_code=503, headers={"Retry-After": str(REDIS_DOWN_RETRY_AFTER_S)})


def client_documents(settings: GatewaySettings, redis: Any) -> ClientDocuments | None:
    """OAuth clients named by a metadata document URL, unless MEMENTO_OAUTH_CIMD=false."""
    if not settings.oauth_cimd_enabled:
        return None
    return ClientDocuments(
        redis,
        allow_private=settings.oauth_cimd_allow_private,
        ca_file=settings.oauth_cimd_ca_file,
        timeout_s=settings.oauth_cimd_timeout_s,
    )


def create_app(settings: GatewaySettings, memory_api: InternalClient | None = None) -> Starlette:
    """memory_api: how to reach memory-api when not over HTTP at MEMORY_API_URL (a co-hosting composition's
    in-process client; the gateway never imports memory-api itself)."""
    if not settings.internal_secret:
        raise RuntimeError("MEMENTO_INTERNAL_SECRET is not set: the gateway cannot sign principals for memory-api")
    edge = edge_from(settings)
    oauth = MementoOAuthProvider(edge, settings)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # the state Redis (sessions, rate limits, streams, OAuth: maybe a cluster) and the queue role's, which carries
        # the pub/sub between replicas (a cluster client has none); one client when both are the same Redis
        redis = redis_client.client(
            settings.redis_url,
            timeout=5,
            connect_timeout=2,
            wait_replicas=settings.redis_wait_replicas,
            wait_timeout_ms=settings.redis_wait_timeout_ms,
        )
        same = settings.redis_queue_url == settings.redis_url and not redis_client.is_cluster(redis)
        messaging = redis if same else redis_client.client(settings.redis_queue_url, timeout=5, connect_timeout=2)
        inflight = InFlight()
        hub = StreamHub(messaging, on_cancel=inflight.cancel)
        upstream = Upstream(settings.memory_api_url, settings.internal_secret, settings.upstream_timeout_s, memory_api)
        keys = ApiKeys(upstream)
        gw = Gateway(
            settings=settings,
            edge=edge,
            redis=redis,
            sessions=SessionStore(redis, settings.session_ttl_minutes * 60),
            hub=hub,
            inflight=inflight,
            upstream=upstream,
            auth=Authenticator(settings.memento_access_key, keys),
            rate=RateLimiter(redis, settings.rate_limit_per_minute),
            streams=StreamSlots(redis, settings.max_streams_per_principal),
            oauth=oauth,
            subscriptions=Subscriptions(redis, hub, settings.session_ttl_minutes * 60),
        )
        documents = client_documents(settings, redis)
        store = OAuthStore(redis, settings.oauth_refresh_token_days * 86400)
        oauth.start(store, load_signer(settings), gw.auth, documents)
        app.state.gateway = gw
        await gw.hub.start()
        log.info("gateway.started", extra={"public_url": edge.public_url})
        try:
            yield
        finally:
            await gw.subscriptions.stop()
            await inflight.drain()
            await gw.hub.stop()
            await upstream.aclose()
            if documents is not None:
                await documents.aclose()
            await redis.aclose()
            if messaging is not redis:
                await messaging.aclose()

    app = Starlette(
        routes=[
            *streamable_http.ROUTES,
            *legacy_sse.ROUTES,
            *oauth_routes.routes(oauth, edge, documents=settings.oauth_cimd_enabled),
            console_routes.mount(),
            Route("/health", health, methods=["GET"]),
            Route("/livez", livez, methods=["GET"]),
            Route("/metrics", metrics_endpoint, methods=["GET"]),
        ],
        lifespan=lifespan,
        exception_handlers={RedisError: redis_unavailable},
    )
    app.add_middleware(GZipMiddleware, minimum_size=GZIP_MIN_BYTES, compresslevel=GZIP_LEVEL)
    if edge.allowed_origins:
        app.add_middleware(McpCors, edge=edge)
    app.add_middleware(OriginGuard, edge=edge)  # outside CORS: a disallowed origin is refused, preflight or not
    app.add_middleware(RequestMetrics, service="gateway")
    return app

"""DNS-rebinding protection for the MCP endpoints: a Host or Origin we do not serve gets 403 before anything else.

A web page on another site can make a browser send requests to a loopback server (after rebinding its DNS name
to 127.0.0.1); the Host and Origin headers still name that site, so checking them stops it (MCP transports
"Security warning").
"""

from __future__ import annotations

import logging

from starlette.datastructures import Headers
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from memento_gateway.edge import Edge, host_allowed, origin_allowed
from memento_shared.telemetry.metrics import GATEWAY_REJECTIONS

log = logging.getLogger(__name__)
GUARDED = ("/mcp", "/sse", "/message")


class OriginGuard:
    def __init__(self, app: ASGIApp, edge: Edge) -> None:
        self.app = app
        self.edge = edge

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] in GUARDED:
            headers = Headers(scope=scope)
            problem = None
            if not host_allowed(self.edge, headers.get("host")):
                problem = "Host"
            elif not origin_allowed(self.edge, headers.get("origin")):
                problem = "Origin"
            if problem:
                GATEWAY_REJECTIONS.labels(f"{problem.lower()}_not_allowed").inc()
                log.warning("request.rejected", extra={"reason": f"{problem.lower()}_not_allowed"})
                body = {"error": "forbidden", "error_description": f"{problem} not allowed (DNS-rebinding protection)"}
                await JSONResponse(body, status_code=403)(scope, receive, send)
                return
        await self.app(scope, receive, send)


class McpCors:
    """CORS for browser-based MCP clients on the origins ALLOWED_ORIGINS lists (only on the MCP endpoints: the
    OAuth routes carry the SDK's own CORS). Exposes Mcp-Session-Id, which a browser client must read back."""

    def __init__(self, app: ASGIApp, edge: Edge) -> None:
        self.app = app
        self.cors = CORSMiddleware(
            app,
            allow_origins=list(edge.allowed_origins),
            allow_methods=["GET", "POST", "DELETE"],
            allow_headers=["Authorization", "Content-Type", "Accept", "Mcp-Session-Id", "MCP-Protocol-Version",
                           "Mcp-Method", "Mcp-Name", "Last-Event-ID", "X-Memento-Workspace"],
            expose_headers=["Mcp-Session-Id", "WWW-Authenticate", "Retry-After"],
            max_age=600,
        )  # fmt: skip

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] in GUARDED:
            await self.cors(scope, receive, send)
        else:
            await self.app(scope, receive, send)

"""What every console response carries and every console POST must pass: a strict Content-Security-Policy (no
inline script, nothing from elsewhere), no framing, no caching; the session cookie's attributes; the per-session
CSRF token, compared in constant time; and the Origin, which a browser sets on every cross-site POST."""

from __future__ import annotations

import hmac
from urllib.parse import urlsplit

from starlette.datastructures import MutableHeaders
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memento_gateway.edge import Edge, host_allowed

COOKIE = "memento_console"
FLOW_COOKIE = "memento_console_flow"
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none';"
    " base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    # not no-referrer: under it a browser sends `Origin: null` with form posts, and same_origin needs the real one
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
    "Cross-Origin-Opener-Policy": "same-origin",
}


class SecurityHeaders:
    """Around the console's mount only: the MCP endpoints answer machines and keep their own headers."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in HEADERS.items():
                    if name == "Cache-Control" and scope["path"].startswith("/console/static/"):
                        headers[name] = "public, max-age=300"
                        continue
                    headers[name] = value
            await send(message)

        await self.app(scope, receive, send_with_headers)


def secure_cookies(edge: Edge) -> bool:
    return edge.public_url.startswith("https://")


def set_cookie(response: Response, edge: Edge, name: str, value: str, max_age: int) -> None:
    response.set_cookie(
        name, value, max_age=max_age, path="/console", httponly=True, samesite="strict", secure=secure_cookies(edge)
    )


def csrf_ok(expected: str, given: object) -> bool:
    return isinstance(given, str) and bool(given) and hmac.compare_digest(expected.encode(), given.encode())


def same_origin(edge: Edge, host: str | None, origin: str | None) -> bool:
    """A POST from a page of another site (or through a rebound DNS name) is refused before its form is read: the
    Origin a browser sends must be this server's (the Host it asked, or the public URL)."""
    if not host_allowed(edge, host):
        return False
    if origin is None:
        return True  # not a browser; the CSRF token still has to match
    netloc = urlsplit(origin).netloc.lower()
    return origin.rstrip("/") == edge.public_url or (bool(host) and netloc == str(host).lower())

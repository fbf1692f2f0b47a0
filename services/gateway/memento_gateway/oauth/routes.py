"""OAuth routes: RFC 9728 protected-resource metadata, RFC 8414 authorization-server metadata (issuer without a
trailing slash), the JWKS, the login page, and the MCP SDK's handlers for /authorize (PKCE S256 only),
/token, /register (RFC 7591) and /revoke (RFC 7009). A `client_id` that is a metadata document's URL is checked
before the SDK's /authorize sees it (oauth/cimd.py), so a refused document is answered with the reason."""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import parse_qs

from mcp.server.auth.routes import build_metadata, cors_middleware, create_auth_routes
from mcp.server.auth.settings import ClientRegistrationOptions, RevocationOptions
from pydantic import AnyHttpUrl, ConfigDict, TypeAdapter, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memento_gateway.edge import Edge
from memento_gateway.oauth import cimd
from memento_gateway.oauth.cimd import Refused, is_document_id
from memento_gateway.oauth.login import login_page, login_submit
from memento_gateway.oauth.provider import MementoOAuthProvider

log = logging.getLogger(__name__)
SCOPES = list(cimd.SCOPES)
METADATA_PATH = "/.well-known/oauth-authorization-server"
JWKS_PATH = "/.well-known/jwks.json"
# RFC 8414 compares issuers as strings: keep "http://host:port" exactly, with no "/" appended
_ISSUER = TypeAdapter(AnyHttpUrl, config=ConfigDict(url_preserve_empty_path=True))


def _json(document: dict[str, Any]) -> ASGIApp:
    async def serve(_: Request) -> Response:
        return JSONResponse(document, headers={"Cache-Control": "public, max-age=300"})

    return cors_middleware(serve, ["GET", "OPTIONS"])


AUTHORIZE_PATH = "/authorize"
MAX_AUTHORIZE_BODY = 64 * 1024  # a POSTed authorization request is a few hundred bytes of form fields


class DocumentFirst:
    """/authorize with a metadata-document client_id: the document is fetched and checked first, and a refusal is
    a 400 `invalid_client` naming the problem (the SDK's handler would only say the client is not found). A good
    document is then in the cache the SDK's handler reads through provider.get_client. (A class, not a function:
    Starlette would take a function for a request handler.)"""

    def __init__(self, app: ASGIApp, provider: MementoOAuthProvider) -> None:
        self.app, self.provider = app, provider

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        client_id = request.query_params.get("client_id")
        if request.method == "POST":
            body = b""
            async for chunk in request.stream():
                body += chunk
                if len(body) > MAX_AUTHORIZE_BODY:
                    too_large = {"error": "invalid_request", "error_description": "request body too large"}
                    await JSONResponse(too_large, 413)(scope, receive, send)
                    return
            client_id = (parse_qs(body.decode("latin-1")).get("client_id") or [client_id])[0]
            receive = _replay(body)
        if client_id and is_document_id(client_id):
            refusal = await _refusal(self.provider, client_id)
            if refusal is not None:
                refused = {"error": "invalid_client", "error_description": refusal}
                await JSONResponse(refused, 400, headers={"Cache-Control": "no-store"})(scope, receive, send)
                return
        await self.app(scope, receive, send)


async def _refusal(provider: MementoOAuthProvider, client_id: str) -> str | None:
    if provider.documents is None:
        return "this server does not accept Client ID Metadata Documents; register the client (RFC 7591)"
    try:
        await provider.documents.client(client_id)
    except Refused as exc:
        log.info("oauth.cimd_refused", extra={"reason": str(exc)})
        return str(exc)
    return None


def _replay(body: bytes) -> Receive:
    """A receive channel that gives the already-read body again, then what the server says next (a disconnect)."""
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return {"type": "http.disconnect"}

    return receive


def routes(provider: MementoOAuthProvider, edge: Edge, *, documents: bool = True) -> list[Route]:
    resource = {
        "resource": edge.resource_url,
        "authorization_servers": [edge.public_url],
        "scopes_supported": SCOPES,
        "bearer_methods_supported": ["header"],
        "resource_name": "Memento memory server",
    }
    found = [
        Route("/.well-known/oauth-protected-resource/mcp", _json(resource), methods=["GET", "OPTIONS"]),
        Route("/.well-known/oauth-protected-resource", _json(resource), methods=["GET", "OPTIONS"]),
    ]
    try:
        issuer = _ISSUER.validate_python(edge.public_url)
        registration = ClientRegistrationOptions(enabled=True, valid_scopes=SCOPES, default_scopes=SCOPES)
        revocation = RevocationOptions(enabled=True)
        handlers = create_auth_routes(provider, issuer, None, registration, revocation)
    except (ValueError, ValidationError) as exc:  # e.g. plain http on a non-loopback address
        log.warning("oauth.disabled", extra={"reason": str(exc).splitlines()[0], "hint": "set MEMENTO_PUBLIC_URL"})
        return found
    metadata = build_metadata(issuer, None, registration, revocation).model_dump(mode="json", exclude_none=True)
    metadata.update(
        issuer=edge.public_url,
        jwks_uri=edge.public_url + JWKS_PATH,
        authorization_response_iss_parameter_supported=True,
    )
    if documents:
        metadata["client_id_metadata_document_supported"] = True
    handlers = [
        Route(AUTHORIZE_PATH, DocumentFirst(route.app, provider), methods=["GET", "POST"])
        if route.path == AUTHORIZE_PATH
        else route
        for route in handlers
    ]

    async def jwks(_: Request) -> Response:
        return JSONResponse(provider.signer.jwks(), headers={"Cache-Control": "public, max-age=300"})

    return [
        *found,
        Route(METADATA_PATH, _json(metadata), methods=["GET", "OPTIONS"]),
        Route(JWKS_PATH, cors_middleware(jwks, ["GET", "OPTIONS"]), methods=["GET", "OPTIONS"]),
        *[route for route in handlers if route.path != METADATA_PATH],
        Route("/oauth/login", login_page, methods=["GET"]),
        Route("/oauth/login", login_submit, methods=["POST"]),
    ]

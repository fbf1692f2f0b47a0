"""OAuth routes: RFC 9728 protected-resource metadata, RFC 8414 authorization-server metadata (issuer without a
trailing slash), the JWKS, the login page, and the MCP SDK's handlers for /authorize (PKCE S256 only),
/token, /register (RFC 7591) and /revoke (RFC 7009)."""

from __future__ import annotations

import logging

from mcp.server.auth.routes import build_metadata, cors_middleware, create_auth_routes
from mcp.server.auth.settings import ClientRegistrationOptions, RevocationOptions
from pydantic import AnyHttpUrl, ConfigDict, TypeAdapter, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from memento_gateway.edge import Edge
from memento_gateway.oauth.login import login_page, login_submit
from memento_gateway.oauth.provider import MementoOAuthProvider

log = logging.getLogger(__name__)
SCOPES = ["read", "write", "admin"]
METADATA_PATH = "/.well-known/oauth-authorization-server"
JWKS_PATH = "/.well-known/jwks.json"
# RFC 8414 compares issuers as strings: keep "http://host:port" exactly, with no "/" appended
_ISSUER = TypeAdapter(AnyHttpUrl, config=ConfigDict(url_preserve_empty_path=True))


def _json(document: dict) -> ASGIApp:
    async def serve(_: Request) -> Response:
        return JSONResponse(document, headers={"Cache-Control": "public, max-age=300"})

    return cors_middleware(serve, ["GET", "OPTIONS"])


def routes(provider: MementoOAuthProvider, edge: Edge) -> list[Route]:
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

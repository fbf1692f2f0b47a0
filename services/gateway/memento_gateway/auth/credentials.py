"""Reading a credential off a request, and the 401 that sends MCP clients to the OAuth metadata (RFC 6750, RFC 9728).

Clients send `Authorization: Bearer …`. Seed 000 §12 also accepts an `accessKey` query parameter, for clients
that can set a URL but no header (the legacy SSE endpoint first of all).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse

from memento_shared.telemetry.metrics import GATEWAY_REJECTIONS


def bearer_token(authorization: str | None) -> str | None:
    if not authorization:
        return None
    scheme, _, token = authorization.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def credential(request: Request) -> str | None:
    headers = request.headers.getlist("authorization")
    if len(headers) > 1:  # two credentials: which one a proxy and we would each read is anyone's guess
        return ""
    header = headers[0] if headers else None
    if header is not None:
        return bearer_token(header) or ""  # a header we cannot read is a bad credential, not a missing one
    return request.query_params.get("accessKey")


def unauthorized(resource_metadata_url: str, description: str, *, missing: bool = False) -> JSONResponse:
    GATEWAY_REJECTIONS.labels("unauthorized").inc()
    # RFC 6750 §3.1: no error code when the request carried no credential at all
    error = "" if missing else 'error="invalid_token", '
    challenge = f'Bearer {error}error_description="{description}", resource_metadata="{resource_metadata_url}"'
    return JSONResponse(
        {"error": "invalid_token", "error_description": description},
        status_code=401,
        headers={"WWW-Authenticate": challenge},
    )

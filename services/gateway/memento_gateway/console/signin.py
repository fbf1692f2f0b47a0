"""Signing in to the console: with an access key typed on the page (the gateway's own Authenticator, rate-limited
per address as the OAuth login page is), or through this gateway's OAuth server as a public client of itself
(authorization code with PKCE S256, redirect back to /console/oauth/callback). Either way the session keeps the
principal the credential resolved to, never the credential."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from urllib.parse import urlencode

from mcp.shared.auth import OAuthClientInformationFull
from starlette.requests import Request
from starlette.responses import Response

from memento_gateway.auth.authenticator import AuthError
from memento_gateway.console import web
from memento_gateway.console.security import COOKIE, FLOW_COOKIE, same_origin, set_cookie
from memento_gateway.console.sessions import FLOW_TTL_S
from memento_gateway.gateway import Gateway, gateway
from memento_gateway.upstream import UpstreamUnavailable
from memento_shared.principal import Principal

CLIENT_ID = "memento-console"
SCOPES = "read write admin"  # the server grants those the key holds


async def login_page(request: Request) -> Response:
    if await web.visit(request) is not None:
        return web.to("/console/memories")
    return web.page("login.html", None, error=None)


async def login_submit(request: Request) -> Response:
    gw = gateway(request)
    if not same_origin(gw.edge, request.headers.get("host"), request.headers.get("origin")):
        return web.error(None, 403, "This request came from another site.")
    form = await request.form()
    key = str(form.get("access_key", "")).strip()
    client = request.client.host if request.client else "unknown"
    if await gw.rate.retry_after(f"ip:{client}", per_minute=30, cost=0):
        return web.page("login.html", None, 429, error="Too many attempts from this address; wait a minute.")
    try:
        caller = await gw.auth.authenticate(key or None)
    except AuthError:
        await gw.rate.retry_after(f"ip:{client}", per_minute=30)
        return web.page("login.html", None, 401, error="That access key is not valid.")
    except UpstreamUnavailable:
        return web.page("login.html", None, 503, error="The server cannot check keys right now; try again shortly.")
    if caller.credential == "oauth":  # a token is not a key: it must not outlive itself as a session
        return web.page("login.html", None, 401, error="That access key is not valid.")
    return await _signed_in(gw, caller.principal, caller.credential)


async def _signed_in(gw: Gateway, principal: Principal, credential: str) -> Response:
    session_id = await web.sessions(gw).create(principal, credential)
    response = web.to("/console/memories")
    set_cookie(response, gw.edge, COOKIE, session_id, gw.settings.session_ttl_minutes * 60)
    response.delete_cookie(FLOW_COOKIE, path="/console")
    return response


async def logout(request: Request) -> Response:
    v = await web.visit(request)
    if v is None:
        return web.to_login()
    form = await web.checked_form(request, v)
    if isinstance(form, Response):
        return form
    await web.sessions(v.gw).drop(v.session_id)
    response = web.to_login()
    response.delete_cookie(COOKIE, path="/console")
    return response


def _redirect_uri(gw: Gateway) -> str:
    return gw.edge.public_url + "/console/oauth/callback"


def _challenge(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")


async def oauth_start(request: Request) -> Response:
    gw = gateway(request)
    client = await gw.oauth.get_client(CLIENT_ID)
    # registered once per installation; again if the public URL (so the redirect URI) changed since
    if client is None or _redirect_uri(gw) not in [str(uri) for uri in client.redirect_uris or []]:
        client = OAuthClientInformationFull(
            client_id=CLIENT_ID,
            client_name="Memento console",
            redirect_uris=[_redirect_uri(gw)],
            token_endpoint_auth_method="none",
            grant_types=["authorization_code"],
            response_types=["code"],
            scope=SCOPES,
            client_id_issued_at=int(time.time()),
        )
        await gw.oauth.register_client(client)
    state, verifier = secrets.token_urlsafe(24), secrets.token_urlsafe(48)
    await web.sessions(gw).put_flow(state, verifier)
    query = {
        "response_type": "code",
        "client_id": CLIENT_ID,
        "redirect_uri": _redirect_uri(gw),
        "code_challenge": _challenge(verifier),
        "code_challenge_method": "S256",
        "state": state,
        "scope": SCOPES,
        "resource": gw.edge.resource_url,
    }
    response = web.to(f"/authorize?{urlencode(query)}")
    set_cookie(response, gw.edge, FLOW_COOKIE, state, FLOW_TTL_S)  # binds the flow to this browser
    return response


async def oauth_callback(request: Request) -> Response:
    """The code from /authorize, exchanged with the provider after the checks the token endpoint makes (client,
    redirect URI, expiry, PKCE verifier) and the state bound to this browser."""
    gw = gateway(request)
    state = request.query_params.get("state", "")
    bound = request.cookies.get(FLOW_COOKIE, "")
    verifier = await web.sessions(gw).take_flow(state) if state and hmac.compare_digest(state, bound) else None
    if verifier is None:
        return web.error(None, 400, "This sign-in expired or did not start here; sign in again.")
    if request.query_params.get("error"):
        return web.page("login.html", None, 403, error="The sign-in was refused.")
    client = await gw.oauth.get_client(CLIENT_ID)
    code = await gw.oauth.load_authorization_code(client, request.query_params.get("code", "")) if client else None
    if (
        code is None
        or code.client_id != CLIENT_ID
        or code.expires_at < time.time()
        or str(code.redirect_uri) != _redirect_uri(gw)
        or not hmac.compare_digest(code.code_challenge, _challenge(verifier))
    ):
        return web.error(None, 400, "The sign-in could not be completed; sign in again.")
    token = await gw.oauth.exchange_authorization_code(client, code)
    caller = await gw.oauth.verify(token.access_token)
    return await _signed_in(gw, caller.principal, "oauth")

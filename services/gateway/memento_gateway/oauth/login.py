"""The page `/authorize` sends people to: it names the client asking for access and asks for an access key (the
operator's MEMENTO_ACCESS_KEY or a per-tenant API key). The grant is then bound to that key's principal.

Hardened as a login form should be: no caching, no framing, a few tries per sign-in, per-address limits.
"""

from __future__ import annotations

import html
from typing import Any
from urllib.parse import urlsplit

from mcp.server.auth.provider import AuthorizationParams, construct_redirect_uri
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from memento_gateway.auth.authenticator import AuthError, Caller
from memento_gateway.gateway import Gateway, gateway
from memento_gateway.upstream import UpstreamUnavailable

MAX_TRIES = 5
HEADERS = {
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
    "Referrer-Policy": "no-referrer",
}
PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Memento: sign in</title>
<style>body{{font:16px system-ui,sans-serif;max-width:28rem;margin:4rem auto;padding:0 1rem;color:#222}}
input{{width:100%;padding:.5rem;margin:.5rem 0 1rem;box-sizing:border-box}}
button{{padding:.5rem 1rem;margin-right:.5rem}}
.error,.warn{{color:#a00}}</style></head>
<body><h1>Memento</h1>
<p><strong>{client}</strong> {vouched} asks to use this memory server with the scopes <strong>{scopes}</strong>.</p>
<p>When you answer, your browser goes back to <strong>{redirect_host}</strong>.</p>
{warning}<p>Enter an access key: the operator key, or an API key from <code>memento-admin keys create</code>.</p>
{error}<form method="post" action="/oauth/login">
<input type="hidden" name="request" value="{request}">
<label for="access_key">Access key</label>
<input id="access_key" name="access_key" type="password" autocomplete="off" autofocus>
<button type="submit" name="decision" value="allow">Allow</button>
<button type="submit" name="decision" value="deny">Deny</button>
</form></body></html>"""


LOOPBACK_WARNING = (
    '<p class="warn">It goes back to this computer: allow only if you started this client yourself just now '
    "(any program here could claim that name).</p>"
)


def _vouched(pending: dict[str, Any]) -> str:
    """Who stands behind the client's name: the host serving its metadata document, or nobody (it registered
    itself, and any client can register under any name)."""
    host = pending.get("client_host")
    if host:
        return f"(from <strong>{html.escape(host)}</strong>, which publishes its metadata)"
    return "(a client that registered itself: its name is not verified)"


def _page(pending: dict[str, Any], request_id: str, error: str = "", status: int = 200) -> HTMLResponse:
    scopes = " ".join(pending["params"].get("scopes") or ["(those of the key)"])
    redirect_host = pending.get("redirect_host") or urlsplit(pending["params"]["redirect_uri"] or "").hostname or "?"
    body = PAGE.format(
        client=html.escape(pending["client_name"]),
        vouched=_vouched(pending),
        redirect_host=html.escape(redirect_host),
        warning=LOOPBACK_WARNING if pending.get("loopback_redirect") else "",
        scopes=html.escape(scopes),
        request=html.escape(request_id),
        error=f'<p class="error">{html.escape(error)}</p>' if error else "",
    )
    return HTMLResponse(body, status_code=status, headers=HEADERS)


def _gone() -> HTMLResponse:
    text = "<!doctype html><title>Memento</title><p>This sign-in expired or was used. Start again from your client."
    return HTMLResponse(text, status_code=400, headers=HEADERS)


async def login_page(request: Request) -> Response:
    gw = gateway(request)
    request_id = request.query_params.get("request", "")
    pending = await gw.oauth.store.get_pending(request_id)
    return _page(pending, request_id) if pending else _gone()


async def login_submit(request: Request) -> Response:
    gw = gateway(request)
    form = await request.form()
    request_id = str(form.get("request", ""))
    pending = await gw.oauth.store.get_pending(request_id)
    if pending is None:
        return _gone()
    if form.get("decision") != "allow":
        await gw.oauth.store.drop_pending(request_id)
        return _back(pending, gw, error="access_denied")
    caller = await _caller_for(request, gw, str(form.get("access_key", "")).strip())
    if isinstance(caller, str):
        if await gw.oauth.store.count_failure(request_id) >= MAX_TRIES:
            await gw.oauth.store.drop_pending(request_id)
            return _back(pending, gw, error="access_denied")
        return _page(pending, request_id, caller, status=401)
    target = await gw.oauth.grant(pending, caller)
    await gw.oauth.store.drop_pending(request_id)
    if target is None:
        return _back(pending, gw, error="invalid_scope")
    return RedirectResponse(target, status_code=302, headers={"Cache-Control": "no-store"})


async def _caller_for(request: Request, gw: Gateway, key: str) -> Caller | str:
    """The caller behind the key, or why it is refused. OAuth tokens are not access keys here: a token must
    not mint itself successors."""
    client = request.client.host if request.client else "unknown"
    if await gw.rate.retry_after(f"ip:{client}", per_minute=30, cost=0):
        return "Too many attempts from this address; wait a minute."
    try:
        caller = await gw.auth.authenticate(key or None)
    except AuthError:
        await gw.rate.retry_after(f"ip:{client}", per_minute=30)
        return "That access key is not valid."
    except UpstreamUnavailable:
        return "The server cannot check keys right now; try again shortly."
    if caller.credential == "oauth":
        return "That access key is not valid."
    return caller


def _back(pending: dict[str, Any], gw: Gateway, *, error: str) -> RedirectResponse:
    params = AuthorizationParams.model_validate(pending["params"])
    target = construct_redirect_uri(str(params.redirect_uri), error=error, state=params.state, iss=gw.edge.public_url)
    return RedirectResponse(target, status_code=302, headers={"Cache-Control": "no-store"})

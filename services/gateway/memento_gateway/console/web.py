"""What every console page shares: the template environment (autoescaped), the signed-in session, and the answers
(a page, an error page, a redirect) with the session's CSRF token in every form."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from memento_gateway.console import backend
from memento_gateway.console.security import COOKIE, csrf_ok, same_origin
from memento_gateway.console.sessions import ConsoleSessions, principal_of
from memento_gateway.gateway import Gateway, gateway
from memento_shared.principal import Principal

TEMPLATES = Environment(
    loader=FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)


@dataclass
class Visit:
    """A signed-in request: who, in which workspace, with which CSRF token."""

    gw: Gateway
    session_id: str
    record: dict[str, Any]
    principal: Principal

    @property
    def workspace(self) -> str:
        return self.record["workspace"]

    @property
    def csrf(self) -> str:
        return self.record["csrf"]

    def can(self, scope: str) -> bool:
        return self.principal.has_scope(scope)

    async def view(self, name: str, **params: Any) -> backend.Reply:
        return await backend.view(self.gw.upstream, self.principal, self.workspace, name, **params)

    async def act(self, name: str, form: dict[str, Any]) -> backend.Reply:
        return await backend.act(self.gw.upstream, self.principal, self.workspace, name, form)


def sessions(gw: Gateway) -> ConsoleSessions:
    return ConsoleSessions(gw.redis, gw.settings.session_ttl_minutes * 60)


async def visit(request: Request) -> Visit | None:
    """The session behind the cookie, if it still stands: a revoked key ends its console sessions too."""
    gw = gateway(request)
    session_id = request.cookies.get(COOKIE)
    record = await sessions(gw).get(session_id)
    if record is None or session_id is None:
        return None
    principal = principal_of(record)
    if record["credential"] != "open" and await gw.auth.credential_principal(principal) is None:
        await sessions(gw).drop(session_id)
        return None
    return Visit(gw, session_id, record, principal)


def page(name: str, v: Visit | None, code: int = 200, **context: Any) -> HTMLResponse:
    body = TEMPLATES.get_template(name).render(
        me=v.principal if v else None,
        workspace=v.workspace if v else None,
        csrf=v.csrf if v else "",
        can_write=bool(v and v.can("write")),
        is_admin=bool(v and v.can("admin")),
        **context,
    )
    return HTMLResponse(body, status_code=code)


def error(v: Visit | None, status: int, message: str) -> HTMLResponse:
    titles = {400: "Bad request", 403: "Forbidden", 404: "Not found", 409: "Conflict"}
    return page("error.html", v, status, title=titles.get(status, "Unavailable"), message=message, status=status)


def failed(v: Visit, reply: backend.Reply) -> HTMLResponse:
    status = reply.status if reply.status in (400, 403, 404, 409, 413, 503) else 502
    return error(v, status, reply.message or "memory-api refused the request")


def to(path: str) -> RedirectResponse:
    return RedirectResponse(path, status_code=303)


def to_login() -> RedirectResponse:
    return to("/console/login")


async def checked_form(request: Request, v: Visit) -> dict[str, Any] | Response:
    """The POSTed form once Origin and the CSRF token passed; otherwise the 403 page."""
    if not same_origin(v.gw.edge, request.headers.get("host"), request.headers.get("origin")):
        return error(v, 403, "This request came from another site.")
    form = await request.form()
    if not csrf_ok(v.csrf, form.get("csrf")):
        return error(v, 403, "The form's security token is missing or stale; reload the page and try again.")
    return {k: str(val) for k, val in form.items() if k != "csrf" and isinstance(val, str)}

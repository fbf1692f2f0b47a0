"""The console's pages: memories (filters, search), one memory (versions, links, actions), its graph, documents,
working memory, statistics, and for admins dead letters, API keys and the audit trail. Every read and change is a
memory-api console call under the session's principal; memory-api decides scope and existence."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from memento_gateway.console import web
from memento_gateway.console.graph_layout import layout

FILTERS = ("q", "agent", "type", "topic", "tags", "tier", "superseded", "expired")
TYPES = ("fact", "decision", "error", "preference", "procedure", "relation")
TIERS = ("hot", "warm", "cold", "permanent")
RELATIONS = ("related", "caused_by", "resolved_by", "part_of", "contradicts")
MEMORY_ACTIONS = ("amend", "supersede", "link", "anchor", "forget")
DONE = {
    "amend": "Amended.",
    "supersede": "Superseded: this is the new memory.",
    "link": "Linked.",
    "anchor": "Anchor updated.",
    "forget": "Forgotten.",
    "replay": "Replayed.",
    "workspace": "Workspace changed.",
}


async def home(request: Request) -> Response:
    return web.to("/console/memories" if await web.visit(request) else "/console/login")


async def memories(request: Request) -> Response:
    v = await web.visit(request)
    if v is None:
        return web.to_login()
    filters = {k: request.query_params.get(k, "") for k in FILTERS}
    page = request.query_params.get("page", "1")
    params: dict[str, Any] = {k: val for k, val in filters.items() if val}
    params["page"] = int(page) if page.isdigit() and 0 < int(page) < 10_000 else 1
    reply = await v.view("memories", **params)
    if not reply.ok:
        return web.failed(v, reply)
    return web.page(
        "memories.html", v, memories=reply.body["memories"], filters=filters, page=reply.body["page"],
        more=reply.body["more"], types=TYPES, tiers=TIERS, done=DONE.get(request.query_params.get("done", "")),
    )  # fmt: skip


async def memory(request: Request) -> Response:
    v = await web.visit(request)
    if v is None:
        return web.to_login()
    reply = await v.view("memory", id=request.path_params["id"])
    if not reply.ok:
        return web.failed(v, reply)
    return web.page(
        "memory.html", v, **reply.body, types=TYPES, relations=RELATIONS,
        done=DONE.get(request.query_params.get("done", "")),
    )  # fmt: skip


async def graph(request: Request) -> Response:
    v = await web.visit(request)
    if v is None:
        return web.to_login()
    reply = await v.view("graph", id=request.path_params["id"])
    if not reply.ok:
        return web.failed(v, reply)
    drawing = layout(reply.body["center"], reply.body["nodes"], reply.body["edges"])
    return web.page("graph.html", v, center=reply.body["center"], drawing=drawing)


async def confirm_forget(request: Request) -> Response:
    v = await web.visit(request)
    if v is None:
        return web.to_login()
    reply = await v.view("memory", id=request.path_params["id"])
    if not reply.ok:
        return web.failed(v, reply)
    return web.page("confirm_forget.html", v, memory=reply.body["memory"])


async def memory_action(request: Request) -> Response:
    v = await web.visit(request)
    if v is None:
        return web.to_login()
    action = request.path_params["action"]
    if action not in MEMORY_ACTIONS:
        return web.error(v, 404, "No such action.")
    form = await web.checked_form(request, v)
    if isinstance(form, Response):
        return form
    memory_id = request.path_params["id"]
    reply = await v.act(action, {**unchanged_dropped(form), "id": memory_id})
    if not reply.ok:
        return web.failed(v, reply)
    if action == "forget":
        return web.to("/console/memories?done=forget")
    target = (reply.body["result"].get("id") or memory_id) if action == "supersede" else memory_id
    return web.to(f"/console/memories/{target}?done={action}")


def unchanged_dropped(form: dict[str, str]) -> dict[str, str]:
    """The amend form shows every field; only those edited go to the tool (`orig_<field>` holds what was shown), so
    an importance shown rounded is not written back rounded."""
    # a browser sends a textarea's line breaks as CRLF whatever the page held
    edited = {k: val.replace("\r\n", "\n") for k, val in form.items() if not k.startswith("orig_")}
    return {k: val for k, val in edited.items() if f"orig_{k}" not in form or form[f"orig_{k}"] != val}


async def shown(request: Request, name: str, template: str, **params: Any) -> Response:
    """A read-only page: memory-api's view `name` (with `params`) rendered in `template`."""
    v = await web.visit(request)
    if v is None:
        return web.to_login()
    reply = await v.view(name, **params)
    if not reply.ok:
        return web.failed(v, reply)
    return web.page(template, v, **reply.body, done=DONE.get(request.query_params.get("done", "")))


async def documents(request: Request) -> Response:
    return await shown(request, "documents", "documents.html")


async def document(request: Request) -> Response:
    return await shown(request, "document", "document.html", id=request.path_params["id"])


async def working(request: Request) -> Response:
    return await shown(request, "working", "working.html")


async def stats(request: Request) -> Response:
    v = await web.visit(request)
    if v is None:
        return web.to_login()
    reply = await v.view("stats")
    if not reply.ok:
        return web.failed(v, reply)
    peak = max([d["total"] for d in reply.body["over_time"]] or [1])
    return web.page("stats.html", v, **reply.body, peak=peak, types=TYPES, tiers=TIERS)


async def dead_letters(request: Request) -> Response:
    return await shown(request, "dead_letters", "dead_letters.html")


async def keys(request: Request) -> Response:
    return await shown(request, "keys", "keys.html")


async def audit(request: Request) -> Response:
    return await shown(request, "audit", "audit.html")


async def replay(request: Request) -> Response:
    v = await web.visit(request)
    if v is None:
        return web.to_login()
    form = await web.checked_form(request, v)
    if isinstance(form, Response):
        return form
    reply = await v.act("replay", {"id": request.path_params["id"]})
    return web.to("/console/dead-letters?done=replay") if reply.ok else web.failed(v, reply)


async def workspace(request: Request) -> Response:
    v = await web.visit(request)
    if v is None:
        return web.to_login()
    form = await web.checked_form(request, v)
    if isinstance(form, Response):
        return form
    chosen = form.get("workspace", "").strip()
    if not chosen or len(chosen) > 64 or not v.principal.allows_workspace(chosen):
        return web.error(v, 403, "That workspace is not allowed for this credential.")
    await web.sessions(v.gw).update(v.session_id, {**v.record, "workspace": chosen})
    return web.to("/console/memories?done=workspace")

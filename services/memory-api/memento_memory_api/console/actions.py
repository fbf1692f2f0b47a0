"""The console's state changes. Each is one of the tools' own operations (amend, supersede = amend with supersedes,
link, anchor = amend isAnchor, forget), parsed by the tool's schema, scope-checked as the tool route does and run by
its handler in the ToolContext that route builds; a dead letter's replay is the admin command's claim-and-enqueue.
Whatever the outcome, an audit row records who did what to which id (never content)."""

from __future__ import annotations

from typing import Any

from memento_memory_api.console import audit
from memento_memory_api.routes.tools import resolve_scope, tool_context
from memento_memory_api.tools.registry import HANDLERS, Answer
from memento_memory_api.uow import Scope
from memento_shared.db import dead_letters
from memento_shared.enqueue import wake
from memento_shared.errors import ErrorCode, MementoError, invalid, not_found
from memento_shared.events import queue_key
from memento_shared.principal import Principal
from memento_shared.tools.registry import TOOLS


def _fields(form: dict[str, Any], *names: str) -> dict[str, Any]:
    return {n: form[n] for n in names if form.get(n) not in (None, "")}


def _importance(form: dict[str, Any]) -> dict[str, Any]:
    given = form.get("importance")
    if given in (None, ""):
        return {}
    try:
        return {"importance": float(given)}
    except (TypeError, ValueError):
        raise invalid("importance", "a number from 0 to 1") from None


# console action -> (tool, its arguments from the console's form)
TOOL_ACTIONS = {
    "amend": ("amend", lambda f: _fields(f, "id", "content", "topic", "type") | _importance(f)),
    "supersede": ("amend", lambda f: _fields(f, "id", "content") | {"supersedes": True}),
    "link": ("link", lambda f: {"fromId": f.get("id"), **_fields(f, "toId", "relationType")}),
    "anchor": ("amend", lambda f: {"id": f.get("id"), "isAnchor": f.get("anchor") in (True, "true", "on", "1")}),
    "forget": ("forget", lambda f: {"id": f.get("id"), "force": f.get("force") in (True, "true", "on", "1")}),
}
ACTIONS = (*TOOL_ACTIONS, "replay")


async def run(state: Any, principal: Principal, action: str, form: dict[str, Any]) -> dict[str, Any]:
    """The action's tool result; MementoError when refused (audited too, as 'refused')."""
    target = str(form.get("id") or "")[:64]
    try:
        if action == "replay":
            result = await _replay(state, principal, form)
        else:
            result = await _tool(state, principal, action, form)
    except MementoError as exc:
        if exc.code in (ErrorCode.FORBIDDEN, ErrorCode.MEMORY_NOT_FOUND, ErrorCode.CONFLICT):
            await audit.record(state.uow, principal, action, target, "refused")
        raise
    await audit.record(state.uow, principal, action, target, "ok")
    return result


async def _tool(state: Any, principal: Principal, action: str, form: dict[str, Any]) -> dict[str, Any]:
    tool, arguments_of = TOOL_ACTIONS[action]
    spec = TOOLS[tool]
    if not principal.has_scope(spec.scope):
        raise MementoError(ErrorCode.FORBIDDEN, f"this credential lacks the {spec.scope!r} scope")
    agent = form.get("agent") or None  # the memory's own namespace, which the credential must allow
    args = spec.parse({**arguments_of(form), **({"agentId": agent} if agent else {})})
    ctx = tool_context(state, principal, resolve_scope(principal, getattr(args, "agentId", None), None))
    result = await HANDLERS[tool](ctx, args)
    return result.result if isinstance(result, Answer) else result


async def _replay(state: Any, principal: Principal, form: dict[str, Any]) -> dict[str, Any]:
    if not principal.has_scope("admin"):
        raise MementoError(ErrorCode.FORBIDDEN, "replaying dead letters needs an admin credential")
    given = str(form.get("id") or "")
    if not given.isdigit() or len(given) > 18:
        raise invalid("id", "a dead letter id")
    scope = Scope(principal.tenant_id, principal.workspace, "admin", "admin")
    # claimed and enqueued in one transaction: a failed enqueue leaves the dead letter open (cli/dead_letters.py)
    async with state.uow(scope) as uow:
        row = await dead_letters.claim_replay(uow.conn, int(given))
        if row is None:
            raise not_found(f"open dead letter {given}")
        await state.queue.enqueue_job(
            "handle_event",
            dead_letters.envelope_of(row),
            _job_id=dead_letters.replay_job_id(row),
            _queue_name=queue_key(row["queue"]),
        )
        await wake(state.queue, queue_key(row["queue"]))
    return {"success": True, "replayed": int(given)}

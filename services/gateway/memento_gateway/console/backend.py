"""The console's calls to memory-api (`/v1/console/view/*`, `/v1/console/action/*`) through the gateway's one
upstream client: the principal signed at the moment of the call, acting in the session's workspace."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from memento_gateway.upstream import Upstream, UpstreamUnavailable
from memento_shared import jsonio
from memento_shared.principal import Principal


@dataclass(frozen=True)
class Reply:
    status: int
    body: dict[str, Any]

    @property
    def ok(self) -> bool:
        return self.status == 200 and "error" not in self.body

    @property
    def message(self) -> str:
        error = self.body.get("error") if isinstance(self.body, dict) else None
        return str(error.get("message", "")) if isinstance(error, dict) else ""


async def call(upstream: Upstream, principal: Principal, workspace: str, path: str, params: dict[str, Any]) -> Reply:
    acting = replace(principal, workspace=workspace)
    try:
        # Upstream._post: the signing, trace context and error mapping every memory-api call shares
        answer = await upstream._post(f"/v1/console/{path}", {"params": params}, acting)
    except UpstreamUnavailable:
        return Reply(503, {"error": {"code": "STORAGE_ERROR", "message": "memory-api is unavailable; retry"}})
    try:
        body = jsonio.loads(answer.content)
    except ValueError:
        body = None
    if not isinstance(body, dict):
        return Reply(502, {"error": {"code": "STORAGE_ERROR", "message": "memory-api gave no usable answer"}})
    return Reply(answer.status, body)


async def view(upstream: Upstream, principal: Principal, workspace: str, name: str, **params: Any) -> Reply:
    return await call(upstream, principal, workspace, f"view/{name}", params)


async def act(upstream: Upstream, principal: Principal, workspace: str, name: str, form: dict[str, Any]) -> Reply:
    return await call(upstream, principal, workspace, f"action/{name}", form)

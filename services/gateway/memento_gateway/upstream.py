"""The one client to memory-api: signed principal, session id and traceparent on every call; failures become
clean tool errors (never a stack trace to the MCP client)."""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any

from memento_gateway.http import timing
from memento_shared import jsonio, progress
from memento_shared.internal_http import Answer, InternalClient, InternalTimeout, InternalUnreachable
from memento_shared.principal import HEADER, Principal, encode_principal
from memento_shared.telemetry.tracing import inject_headers

log = logging.getLogger(__name__)
GATEWAY = Principal(tenant_id="", workspaces=(), agents=(), scopes=(), subject="gateway")  # for /internal routes


# aiohttp's failures to connect: the request was never sent
_NOT_SENT = frozenset(
    {"ClientConnectorError", "ClientConnectorDNSError", "ClientConnectorCertificateError", "ClientConnectorSSLError"}
)
_UNCERTAIN = "STORAGE_UNCERTAIN"


class UpstreamUnavailable(Exception):
    """memory-api did not answer usefully; the message is safe to show a client."""


class Upstream:
    def __init__(self, base_url: str, secret: str, timeout_s: float, client: InternalClient | None = None) -> None:
        """client: memory-api served some other way than at base_url (co-hosted in this process)."""
        self.secret = secret
        self.client = client or InternalClient(base_url, timeout_s=timeout_s, max_connections=200)

    def _headers(self, principal: Principal, session_id: str | None, progress_id: str | None) -> dict[str, str]:
        # Signed at the moment of the call: memory-api refuses principals older than a few minutes.
        signed = encode_principal(replace(principal, issued_at=time.time()), self.secret)
        headers = inject_headers({HEADER: signed})
        if session_id:
            headers["X-Memento-Session-Id"] = session_id
        if progress_id:
            headers[progress.HEADER] = progress_id
        return headers

    async def _post(
        self,
        path: str,
        body: dict[str, Any],
        principal: Principal,
        session_id: str | None = None,
        progress_id: str | None = None,
    ) -> Answer:
        try:
            return await self.client.post_json(path, body, self._headers(principal, session_id, progress_id))
        except InternalTimeout:
            log.warning("upstream.timeout", extra={"path": path})
            raise UpstreamUnavailable("RESOURCE_BUSY") from None
        except InternalUnreachable as exc:
            log.warning("upstream.unreachable", extra={"path": path, "error_type": str(exc)})
            # only a failed connect proves the request never arrived; a connection lost after it was sent (memory-api
            # killed mid-call) may follow a commit
            raise UpstreamUnavailable("STORAGE_ERROR" if str(exc) in _NOT_SENT else _UNCERTAIN) from None

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None,
        principal: Principal,
        session_id: str | None,
        progress_id: str | None = None,
    ) -> dict[str, Any]:
        """progress_id: the memento_shared.progress channel where the work may report its steps."""
        try:
            path = f"/v1/tools/{name}"
            response = await self._post(path, {"arguments": arguments}, principal, session_id, progress_id)
        except UpstreamUnavailable as exc:
            if str(exc) == "RESOURCE_BUSY":
                return _error("RESOURCE_BUSY", "memory-api did not answer in time; retry", retryable=True)
            if str(exc) == _UNCERTAIN:
                message = "memory-api went away during the call; it may have been applied: check before repeating it"
                return _error("STORAGE_ERROR", message, retryable=True)
            return _error("STORAGE_ERROR", "memory-api is unreachable; nothing was changed", retryable=True)
        timing.relay(response.headers.get(timing.HEADER))
        body = _json(response)
        if not isinstance(body, dict) or ("result" not in body and "error" not in body):
            log.warning("upstream.bad_response", extra={"tool": name, "status": response.status})
            return _error("STORAGE_ERROR", "memory-api gave no usable answer", retryable=False)
        return body

    async def start_task(
        self, name: str, arguments: dict[str, Any] | None, principal: Principal, session_id: str | None
    ) -> dict[str, Any]:
        """`{"task": record}` for a tool call memory-api now runs as a task, or a tool error body."""
        try:
            response = await self._post(f"/v1/tasks/{name}", {"arguments": arguments}, principal, session_id)
        except UpstreamUnavailable as exc:
            if str(exc) == _UNCERTAIN:  # the answer was lost: a task may have started, with an id nobody has
                message = "memory-api went away as the task started; check before repeating"
                return _error("STORAGE_ERROR", message, retryable=True)
            return _error("RESOURCE_BUSY", "memory-api is unavailable; nothing was started", retryable=True)
        body = _json(response)
        if not isinstance(body, dict) or ("task" not in body and "error" not in body):
            log.warning("upstream.bad_response", extra={"tool": name, "status": response.status})
            return _error("STORAGE_ERROR", "memory-api gave no usable answer", retryable=False)
        return body

    async def forward(
        self, method: str, params: dict[str, Any], principal: Principal, session_id: str | None
    ) -> dict[str, Any] | None:
        """resources/* and prompts/* at `POST /v1/<method>`; None when memory-api serves no such route yet."""
        response = await self._post(f"/v1/{method}", {"params": params}, principal, session_id)
        body = _json(response)
        answered = isinstance(body, dict) and ("result" in body or "error" in body)
        if response.status == 404 and not answered:
            return None
        if not answered:
            log.warning("upstream.bad_response", extra={"method": method, "status": response.status})
            raise UpstreamUnavailable("STORAGE_ERROR")
        return body

    async def key(self, path: str, body: dict[str, str]) -> dict[str, Any] | None:
        """An API key's binding from memory-api's internal routes; None when unknown, revoked or expired."""
        response = await self._post(f"/internal/keys/{path}", body, GATEWAY)
        if response.status != 200:
            log.warning("upstream.key_check_failed", extra={"status": response.status})
            raise UpstreamUnavailable("STORAGE_ERROR")
        answer = _json(response)
        return answer.get("key") if isinstance(answer, dict) and answer.get("valid") else None

    async def aclose(self) -> None:
        await self.client.aclose()


def _json(response: Answer) -> Any:
    try:
        return jsonio.loads(response.content)
    except ValueError:  # orjson.JSONDecodeError is one
        return None


def _error(code: str, message: str, *, retryable: bool) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "retryable": retryable}}

"""The one client to memory-api: signed principal, session id and traceparent on every call; failures become
clean tool errors (never a stack trace to the MCP client)."""

from __future__ import annotations

import logging
from typing import Any

import httpx

from memento_shared.principal import HEADER, Principal, encode_principal
from memento_shared.telemetry.tracing import inject_headers

log = logging.getLogger(__name__)


class Upstream:
    def __init__(self, base_url: str, secret: str, timeout_s: float) -> None:
        self.secret = secret
        self.client = httpx.AsyncClient(
            base_url=base_url.rstrip("/"),
            timeout=timeout_s,
            limits=httpx.Limits(max_connections=200, max_keepalive_connections=50),
        )

    async def call_tool(
        self, name: str, arguments: dict[str, Any] | None, principal: Principal, session_id: str | None
    ) -> dict[str, Any]:
        headers = inject_headers({HEADER: encode_principal(principal, self.secret)})
        if session_id:
            headers["X-Memento-Session-Id"] = session_id
        try:
            response = await self.client.post(f"/v1/tools/{name}", json={"arguments": arguments}, headers=headers)
        except httpx.TimeoutException:
            log.warning("upstream.timeout", extra={"tool": name})
            return _error("RESOURCE_BUSY", "memory-api did not answer in time; retry")
        except httpx.HTTPError as exc:
            log.warning("upstream.unreachable", extra={"tool": name, "error_type": type(exc).__name__})
            return _error("STORAGE_ERROR", "memory-api is unreachable; nothing was changed")
        try:
            body = response.json()
        except ValueError:
            body = None
        if not isinstance(body, dict) or ("result" not in body and "error" not in body):
            log.warning("upstream.bad_response", extra={"tool": name, "status": response.status_code})
            return _error("STORAGE_ERROR", "memory-api gave no usable answer")
        return body

    async def aclose(self) -> None:
        await self.client.aclose()


def _error(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "retryable": code in ("RESOURCE_BUSY", "STORAGE_ERROR")}}

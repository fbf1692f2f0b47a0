"""The client for calls between Memento's own services (gateway → memory-api, memory-api → embedder).

aiohttp rather than httpx on these hops: with a few dozen calls in flight, httpx's connection pool polls every
pooled socket on every request and spent ~2–3 ms of CPU per call on this 2-core machine against ~0.2 ms for
aiohttp (bench/README.md). The body is JSON both ways; the answer is the status and the raw bytes, decoded by the
caller. The trace context travels in the headers (inject_headers), and client spans come from aiohttp's
OpenTelemetry instrumentation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from memento_shared import jsonio

JSON = {"Content-Type": "application/json"}


class InternalTimeout(Exception):
    """The service did not answer within the timeout."""


class InternalUnreachable(Exception):
    """No answer at all: refused, reset, DNS; the message is the exception type only (safe to log)."""


@dataclass(frozen=True)
class Answer:
    status: int
    content: bytes
    headers: Mapping[str, str] = field(default_factory=dict)  # case-insensitive as received


class InternalClient:
    def __init__(self, base_url: str = "", *, timeout_s: float = 10.0, max_connections: int = 100) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = aiohttp.ClientTimeout(total=timeout_s)
        self.max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None

    def _open(self) -> aiohttp.ClientSession:
        # Created on first use, inside the running loop (aiohttp binds a session to the loop it was made in).
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self.max_connections, ttl_dns_cache=300),
                timeout=self.timeout,
                trust_env=False,  # internal hops: a proxy from the environment must not sit in between
                skip_auto_headers=("User-Agent",),
            )
        return self._session

    async def post_json(
        self, path: str, body: Any, headers: dict[str, str] | None = None, *, timeout_s: float | None = None
    ) -> Answer:
        """POST `body` as JSON to base_url + path."""
        return await self._send("POST", path, jsonio.dumps(body), {**JSON, **(headers or {})}, timeout_s)

    async def get(self, path: str, *, timeout_s: float | None = None) -> Answer:
        return await self._send("GET", path, None, {}, timeout_s)

    async def _send(
        self, method: str, path: str, data: bytes | None, headers: dict[str, str], timeout_s: float | None
    ) -> Answer:
        url = self.base_url + path
        # the session's timeout unless the call names its own (aiohttp reads timeout=None as "never")
        options = {"timeout": aiohttp.ClientTimeout(total=timeout_s)} if timeout_s is not None else {}
        try:
            async with self._open().request(method, url, data=data, headers=headers, **options) as response:
                return Answer(response.status, await response.read(), response.headers)
        except TimeoutError as exc:  # asyncio.TimeoutError and aiohttp's timeouts are TimeoutError
            raise InternalTimeout(url) from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise InternalUnreachable(type(exc).__name__) from exc

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
            await asyncio.sleep(0)  # let the connector close its transports before the loop goes

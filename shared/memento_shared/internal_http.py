"""The client for calls between Memento's own services (gateway → memory-api, memory-api → embedder).

aiohttp rather than httpx on these hops: with a few dozen calls in flight, httpx's connection pool polls every
pooled socket on every request and spent ~2–3 ms of CPU per call on this 2-core machine against ~0.2 ms for
aiohttp (bench/README.md). The body is JSON both ways; the answer is the status and the raw bytes, decoded by the
caller. The trace context travels in the headers (inject_headers), and client spans come from aiohttp's
OpenTelemetry instrumentation.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message

from memento_shared import jsonio

JSON = {"Content-Type": "application/json"}
CLOSE_WAIT_S = 5.0  # how long aclose waits for in-process calls still running (the launcher's stop budget is 10 s)
log = logging.getLogger(__name__)


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


class InProcessClient(InternalClient):
    """The same calls served by an ASGI app in this process, with no socket and no HTTP parsing: the gateway's
    hop to memory-api when both are co-hosted (memento_devtools.cohost, issue 50 item 2).

    The request runs as its own task, shielded from the caller: as over HTTP, a caller that gives up (a timeout,
    a cancelled tool call) leaves the service to finish what it started, and it is never cut mid-transaction.
    """

    def __init__(self, app: ASGIApp, *, timeout_s: float = 10.0) -> None:
        super().__init__("", timeout_s=timeout_s)
        self.app = app
        self._running: set[asyncio.Task[None]] = set()

    async def _send(
        self, method: str, path: str, data: bytes | None, headers: dict[str, str], timeout_s: float | None
    ) -> Answer:
        body = data or b""
        raw = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]
        raw.append((b"content-length", str(len(body)).encode()))
        path, _, query = path.partition("?")
        scope = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": query.encode(),
            "root_path": "",
            "headers": raw,
            "client": ("127.0.0.1", 0),
            "server": ("127.0.0.1", 0),
            "state": {},
        }
        answer: dict[str, Any] = {"chunks": [], "whole": False}
        answered = asyncio.get_running_loop().create_future()
        sent = False

        async def receive() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await asyncio.shield(answered)  # a streaming response listens for the client leaving: not before the end
            return {"type": "http.disconnect"}

        async def send(message: Message) -> None:
            if message["type"] == "http.response.start":
                answer["status"], answer["headers"] = message["status"], message.get("headers", [])
            elif message["type"] == "http.response.body":
                answer["chunks"].append(message.get("body", b""))
                if not message.get("more_body", False) and not answered.done():
                    answer["whole"] = True
                    answered.set_result(None)

        async def run() -> None:
            try:
                await self.app(scope, receive, send)
            finally:
                if not answered.done():  # the app ended (or raised) without a whole answer
                    answered.set_result(None)

        task = asyncio.create_task(run())
        self._running.add(task)
        task.add_done_callback(lambda ended: self._ended(ended, path))
        try:
            async with asyncio.timeout(timeout_s if timeout_s is not None else self.timeout.total):
                await asyncio.shield(answered)
        except TimeoutError as exc:
            raise InternalTimeout(path) from exc
        if "status" not in answer:
            raise InternalUnreachable("ServerDisconnectedError")  # as aiohttp says of a server that died mid-call
        if not answer["whole"]:  # an answer cut short: it may follow a commit, as a connection lost mid-body does
            raise InternalUnreachable("ClientPayloadError")
        return Answer(answer["status"], b"".join(answer["chunks"]), Headers(raw=answer["headers"]))

    def _ended(self, task: asyncio.Task[None], path: str) -> None:
        self._running.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            # what uvicorn logs of an exception that escapes an app over HTTP; the type only, never the request
            log.error("internal.unhandled_error", extra={"path": path, "error_type": type(exc).__name__})

    async def aclose(self) -> None:
        """Waits a little for the calls still running: the app they run in is about to shut down."""
        if self._running:
            await asyncio.wait(set(self._running), timeout=min(self.timeout.total or CLOSE_WAIT_S, CLOSE_WAIT_S))

"""Small HTTP pieces every service shares: a uvicorn server that leaves signals to us and sleeps while idle, request
metrics."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import socket
import time
from collections.abc import Callable, Iterator
from email.utils import formatdate
from typing import Any

import uvicorn
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.server import ServerState

from memento_shared.telemetry.metrics import HTTP_LATENCY, HTTP_REQUESTS
from memento_shared.telemetry.tracing import traced_asgi


class DatedState(ServerState):
    """uvicorn's shared server state with the default headers made when a response asks for them: the Date of the
    current second, where uvicorn refreshes it from a timer ten times a second (idle wake-ups, issue 50)."""

    def __init__(self, config: uvicorn.Config) -> None:
        self.config = config
        self._second = -1
        self._headers: list[tuple[bytes, bytes]] = []
        super().__init__()

    @property
    def default_headers(self) -> list[tuple[bytes, bytes]]:
        now = int(time.time())
        if now != self._second:
            date = [(b"date", formatdate(now, usegmt=True).encode())] if self.config.date_header else []
            self._headers, self._second = date + self.config.encoded_headers, now
        return self._headers

    @default_headers.setter
    def default_headers(self, value: list[tuple[bytes, bytes]]) -> None:
        """ServerState's own start (an empty list); the headers are made on reading."""


class QuietServer(uvicorn.Server):
    """uvicorn without its own signal capture: the service's shutdown sequence owns SIGTERM/SIGINT. `on_started`
    runs once the app's startup is over and the socket listens (a service's entry point settles its heap there).

    Idle, it sleeps: the main loop waits for `should_exit` (set from a signal handler, another task or another
    thread) instead of uvicorn's tick every 0.1 s, which woke each service ten times a second to refresh the Date
    header (made per response by DatedState instead) and check limits we do not set (refused here)."""

    def __init__(self, config: uvicorn.Config, on_started: Callable[[], None] | None = None) -> None:
        if config.limit_max_requests is not None or config.callback_notify is not None:
            raise ValueError("QuietServer has no tick: limit_max_requests and callback_notify are not supported")
        self._should_exit = False
        self._wake: Callable[[], object] | None = None
        super().__init__(config)
        self.server_state = DatedState(config)
        self.on_started = on_started

    @property
    def should_exit(self) -> bool:
        return self._should_exit

    @should_exit.setter
    def should_exit(self, value: bool) -> None:
        self._should_exit = value
        if value and self._wake is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: the server has stopped already
                self._wake()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started and self.on_started is not None:
            self.on_started()

    async def main_loop(self) -> None:
        exit_set = asyncio.Event()
        self._wake = functools.partial(asyncio.get_running_loop().call_soon_threadsafe, exit_set.set)
        try:
            if not self.should_exit:  # set before the wake existed
                await exit_set.wait()
        finally:
            self._wake = None


def make_server(app: ASGIApp, host: str, port: int, on_started: Callable[[], None] | None = None) -> QuietServer:
    """Every service's HTTP server: server spans that continue the caller's trace, signals left to the service."""
    app = traced_asgi(app)
    config = uvicorn.Config(
        app, host=host, port=port, log_config=None, access_log=False, lifespan="on", timeout_graceful_shutdown=10
    )
    return QuietServer(config, on_started)


class RequestMetrics:
    """Pure ASGI middleware: request count and latency by route template, never by raw path."""

    def __init__(self, app: ASGIApp, service: str) -> None:
        self.app = app
        self.service = service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = {"code": 500}

        async def send_wrapper(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = scope.get("route")
            name = getattr(route, "path", None) or "unmatched"
            HTTP_REQUESTS.labels(self.service, name, str(status["code"])).inc()
            HTTP_LATENCY.labels(self.service, name).observe(time.perf_counter() - started)

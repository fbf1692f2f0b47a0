"""Small HTTP pieces every service shares: a uvicorn server that leaves signals to us, request metrics."""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import uvicorn
from starlette.types import ASGIApp, Receive, Scope, Send

from memento_shared.telemetry.metrics import HTTP_LATENCY, HTTP_REQUESTS
from memento_shared.telemetry.tracing import traced_asgi


class QuietServer(uvicorn.Server):
    """uvicorn without its own signal capture: the service's shutdown sequence owns SIGTERM/SIGINT. `on_started`
    runs once the app's startup is over and the socket listens (a service's entry point settles its heap there)."""

    def __init__(self, config: uvicorn.Config, on_started: Callable[[], None] | None = None) -> None:
        super().__init__(config)
        self.on_started = on_started

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started and self.on_started is not None:
            self.on_started()


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

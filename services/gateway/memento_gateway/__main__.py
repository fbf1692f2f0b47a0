"""`python -m memento_gateway`: the MCP front door."""

from __future__ import annotations

import asyncio
import logging
import signal

from memento_gateway.app import create_app
from memento_gateway.settings import GatewaySettings
from memento_shared import eventloop, heap
from memento_shared.http import make_server
from memento_shared.telemetry.logging import setup_logging
from memento_shared.telemetry.tracing import setup_tracing

log = logging.getLogger("memento_gateway")
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def bind_host(settings: GatewaySettings) -> str:
    """Where to listen. No key means anyone who can reach the port reads and writes memory: loopback only,
    unless MEMENTO_ALLOW_UNAUTHENTICATED_BIND says otherwise in so many words."""
    host = settings.bind_host
    if settings.memento_access_key:
        return host
    if host in LOOPBACK:
        log.warning("gateway.auth_disabled", extra={"host": host})
        return host
    if settings.allow_unauthenticated_bind:
        log.warning("gateway.auth_disabled_and_exposed", extra={"host": host})
        return host
    log.warning("gateway.auth_disabled_loopback_only", extra={"requested_host": host, "host": "127.0.0.1"})
    return "127.0.0.1"


async def serve(settings: GatewaySettings) -> None:
    host = bind_host(settings)
    settings = settings.model_copy(update={"bind_host": host})
    details = {"host": host, "port": settings.port, "requires_key": bool(settings.memento_access_key)}
    log.info("gateway.listening", extra={**details, "ttl_minutes": settings.session_ttl_minutes})
    server = make_server(create_app(settings), host, settings.port, on_started=heap.settle)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: setattr(server, "should_exit", True))
    await server.serve()


def main() -> None:
    settings = GatewaySettings()
    setup_logging("gateway", settings.log_level)
    heap.observe_pauses()
    setup_tracing("memento-gateway", settings.otel_exporter_otlp_endpoint)
    eventloop.run(serve(settings))


if __name__ == "__main__":
    main()

"""`python -m memento_gateway`: the MCP front door."""

from __future__ import annotations

import asyncio
import logging
import signal

from memento_gateway.app import create_app
from memento_shared.http import make_server
from memento_shared.settings import Settings
from memento_shared.telemetry.logging import setup_logging
from memento_shared.telemetry.tracing import setup_tracing

log = logging.getLogger("memento_gateway")


async def serve(settings: Settings) -> None:
    host = settings.bind_host
    if not settings.memento_access_key and host not in ("127.0.0.1", "localhost", "::1"):
        # No key means anyone who can reach the port can read and write memory: loopback only unless forced.
        log.warning("gateway.auth_disabled_loopback_only", extra={"requested_host": host})
        host = "127.0.0.1"
    elif not settings.memento_access_key:
        log.warning("gateway.auth_disabled", extra={"host": host})
    server = make_server(create_app(settings), host, settings.port)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: setattr(server, "should_exit", True))
    await server.serve()


def main() -> None:
    settings = Settings()
    setup_logging("gateway", settings.log_level)
    setup_tracing("memento-gateway", settings.otel_exporter_otlp_endpoint)
    asyncio.run(serve(settings))


if __name__ == "__main__":
    main()

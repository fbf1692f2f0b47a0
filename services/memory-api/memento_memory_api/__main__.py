"""`python -m memento_memory_api`: serve until SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import signal

from memento_memory_api.app import create_app
from memento_memory_api.settings import MemoryApiSettings
from memento_shared import eventloop, heap
from memento_shared.http import make_server
from memento_shared.telemetry.logging import setup_logging
from memento_shared.telemetry.tracing import setup_tracing


async def serve(settings: MemoryApiSettings) -> None:
    server = make_server(create_app(settings), settings.bind_host, settings.memory_api_port, on_started=heap.settle)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: setattr(server, "should_exit", True))
    await server.serve()


def main() -> None:
    settings = MemoryApiSettings()
    setup_logging("memory-api", settings.log_level)
    heap.observe_pauses()
    setup_tracing("memento-memory-api", settings.otel_exporter_otlp_endpoint)
    eventloop.run(serve(settings))


if __name__ == "__main__":
    main()

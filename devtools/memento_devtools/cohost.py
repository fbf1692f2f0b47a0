"""`python -m memento_devtools.cohost`: the gateway and memory-api in one process, for one machine (issue 50 item 2).

Over loopback HTTP every tool call woke a second process, and each side encoded and parsed an HTTP request and its
answer. Here the gateway calls memory-api's ASGI app in the same event loop (memento_shared.internal_http's
InProcessClient): the same principal, headers and JSON, no socket. memory-api still listens on its own port for
whatever else reaches it (health, metrics, the conformance runner). Both read the same environment as when apart.

A composition outside both services: neither imports the other (tests/contract/test_boundaries.py), and each still
deploys on its own (deploy/k8s). The launcher runs this when MEMENTO_COHOST is on (`make run`, docs/operations.md).
One process means one tracer: spans of both carry the service name memento-gateway+memory-api.
"""

from __future__ import annotations

import asyncio
import logging
import signal

from memento_gateway.__main__ import bind_host
from memento_gateway.app import create_app as create_gateway
from memento_gateway.settings import GatewaySettings
from memento_memory_api.app import create_app as create_memory_api
from memento_memory_api.settings import MemoryApiSettings
from memento_shared import eventloop, heap
from memento_shared.http import make_server
from memento_shared.internal_http import InProcessClient
from memento_shared.telemetry.logging import JsonFormatter, setup_logging
from memento_shared.telemetry.tracing import setup_tracing, traced_asgi

LOOPBACK = "127.0.0.1"
GATEWAY_DRAIN_S = 5.0  # the gateway's head start in stopping (serve's docstring)


class ServiceByLogger(JsonFormatter):
    """Each log line still names the service it came from, by the module that logged it."""

    def format(self, record: logging.LogRecord) -> str:
        self.service = "memory-api" if record.name.startswith("memento_memory_api") else "gateway"
        return super().format(record)


async def serve(api_settings: MemoryApiSettings, gateway_settings: GatewaySettings) -> None:
    """memory-api first (its startup opens the pool the gateway's calls need), the gateway once it is up; on a
    signal the gateway stops first, GATEWAY_DRAIN_S ahead, so the calls it drains still have memory-api."""
    memory_api = create_memory_api(api_settings)
    api_server = make_server(memory_api, LOOPBACK, api_settings.memory_api_port)
    gateway_settings = gateway_settings.model_copy(update={"bind_host": bind_host(gateway_settings)})
    local = InProcessClient(traced_asgi(memory_api), timeout_s=gateway_settings.upstream_timeout_s)
    gateway = create_gateway(gateway_settings, memory_api=local)
    gateway_server = make_server(gateway, gateway_settings.bind_host, gateway_settings.port, on_started=heap.settle)

    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)

    api_task = asyncio.create_task(api_server.serve())
    while not api_server.started and not api_task.done():
        await asyncio.sleep(0.05)
    if api_task.done():  # memory-api could not start: its error is the process's
        await api_task
        return
    gateway_task = asyncio.create_task(gateway_server.serve())
    signalled = asyncio.create_task(stopping.wait())
    await asyncio.wait([signalled, gateway_task, api_task], return_when=asyncio.FIRST_COMPLETED)
    signalled.cancel()
    # the gateway first, for at most GATEWAY_DRAIN_S (an open SSE stream holds its shutdown for the whole graceful
    # timeout), then memory-api beside whatever is left of it: both are done within the launcher's 10 s
    gateway_server.should_exit = True
    await asyncio.wait([gateway_task], timeout=GATEWAY_DRAIN_S)
    api_server.should_exit = True
    await asyncio.gather(gateway_task, api_task)


def main() -> None:
    api_settings = MemoryApiSettings()
    gateway_settings = GatewaySettings()
    setup_logging("gateway", gateway_settings.log_level)
    for handler in logging.getLogger().handlers:
        handler.setFormatter(ServiceByLogger("gateway"))
    heap.observe_pauses()
    setup_tracing("memento-gateway+memory-api", gateway_settings.otel_exporter_otlp_endpoint)
    eventloop.run(serve(api_settings, gateway_settings))


if __name__ == "__main__":
    main()

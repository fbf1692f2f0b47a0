"""Server-Timing on the answer to a tool call: memory-api's stages of the call (its own header, relayed as it came:
memento_memory_api.server_timing) and `gateway`, the gateway's whole handling of the request, so a client can tell
its own and the network's share (what it measured minus `gateway`) from the gateway's (`gateway` minus memory-api's
`total`) and memory-api's. Only a request answered with one JSON body carries it: an SSE stream's headers leave
before its answer exists, and a batch holds several calls."""

from __future__ import annotations

import time
from contextvars import ContextVar
from dataclasses import dataclass, field

HEADER = "Server-Timing"


@dataclass
class Relay:
    started: float = field(default_factory=time.perf_counter)
    upstream: str | None = None  # memory-api's Server-Timing of the tool call made for this request


_current: ContextVar[Relay | None] = ContextVar("memento_gateway_timing", default=None)


def begin() -> None:
    """Start timing the current request (the task that runs its call shares the relay)."""
    _current.set(Relay())


def relay(header: str | None) -> None:
    """memory-api's Server-Timing of the tool call made for the current request."""
    current = _current.get()
    if current is not None and header:
        current.upstream = header


def headers() -> dict[str, str]:
    """The answer's Server-Timing header, when the request made a tool call; else none."""
    current = _current.get()
    if current is None or current.upstream is None:
        return {}
    return {HEADER: f"{current.upstream}, gateway;dur={(time.perf_counter() - current.started) * 1000:.1f}"}

"""Every service's event loop: uvloop where it is installed (Linux and macOS), asyncio's own otherwise.

On this workload (small requests over loopback, many sockets) the loop itself is a large share of each call's
CPU; uvloop's libuv loop does the same work in C.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

try:
    import uvloop
except ImportError:  # pragma: no cover - Windows, where uvloop does not build
    uvloop = None


def run(main: Coroutine[Any, Any, T]) -> T:
    """asyncio.run on the fastest loop available."""
    if uvloop is None:
        return asyncio.run(main)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main)

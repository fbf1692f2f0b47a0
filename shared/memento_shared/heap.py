"""A service process's heap once it has started.

Startup builds what lives as long as the process: modules, classes, settings, pools, the model. Python's full
(generation 2) collections walk every tracked object, so each one walked all of that again while the event loop
waited: in memory-api (~200k objects after its imports) 48 ms a collection on this machine, every request in flight
stalled meanwhile. `settle` collects startup's garbage and freezes the rest (gc.freeze): later collections skip it.
What a frozen object holds is never reclaimed by the collector, so it runs once, when startup is over, and only in a
service's own process (its entry point calls it; an app built inside a test or a bench process is not frozen).

It also raises the young generation's threshold. The collector counts every tracked container allocated and not yet
freed, and a request holds many at once: a recall by text ~550 by the end of its order (up to ~1,200: the rows read,
its lists, the order's tuples), plain fusion ~300. With CPython's 700, memory-api ran 531 young collections in 591
recalls by text (~0.1 ms each, walking everything the request held) for garbage that reference counting frees anyway
when the request ends. With `YOUNG`, young collections come when what outlives requests (caches, cycles) adds up to
it: 1 in the same 591.
"""

from __future__ import annotations

import gc
import time
from typing import Any

from memento_shared.telemetry.metrics import GC_FROZEN, GC_PAUSE

YOUNG = 10_000  # containers allocated and not yet freed before a young collection (CPython's default: 700)
_started: list[float] = []


def settle() -> None:
    """Collect what startup left behind, then freeze what is left: later full collections skip it. Young collections
    from then on wait for `YOUNG` containers."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG, *gc.get_threshold()[1:])
    GC_FROZEN.set(gc.get_freeze_count())


def observe_pauses() -> None:
    """Time every collection into memento_gc_pause_seconds (once per process; a callback costs ~1 µs)."""
    if _observe in gc.callbacks:
        return
    gc.callbacks.append(_observe)


def _observe(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _started.append(time.perf_counter())
    elif _started:
        GC_PAUSE.labels(str(info["generation"])).observe(time.perf_counter() - _started.pop())

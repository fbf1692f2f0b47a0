"""Whose call runs next on a lane: the cheapest waiting one, so concurrent questions wait least in all.

A local model reads one call at a time and its time grows with every token, so among calls waiting for a lane the
shortest goes first (shortest job first minimises the summed wait). A call that has waited longer than `patience`
goes first whatever its length, so a long text is never starved by a stream of short ones.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass(order=True)
class _Waiter:
    cost: float
    seq: int
    since: float = field(compare=False)
    granted: asyncio.Future[Any] = field(compare=False)


class ShortestFirst:
    """A lock whose waiters are let in cheapest first (ties and the impatient in order of arrival)."""

    def __init__(self, patience_s: float = 0.5) -> None:
        self.patience_s = patience_s
        self._held = False
        self._waiting: list[_Waiter] = []
        self._seq = itertools.count()

    @asynccontextmanager
    async def turn(self, cost: float) -> AsyncIterator[None]:
        """Hold the lane for one call costing `cost` (characters of text, say)."""
        if self._held or self._waiting:
            waiter = _Waiter(cost, next(self._seq), time.monotonic(), asyncio.get_running_loop().create_future())
            self._waiting.append(waiter)
            try:
                await waiter.granted
            except asyncio.CancelledError:
                if waiter in self._waiting:
                    self._waiting.remove(waiter)
                elif not waiter.granted.cancelled():
                    self._release()  # granted as it was cancelled: the turn passes on
                raise
        else:
            self._held = True
        try:
            yield
        finally:
            self._release()

    def waiting(self) -> int:
        return len(self._waiting)

    def _release(self) -> None:
        while self._waiting:
            now = time.monotonic()
            overdue = [w for w in self._waiting if now - w.since > self.patience_s]
            chosen = min(overdue, key=lambda w: w.seq) if overdue else min(self._waiting)
            self._waiting.remove(chosen)
            if not chosen.granted.done():  # (one cancelled meanwhile is passed over)
                chosen.granted.set_result(None)  # the lane stays held: it passes to `chosen`
                return
        self._held = False

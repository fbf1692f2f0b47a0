"""Where a tool call's time goes, as a standard `Server-Timing` response header on POST /v1/tools/{name}:

    embed;dur=31.2, fresh;dur=0.0, pool;dur=0.1, db;dur=12.5, total;dur=60.1   (milliseconds)

- `embed`: waiting for the embedder (the question's vector, a stored text's inline one), queueing in it included;
- `fresh`: waiting for the vectors of the caller's rows not yet embedded (read your writes, recall.fresh);
- `pool`: waiting for a database connection;
- `db`: database statements in flight;
- `total`: the call, from the request's arrival to its answer's body.

Stages overlap (the question embeds while the lexical search runs), so each is counted only where no stage before it
in that list was under way: they never overlap, sum to at most `total`, and what is left is the process's own work
(Python, Redis, waiting for the event loop). The request's spans are collected through a context variable by the
hooks that wait (the embedding client; the unit of work's pool and its connection, TimedConnection), a few per call,
and nothing but their names and times: no statement, text or identifier. Work a call hands off to run after its answer
(after_turn's job) calls `detach` so its time is not the call's.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

HEADER = "Server-Timing"
STAGES = ("embed", "fresh", "pool", "db")  # in the order overlapping time is given to them

_current: ContextVar[Stages | None] = ContextVar("memento_server_timing", default=None)


class Stages:
    """One request's spans: (stage, start, end) on perf_counter's clock."""

    __slots__ = ("spans", "started")

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.spans: list[tuple[str, float, float]] = []

    def durations(self, end: float) -> dict[str, float]:
        """Seconds per stage (and `total`) up to `end`: each instant goes to the first stage of STAGES under way."""
        events = []
        for name, a, b in self.spans:
            a, b = max(a, self.started), min(b, end)
            if b > a:
                events += [(a, 1, name), (b, -1, name)]
        events.sort(key=lambda event: event[0])
        active = dict.fromkeys(STAGES, 0)
        out = dict.fromkeys(STAGES, 0.0)
        last = self.started
        for at, change, name in events:
            top = next((s for s in STAGES if active[s]), None)
            if top is not None:
                out[top] += at - last
            active[name] += change
            last = at
        out["total"] = end - self.started
        return out

    def header(self) -> str:
        """The Server-Timing value now; each figure rounded down to 0.1 ms, so the stages never sum past `total`."""
        return ", ".join(
            f"{name};dur={math.floor(seconds * 10_000) / 10:.1f}"
            for name, seconds in self.durations(time.perf_counter()).items()
        )


def begin() -> Stages:
    """Start timing the current request (its tasks started from here on share its spans)."""
    stages = Stages()
    _current.set(stages)
    return stages


def detach() -> None:
    """The current task's work is not the request's (a job it started to run on after the answer)."""
    _current.set(None)


@contextmanager
def stage(name: str) -> Iterator[None]:
    """Count the time inside as `name` for the current request, if one is being timed."""
    stages = _current.get()
    if stages is None:
        yield
        return
    started = time.perf_counter()
    try:
        yield
    finally:
        stages.spans.append((name, started, time.perf_counter()))


class TimedConnection:
    """A unit of work's connection whose statements count as `db` for the request they serve; everything else is the
    asyncpg connection's own. Only units of work are timed: the write-back's connections are not the call's."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    async def execute(self, *args: Any, **kwargs: Any) -> Any:
        with stage("db"):
            return await self._conn.execute(*args, **kwargs)

    async def executemany(self, *args: Any, **kwargs: Any) -> Any:
        with stage("db"):
            return await self._conn.executemany(*args, **kwargs)

    async def fetch(self, *args: Any, **kwargs: Any) -> Any:
        with stage("db"):
            return await self._conn.fetch(*args, **kwargs)

    async def fetchrow(self, *args: Any, **kwargs: Any) -> Any:
        with stage("db"):
            return await self._conn.fetchrow(*args, **kwargs)

    async def fetchval(self, *args: Any, **kwargs: Any) -> Any:
        with stage("db"):
            return await self._conn.fetchval(*args, **kwargs)

"""A plain progress counter on stderr (no dependency): redrawn in place on a terminal at most a few times a second,
one summary line otherwise, so logs and CI output stay readable. stdout stays the command's answer."""

from __future__ import annotations

import sys
import time
from typing import IO


class Progress:
    def __init__(self, label: str, total: int | None = None, stream: IO[str] | None = None) -> None:
        self.label = label
        self.total = total
        self.done = 0
        self.stream = stream or sys.stderr
        self.live = bool(getattr(self.stream, "isatty", lambda: False)())
        self._drawn = 0.0

    def step(self, n: int = 1) -> None:
        self.done += n
        now = time.monotonic()
        if self.live and now - self._drawn >= 0.2:
            self._drawn = now
            self._draw("\r")

    def _draw(self, start: str, end: str = "") -> None:
        of = f"/{self.total}" if self.total is not None else ""
        percent = f" {100 * self.done // self.total:3d}%" if self.total else ""
        self.stream.write(f"{start}memento: {self.label} {self.done}{of}{percent}{end}")
        self.stream.flush()

    def close(self) -> None:
        self._draw("\r" if self.live else "", "\n")

    def abandon(self) -> None:
        """Stopped by an error: end the redrawn line, so the error gets a line of its own."""
        if self.live:
            self.stream.write("\n")
            self.stream.flush()

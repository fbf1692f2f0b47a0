"""Scorers judge one fragment's quality in [0, 1]: the offline rules by default, Gemini when configured."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Fragment:
    """What a scorer may look at. `novelty` is computed from the store before scoring (offline.novelty_sql)."""

    content: str
    topic: str
    type: str
    novelty: float


@dataclass(frozen=True)
class Score:
    quality: float
    parts: dict[str, float]


class Scorer(Protocol):
    name: str
    local: bool  # scores without a network call, so it may score inside the evaluator's transaction

    async def score(self, fragment: Fragment) -> Score: ...


class ScorerError(Exception):
    """A scorer call failed; `retry_after` (seconds) when the provider asked us to wait."""

    def __init__(self, message: str, *, error_type: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.error_type = error_type
        self.retry_after = retry_after

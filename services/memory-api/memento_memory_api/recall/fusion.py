"""Reciprocal rank fusion (seed 001 Part 2): score(d) = Σ weight / (k + rank)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

Key = TypeVar("Key", bound=Any)  # a fragment id, a chunk's (item, version, index): anything hashable and ordered


def rrf(
    rankings: Sequence[Sequence[Key]], k: float = 10, weights: Sequence[float] | None = None
) -> list[tuple[Key, float]]:
    """Best first; equal scores by key, so the order never depends on the lists' order."""
    return sorted(rrf_scores(rankings, k, weights).items(), key=lambda pair: (-pair[1], pair[0]))


def rrf_scores(
    rankings: Sequence[Sequence[Key]], k: float = 10, weights: Sequence[float] | None = None
) -> dict[Key, float]:
    """The fused scores, unordered (for a caller that changes them before it sorts)."""
    scores: dict[Key, float] = {}
    for i, ranking in enumerate(rankings):
        weight = weights[i] if weights else 1.0
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)
    return scores

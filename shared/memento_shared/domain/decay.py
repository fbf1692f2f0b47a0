"""Seed 003's relevance decay, as the Memento Protocol's reference server computes it: a memory fades with a 7-day
half-life unless it is used. memento_recall multiplies it into each result's score; the consolidator's decay job
stores it (without the query's term) for crystallization and health."""

from __future__ import annotations

import math
from datetime import datetime

HALF_LIFE_HOURS = 168.0
ACCESS_BOOST_MAX = 2.0
# The access boost, plainly 1 + log2(1 + n) at most 2, takes the reference server's 0.3 scale on the log
# (docs/dialects.md "protocol"): without it one access would already reach the cap and "frequently accessed" could not
# count
ACCESS_LOG_SCALE = 0.3
LAST_ACCESS_HALF_LIFE_HOURS = 48.0


def recency(age_hours: float) -> float:
    return 1.0 if age_hours <= 0 else 0.5 ** (age_hours / HALF_LIFE_HOURS)


def access_boost(access_count: int) -> float:
    return min(ACCESS_BOOST_MAX, 1.0 + math.log2(1 + max(0, access_count)) * ACCESS_LOG_SCALE)


def last_access_boost(hours_since: float | None) -> float:
    """1.5 just after a use, fading towards 1 (halving the extra every 48 h); 1 for a memory never used."""
    if hours_since is None:
        return 1.0
    return 1.5 if hours_since <= 0 else 1.0 + 0.5 * 0.5 ** (hours_since / LAST_ACCESS_HALF_LIFE_HOURS)


def decayed(created_at: datetime, access_count: int, accessed_at: datetime | None, now: datetime) -> float:
    """recency × access boost × last-access boost: the part of a memory's score that is not about the query."""
    age = (now - created_at).total_seconds() / 3600
    since = (now - accessed_at).total_seconds() / 3600 if accessed_at is not None else None
    return recency(age) * access_boost(access_count) * last_access_boost(since)

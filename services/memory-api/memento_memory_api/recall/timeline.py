"""Questions that relate two events in time, ordered by the times already stored (issue 53 item 2): "What did Caroline
do after the adoption meeting?" (text.relations splits it into its ask and its anchor clause).

The anchor's row is the row among those the search already scored that holds most of the anchor clause's words, each
weighed by its rarity among them (ties: the better fused score); it must hold at least half of their weight, else
nothing changes. A row's times are the time it names (event_from, event_to) and the moment it was said (event_said),
each widened to whole UTC days. Then each other scored row is:
- on the asked side, when one of its times is ("after": it starts on or after the anchor's earliest day; "before": it
  ends by the end of the anchor's latest day): its score times `1 + weight`;
- on the wrong side, when all of its times are ("after": they end before the anchor's earliest day starts; "before":
  they start after its latest day ends): times `1 - weight`;
- else (a time that spans the anchor's day) left as it is.
Lenient on purpose: the anchor's own days count as the asked side (an answer is often told where its anchor is: "I ran
a charity race last Saturday and realised..."), and a reply told the day of the anchor about "yesterday" is not put
before it. Whether a time-of-telling or a named time: LoCoMo's turns name a time in a few of their words and are all
told at their session's. The `keep` best rows before this keep their places and scores, as for the second hop
(relevance.hold): a row it lifts to their level goes just below them. No statement, no model: a pass over the rows
the order already holds.

"While"/"when" clauses ("How did she feel while camping?") are not ordered: their answer is the anchor's row itself,
and lifting the rest of its day (tried on the development conversations) only pushed a recurring event's other
mentions down.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from datetime import datetime, time, timedelta
from typing import Any

from memento_shared.text.relations import Relation

Words = Callable[[Any], frozenset[str]]
_DAY = timedelta(days=1)
_TICK = timedelta(microseconds=1)


def anchor(scores: dict[str, float], rows: dict[str, Any], terms: frozenset[str], words: Words) -> str | None:
    """The id of the anchor clause's row (module docstring), or None when no row holds half of its words' weight."""
    if not terms or not scores:
        return None
    held = {i: words(rows[i]) & terms for i in scores}
    frequency = Counter(t for h in held.values() for t in h)
    weight = {t: math.log((len(held) + 1) / (frequency[t] + 0.5)) for t in terms}
    total = math.fsum(max(w, 0.0) for w in weight.values())
    strength = {i: math.fsum(max(weight[t], 0.0) for t in h) for i, h in held.items() if h}
    if not strength or total <= 0:
        return None
    best = min(strength, key=lambda i: (-strength[i], -scores[i], i))
    return best if strength[best] >= total / 2 else None


def times(row: Any) -> list[tuple[datetime, datetime]]:
    """The row's times, each [start, end): the time it names (if any) and the moment it was said (if known)."""
    found = []
    if row["event_from"] is not None and row["event_to"] is not None:
        found.append((row["event_from"], max(row["event_to"], row["event_from"] + _TICK)))
    if row["event_said"] is not None:
        found.append((row["event_said"], row["event_said"] + _TICK))
    return found


def days(row: Any) -> tuple[datetime, datetime] | None:
    """From the start of the first UTC day of the row's times to the end of the last (None: it has none)."""
    own = times(row)
    if not own:
        return None
    start, end = min(s for s, _ in own), max(e for _, e in own) - _TICK
    return datetime.combine(start.date(), time(), start.tzinfo), datetime.combine(end.date(), time(), end.tzinfo) + _DAY


def side(row: Any, at: tuple[datetime, datetime], relation: Relation) -> int:
    """+1 when one of the row's times is on the asked side of the anchor's days `at` (days()), -1 when all of them
    are on the wrong side, 0 when neither (or it has none). Lenient both ways: "after" counts from the anchor's
    earliest day (the time it names), "before" up to its latest (the day it was told), so a reply told the anchor's
    day about "yesterday" is not put before it."""
    own = times(row)
    if not own:
        return 0
    if relation.side == "after":
        first = at[0]
        if any(start >= first for start, _ in own):
            return 1
        return -1 if all(end <= first for _, end in own) else 0
    last = at[1]
    if any(end <= last for _, end in own):
        return 1
    return -1 if all(start >= last for start, _ in own) else 0


def arrange(
    scores: dict[str, float],
    rows: dict[str, Any],
    relation: Relation,
    terms: frozenset[str],
    words: Words,
    weight: float,
    kept: set[str],
) -> str | None:
    """The scores moved in place by the side each row lies on (module docstring), but `kept`'s; returns the anchor's
    id (None: none found, nothing moved). The caller holds the kept rows above the rest (relevance.hold)."""
    found = anchor(scores, rows, terms, words)
    at = days(rows[found]) if found is not None else None
    if found is None or at is None:
        return None
    for i in scores:
        if i not in kept:
            scores[i] *= 1 + weight * side(rows[i], at, relation)
    return found

"""Questions that relate two events in time, ordered by the times already stored (issue 53 item 2): "What did Caroline
do after the adoption meeting?" (text.relations splits it into its ask and its anchor clause).

The anchor's row is the row among those the search already scored that holds most of the anchor clause's words, each
weighed by its rarity among them (ties: the better fused score); it must hold at least half of their weight, else
nothing changes. Its time is its event time (event_from, event_to: the time it names), else the moment it was said
(event_said), widened to whole UTC days. Then each other scored row, by the same time of its own, is:
- on the asked side ("after": from the anchor's day on; "before": up to its day's end; "at": on its days): its score
  times `1 + weight`;
- on the wrong side (strictly before the anchor's day for "after", strictly after it for "before"): times
  `1 - weight`; an "at" question has no wrong side.
The anchor's own day counts as the asked side: an answer is often told where its anchor is ("I ran a charity race
last Saturday and realised..."). The `keep` best rows before this keep their places and scores, as for the second hop
(relevance.hold): a row it lifts to their level goes just below them. No statement, no model: a pass over the rows
the order already holds.
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


def span(row: Any) -> tuple[datetime, datetime] | None:
    """The whole UTC days of the row's time: the time it names, else the moment it was said (None: neither)."""
    start, end = row["event_from"], row["event_to"]
    if start is None or end is None:
        start = end = row["event_said"]
    if start is None:
        return None
    first = datetime.combine(start.date(), time(), start.tzinfo)
    last = datetime.combine((end if end <= start else end - timedelta(microseconds=1)).date(), time(), end.tzinfo)
    return first, last + _DAY


def side(row: Any, at: tuple[datetime, datetime], relation: Relation) -> int:
    """+1 when the row's time is on the asked side of `at` (the anchor's days), -1 on the wrong side, 0 unknown."""
    own = span(row)
    if own is None:
        return 0
    start, end = own
    if relation.side == "at":
        return 1 if start < at[1] and at[0] < end else 0
    after = start >= at[0]  # from the anchor's first day on
    before = end <= at[1]  # up to its last day's end
    if relation.side == "after":
        return 1 if after else -1 if end <= at[0] else 0
    return 1 if before else -1 if start >= at[1] else 0


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
    at = span(rows[found]) if found is not None else None
    if found is None or at is None:
        return None
    for i in scores:
        if i not in kept:
            scores[i] *= 1 + weight * side(rows[i], at, relation)
    return found

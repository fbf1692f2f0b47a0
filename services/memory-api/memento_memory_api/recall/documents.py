"""The documents dialect's ranking (seed 001 `memory.search`), beside the fragment engine: the lists' sizes, their
weighted RRF with the canonical boost and the lexical list's coverage (`fuse`), the neighbour lift (`lifted`, `lift`)
and the canonical preference (`prefer_canonical`). The documents handler runs the lists (repositories.documents and
recall.fresh_chunks) and calls these; bench.documents and bench.documents_fusion tune the same functions."""

from __future__ import annotations

import re
from collections.abc import Callable, Container, Mapping
from dataclasses import dataclass
from typing import Any

from memento_memory_api.recall.fusion import rrf
from memento_shared.text.keywords import STOPWORDS

LEXICAL_TOP_K, SEMANTIC_TOP_K, TRIGRAM_TOP_K = 40, 40, 20  # seed 001 Part 8
Ranked = list[tuple[Any, float]]  # (chunk key, score), best first; a chunk's key is (item, version, index)


@dataclass(frozen=True)
class Weights:
    """memory.search's weighted RRF (seed 001 Part 2 and 8): k, each list's weight, the canonical boost, and how
    much the lexical list's weight follows its coverage (the share of the query's weight, its terms' summed idf,
    that its best chunk holds, raised to `coverage_power`; 0 leaves the weight fixed, as the seed does), and the
    neighbour lift (`lift`: each of the `lift_top` best chunks gives the chunks beside it that share of its score;
    0 is off), and the canonical preference (`same`: the share of their words two chunks must share to say the same
    thing, `prefer_canonical`; 0 is off, as in the seed's formula)."""

    k: float
    lexical: float
    semantic: float
    trigram: float
    canonical_boost: float
    coverage_power: float
    lift: float = 0.0
    lift_top: int = 5
    same: float = 0.0

    @classmethod
    def of(cls, settings: Any) -> Weights:
        return cls(
            k=settings.document_rrf_k,
            lexical=settings.document_lexical_weight,
            semantic=settings.document_semantic_weight,
            trigram=settings.document_trigram_weight,
            canonical_boost=settings.document_canonical_boost,
            coverage_power=settings.document_lexical_coverage_power,
            lift=settings.document_neighbour_lift,
            lift_top=settings.document_neighbour_top,
            same=settings.document_canonical_same_words,
        )


def fuse(
    lists: Mapping[str, list[Any]], canonical: Mapping[Any, bool], weights: Weights, coverage: float = 1.0
) -> Ranked:
    """The lists fused by weighted RRF, best first (ties by key); canonical documents add the boost's weight / (k + 1)
    as if ranked first in a virtual list, the others / (k + 1000) (Part 2). A lexical list whose best chunk holds
    little of the query's weight (a question worded unlike its answer) counts for less (`coverage`, 0..1)."""
    lexical = weights.lexical * max(0.0, min(1.0, coverage)) ** weights.coverage_power
    by_name = {"lexical": lexical, "semantic": weights.semantic, "trigram": weights.trigram}
    names = list(lists)
    fused = rrf([lists[n] for n in names], k=weights.k, weights=[by_name[n] for n in names])
    boost = weights.canonical_boost
    scores = [(key, s + boost / (weights.k + (1 if canonical.get(key) else 1000))) for key, s in fused]
    return sorted(scores, key=lambda pair: (-pair[1], pair[0]))


def beside(key: tuple[Any, int, int]) -> list[tuple[Any, int, int]]:
    """The chunks just before and after a chunk in its document version (chunks are keyed item, version, index)."""
    item, version, index = key
    return [(item, version, index - 1), (item, version, index + 1)]


def lifted(fused: Ranked, weights: Weights) -> list[tuple[Any, int, int]]:
    """The keys of the chunks beside each of the `lift_top` best of `fused`, which the lift may raise (a search reads
    those no list found, in one statement, before `lift`); none when the lift is off."""
    if weights.lift <= 0 or weights.lift_top <= 0:
        return []
    return list(dict.fromkeys(near for key, _ in fused[: weights.lift_top] for near in beside(key)))


def lift(fused: Ranked, present: Container[Any], weights: Weights) -> Ranked:
    """`fused` after the neighbour lift, best first (ties by key): each of the `lift_top` best chunks gives the chunks
    beside it in its document (those in `present`: an index past either end names no chunk) `lift` × its score, when
    that is more than they have. A question answered across a section break finds the other half; `lift` < 1, so a
    direct hit always stays ahead of the neighbour it lifts."""
    if weights.lift <= 0 or weights.lift_top <= 0:
        return fused
    scores = dict(fused)
    for key, score in fused[: weights.lift_top]:
        for near in beside(key):
            if near in present and score * weights.lift > scores.get(near, 0.0):
                scores[near] = score * weights.lift
    return sorted(scores.items(), key=lambda pair: (-pair[1], pair[0]))


PREFER_WINDOW = 20  # the results the canonical preference reads: memory.search's default limit, for every limit
_WORD = re.compile(r"[0-9A-Za-z가-힣_]+")  # the lexical list's words (recall.lexical.terms, uncapped)


def distinct_words(text: str) -> frozenset[str]:
    """A chunk's distinct meaningful words: how often it says them does not count."""
    return frozenset(w for w in _WORD.findall(text.lower()) if len(w) > 1 and w not in STOPWORDS)


def prefer_canonical(
    ranked: Ranked, canonical: Mapping[Any, bool], words_of: Callable[[Any], frozenset[str]], same: float
) -> Ranked:
    """Seed 001's canonical preference where its boost is too small to hold it: a canonical chunk among the first
    PREFER_WINDOW results ranks above every non-canonical chunk there that says the same thing, i.e. the two share
    `same` or more of the distinct words of the larger of them (a note repeating a spec, however often it says it;
    not a short note whose few words a long section happens to hold), and takes the best such chunk's score. Every
    other chunk keeps the fused order, so the weights chosen on the labelled set rank it as before. `same` 0 is off."""
    if same <= 0:
        return ranked
    top = ranked[:PREFER_WINDOW]
    raised: dict[Any, float] = {}
    for n, (key, _) in enumerate(top):
        if not canonical.get(key):
            continue
        mine = words_of(key)
        for other, score in top[:n]:
            theirs = words_of(other)
            if not canonical.get(other) and theirs and len(theirs & mine) >= same * max(len(theirs), len(mine)):
                raised[key] = score  # the best one above it: the list is best first
                break
    if not raised:
        return ranked
    scores = [(key, raised.get(key, score)) for key, score in ranked]
    return sorted(scores, key=lambda pair: (-pair[1], pair[0] not in raised, pair[0]))


def final(fused: Ranked, rows: Mapping[Any, Any], weights: Weights) -> Ranked:
    """`fused` as memory.search answers it: after the neighbour lift and the canonical preference, over the chunks'
    rows (`rows`: key -> a row with `is_canonical` and `text`, the lifted neighbours among them)."""
    canonical = {key: row["is_canonical"] for key, row in rows.items()}
    texts: dict[Any, frozenset[str]] = {}

    def words_of(key: Any) -> frozenset[str]:
        if key not in texts:
            texts[key] = distinct_words(rows[key]["text"])
        return texts[key]

    return prefer_canonical(lift(fused, rows, weights), canonical, words_of, weights.same)

"""memory.search's fusion (recall.documents.fuse): weighted RRF, the seed's virtual-rank canonical boost, and the
lexical list's weight following how much of the question its best chunk holds; then the canonical preference
(prefer_canonical) over the fused results."""

from __future__ import annotations

import pytest

from memento_memory_api.recall.documents import PREFER_WINDOW, Weights, distinct_words, fuse, prefer_canonical

SEED = Weights(k=60.0, lexical=0.4, semantic=0.5, trigram=0.1, canonical_boost=0.15, coverage_power=0.0)


def order(lists, canonical=None, weights=SEED, coverage=1.0) -> list[str]:
    return [key for key, _ in fuse(lists, canonical or {}, weights, coverage)]


def test_each_list_adds_its_weight_over_k_plus_rank():
    scores = dict(fuse({"lexical": ["a", "b"], "semantic": ["b"], "trigram": []}, {}, SEED))
    boost_other = 0.15 / (60 + 1000)
    assert scores["a"] == pytest.approx(0.4 / 61 + boost_other)
    assert scores["b"] == pytest.approx(0.4 / 62 + 0.5 / 61 + boost_other)


def test_the_canonical_boost_lifts_a_canonical_chunk_over_an_equal_one():
    even = Weights(**{**SEED.__dict__, "lexical": 0.5})  # each of the two first in one list: equal without a boost
    lists = {"lexical": ["note", "spec"], "semantic": ["spec", "note"], "trigram": []}
    assert order(lists, {"spec": False, "note": False}, even) == ["note", "spec"]  # ties by key
    assert order(lists, {"spec": True, "note": False}, even) == ["spec", "note"]
    assert order(lists, {"spec": True}, Weights(**{**even.__dict__, "canonical_boost": 0.0})) == ["note", "spec"]


def test_a_lexical_list_that_holds_little_of_the_question_counts_for_less():
    lists = {"lexical": ["words", "x", "y"], "semantic": ["meaning"], "trigram": []}
    covered = Weights(**{**SEED.__dict__, "coverage_power": 2.0})
    assert order(lists, weights=covered, coverage=1.0)[0] == "meaning"  # 0.5/61 against 0.4/61
    assert order(lists, weights=SEED, coverage=0.1)[:2] == ["meaning", "words"]
    scores = dict(fuse(lists, {}, covered, coverage=0.5))
    assert scores["words"] == pytest.approx(0.4 * 0.25 / 61 + 0.15 / 1060)  # weight × share²
    assert dict(fuse(lists, {}, covered, coverage=0.0))["words"] == pytest.approx(0.15 / 1060)  # the boost alone


TEXTS = {
    "note": "Token refresh: access tokens refresh every 15 minutes. Again: tokens refresh every 15 minutes!",
    "spec": "### Token refresh\n\nAccess tokens refresh every 15 minutes; the refresh token rotates monthly.",
    "other": "Invoices go out on the first day of the month.",
    "longer-note": "Access tokens refresh every 15 minutes, and the mobile app retries three times with backoff.",
    "short-note": "A parcel is one box.",
    "roles": "## Roles\n\nA dispatcher plans routes; a courier delivers each parcel, one box at a time; "
    "the shipper pays; "
    "support answers calls; finance bills monthly.",
}


def preferred(ranked: list[tuple[str, float]], canonical: dict, same: float = 0.7, texts=TEXTS) -> list:
    return prefer_canonical(ranked, canonical, lambda key: distinct_words(texts[key]), same)


def test_a_canonical_chunk_goes_above_a_note_saying_the_same_thing_however_often():
    ranked = [("note", 0.09), ("other", 0.05), ("spec", 0.04)]
    assert preferred(ranked, {"spec": True}) == [("spec", 0.09), ("note", 0.09), ("other", 0.05)]
    assert preferred(ranked, {"spec": True}, same=0.0) == ranked  # off
    # a note that says more than the spec holds keeps its place, as does everything the preference does not touch
    longer = [("longer-note", 0.09), ("other", 0.05), ("spec", 0.04)]
    assert preferred(longer, {"spec": True}) == longer
    # nor does a short note whose few words a long canonical section happens to hold: they do not say the same thing
    short = [("short-note", 0.09), ("roles", 0.04)]
    assert preferred(short, {"roles": True}) == short
    assert preferred(ranked, {}) == ranked


def test_the_preference_reads_the_same_window_whatever_the_limit():
    ranked = [("note", 0.09), *((f"x{n}", 0.08 - n / 1000) for n in range(PREFER_WINDOW)), ("spec", 0.01)]
    texts = TEXTS | {f"x{n}": f"unrelated {n}" for n in range(PREFER_WINDOW)}
    assert preferred(ranked, {"spec": True}, texts=texts) == ranked  # the spec is past the window: not raised

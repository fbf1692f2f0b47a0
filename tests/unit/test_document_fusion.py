"""memory.search's fusion (tools.documents.fuse): weighted RRF, the seed's virtual-rank canonical boost, and the
lexical list's weight following how much of the question its best chunk holds."""

from __future__ import annotations

import pytest

from memento_memory_api.tools.documents import Weights, fuse

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

"""Stems (issue 53): a question's word meets a memory's word in another form, English by the Snowball stemmer,
Korean without its particle; the lexical search asks for the word or its stem."""

from __future__ import annotations

from memento_memory_api.recall.lexical import query_terms
from memento_memory_api.recall.relevance import content_terms, words
from memento_shared.text.stems import new_stems, stem


def test_english_inflections_share_a_stem() -> None:
    assert stem("camped") == stem("camping") == stem("camps") == "camp"
    assert stem("paintings") == stem("painted") == "paint"
    assert stem("movies") == stem("movie")


def test_korean_words_lose_their_particle() -> None:
    assert stem("요가를") == stem("요가는") == stem("요가") == "요가"
    assert stem("서울에서") == "서울"
    assert stem("가") == "가"  # nothing is left of a word that is all particle


def test_numbers_and_identifiers_are_kept_as_written() -> None:
    assert stem("2023") == "2023"
    assert stem("err_conn_reset") == "err_conn_reset"


def test_new_stems_are_only_those_the_words_do_not_spell() -> None:
    assert new_stems(["camping", "camp", "paintings", "painted"], 10) == ["paint"]
    assert new_stems(["camping", "hiking", "painting"], 2) == ["camp", "hike"]


def test_question_and_row_meet_by_stem_and_the_switch_turns_it_off() -> None:
    asked = content_terms("Where has Melanie camped?")
    assert {"camp", "melani"} <= asked and "where" not in asked
    assert asked & words("We went camping at the beach")
    assert not content_terms("Where has Melanie camped?", stems=False) & words("We went camping", stems=False)


def test_the_lexical_search_asks_for_the_word_or_its_stem() -> None:
    assert query_terms(["camped", "beach", "요가를"]) == ["(camped | camp)", "beach", "(요가를 | 요가)"]

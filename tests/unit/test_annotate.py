"""A memory's place and time, computed on write (issue 28 items 2-4): thread and place from each source form and from
a session, the dated header as the anchor of the body's dates (English and Korean, absolute and relative), the
expansion words, and the question side spelled the same way.

Unless a case says otherwise the row was written on Wednesday 2024-03-13 15:00 UTC.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memento_memory_api.text.annotate import MAX_EXPANSION_WORDS, annotate, query_expansion, spell

WRITTEN = datetime(2024, 3, 13, 15, 0, tzinfo=UTC)


def at(y: int, m: int, d: int, h: int = 0, mi: int = 0) -> datetime:
    return datetime(y, m, d, h, mi, tzinfo=UTC)


def ann(content: str, source: str | None = None, session_id: str | None = None, written_at: datetime = WRITTEN):
    return annotate(content, source=source, session_id=session_id, written_at=written_at)


# ------------------------------------------------------------------------------------------------------------ place


@pytest.mark.parametrize(
    ("source", "thread", "seq"),
    [
        ("D1:3", "D1", 3),
        ("conv-7#12", "conv-7", 12),
        ("chat/2024-01/15", "chat/2024-01", 15),
        ("session-4:17", "session-4", 17),
        ("a:b:c:9", "a:b:c", 9),
        (" D2:10 ", "D2", 10),
    ],
)
def test_thread_and_place_from_a_source(source: str, thread: str, seq: int) -> None:
    a = ann("hello", source=source, session_id="s-1")
    assert (a.thread, a.seq) == (thread, seq)


@pytest.mark.parametrize("source", ["notes.md", "D1", "D1:x", ":5", "2024-01-15", "", None])
def test_a_source_without_a_place_falls_back_to_the_session(source: str | None) -> None:
    written = datetime(2024, 3, 13, 15, 0, 0, 123456, tzinfo=UTC)
    a = ann("hello", source=source, session_id="abc", written_at=written)
    assert a.thread == "session:abc"
    assert a.seq == int(written.timestamp()) * 1_000_000 + 123456
    assert ann("hello", source=source).thread is None
    assert ann("hello", source=source).seq is None


def test_session_places_follow_write_order() -> None:
    first = ann("one", session_id="s", written_at=WRITTEN)
    second = ann("two", session_id="s", written_at=WRITTEN + timedelta(microseconds=1))
    assert first.thread == second.thread == "session:s"
    assert first.seq is not None and second.seq == first.seq + 1


def test_a_huge_trailing_number_still_fits_a_bigint() -> None:
    a = ann("x", source="D1:" + "9" * 30, session_id="s")
    assert a.thread == "session:s"  # not a place: more digits than a bigint holds
    assert ann("x", source="D1:" + "9" * 18).seq == int("9" * 18)


# ------------------------------------------------------------------------------------------------------------- time


def test_yesterday_in_a_dated_turn_is_the_day_before_the_header() -> None:
    a = ann("Caroline (8 May, 2023): I went yesterday", source="D1:3")
    assert a.event_said == at(2023, 5, 8)
    assert (a.event_from, a.event_to) == (at(2023, 5, 7), at(2023, 5, 8))
    assert a.expansion.split()[:5] == ["caroline", "may", "2023", "2023-05-08", "monday"]
    assert "2023-05-07 sunday" in a.expansion


def test_the_header_time_of_day_is_kept_and_its_date_is_no_event() -> None:
    a = ann("Caroline (1:56 pm on 8 May, 2023): I love painting.")
    assert a.event_said == at(2023, 5, 8, 13, 56)
    assert a.event_from is None and a.event_to is None
    b = ann("Melanie (12:05 am on 9 June, 2023): 5 hours ago I woke up.")
    assert b.event_said == at(2023, 6, 9, 0, 5)
    assert (b.event_from, b.event_to) == (at(2023, 6, 8, 19), at(2023, 6, 8, 20))


@pytest.mark.parametrize(
    ("content", "said", "event"),
    [
        ("[2023-05-08] Met Anna last Friday.", at(2023, 5, 8), (at(2023, 5, 5), at(2023, 5, 6))),
        ("2023-05-08: we shipped it 3 days ago", at(2023, 5, 8), (at(2023, 5, 5), at(2023, 5, 6))),
        ("2023년 5월 8일: 민수와 어제 영화를 봤다", at(2023, 5, 8), (at(2023, 5, 7), at(2023, 5, 8))),
        ("민수 (2023년 5월 8일 오후 3시 20분): 지난주 갔어", at(2023, 5, 8, 15, 20), (at(2023, 5, 1), at(2023, 5, 8))),
        ("지민 [2023.05.08]: 작년 여름에 제주도에 갔어", at(2023, 5, 8), (at(2022, 6, 1), at(2022, 9, 1))),
        ("Melanie [May 8, 2023]: We moved here in 2019.", at(2023, 5, 8), (at(2019, 1, 1), at(2020, 1, 1))),
    ],
)
def test_the_body_dates_resolve_against_the_header(
    content: str, said: datetime, event: tuple[datetime, datetime]
) -> None:
    a = ann(content)
    assert a.event_said == said
    assert (a.event_from, a.event_to) == event


@pytest.mark.parametrize(
    ("content", "event"),
    [
        ("I went to the dentist yesterday.", (at(2024, 3, 12), at(2024, 3, 13))),
        ("We adopted the dog on 8 May 2023.", (at(2023, 5, 8), at(2023, 5, 9))),
        ("어제 민수랑 밥 먹었어", (at(2024, 3, 12), at(2024, 3, 13))),
        ("지난 금요일에 서울 갔어", (at(2024, 3, 8), at(2024, 3, 9))),
        ("2023년 5월에 이사했다", (at(2023, 5, 1), at(2023, 6, 1))),
        ("last May we hiked, and on 2024-01-02 we rested", (at(2023, 5, 1), at(2024, 1, 3))),  # the union
    ],
)
def test_without_a_header_dates_resolve_against_the_writing_time(content: str, event: tuple) -> None:
    a = ann(content)
    assert a.event_said == WRITTEN
    assert (a.event_from, a.event_to) == event


def test_no_dates_no_event_and_the_writing_time_is_said() -> None:
    written = datetime(2024, 3, 13, 17, 0, tzinfo=timezone(timedelta(hours=2)))
    a = ann("I love painting sunsets.", written_at=written)
    assert a.event_from is None and a.event_to is None
    assert a.event_said == at(2024, 3, 13, 15)
    assert a.event_said.tzinfo is not None


@pytest.mark.parametrize("header", ["Meeting at 10: bring snacks", "Notes (version 2): tomorrow we ship"])
def test_a_header_without_a_date_is_no_anchor(header: str) -> None:
    a = ann(header)
    assert a.event_said == WRITTEN
    if "tomorrow" in header:
        assert (a.event_from, a.event_to) == (at(2024, 3, 14), at(2024, 3, 15))


def test_a_header_date_without_a_year_is_resolved_against_the_writing_time() -> None:
    a = ann("Caroline (8 May): I went yesterday")
    assert a.event_said == at(2023, 5, 8)
    assert (a.event_from, a.event_to) == (at(2023, 5, 7), at(2023, 5, 8))


def test_a_naive_writing_time_is_refused() -> None:
    with pytest.raises(ValueError, match="written_at"):
        annotate("x", source=None, session_id=None, written_at=datetime(2024, 3, 13))


# -------------------------------------------------------------------------------------------------------- expansion


def test_expansion_holds_speaker_names_dates_and_keyphrases_once_each() -> None:
    a = ann(
        "Caroline (1:56 pm on 8 May, 2023): I went to a LGBTQ support group last Friday with Melanie in Boston. "
        "Melanie loved the support group."
    )
    words = a.expansion.split()
    assert len(words) == len(set(words))
    for word in ("caroline", "melanie", "boston", "lgbtq", "may", "2023", "2023-05-08", "monday", "2023-05-05"):
        assert word in words
    assert "friday" in words and "support" in words and "group" in words
    assert a.expansion == a.expansion.lower()
    assert "the" not in words and "with" not in words


def test_korean_expansion_spells_dates_in_the_same_words() -> None:
    a = ann("2023년 5월 8일: 민수와 어제 영화를 봤다")
    # then the stems its words do not spell (영화를 -> 영화; 민수 is already there as a name)
    assert a.expansion.split() == ["may", "2023", "2023-05-08", "monday", "2023-05-07", "sunday", "민수", "영화"]


def test_keyphrases_can_be_left_out_of_the_expansion() -> None:
    text = "We adopted a rescue dog from the animal shelter."
    assert "shelter" in annotate(text, source=None, session_id=None, written_at=WRITTEN).expansion
    without = annotate(text, source=None, session_id=None, written_at=WRITTEN, keyphrases=False)
    assert without.expansion == "adopt rescu anim"  # only the stems its words do not spell (text.stems)
    assert (
        annotate(text, source=None, session_id=None, written_at=WRITTEN, keyphrases=False, stems=False).expansion == ""
    )


def test_the_expansion_ends_with_the_stems_the_words_do_not_spell() -> None:
    a = ann("Melanie (1:56 pm on 8 May, 2023): We went camping and I painted two paintings! 요가를 했어요")
    stems = a.expansion.split()[a.expansion.split().index("monday") + 1 :]
    assert stems == ["melani", "camp", "paint", "요가"]  # "paintings" and "painted" are one stem; "went" is its own
    assert "camp" not in ann("We camp by the lake").expansion.split()  # a word that is its own stem is not repeated


def test_expansion_is_capped() -> None:
    text = " ".join(f"and then we met Xa{i} Yb{i} at the park" for i in range(30))  # 20 names kept, two words each
    a = ann(f"On 2023-05-08 {text}.")
    words = a.expansion.split()
    assert len(words) == MAX_EXPANSION_WORDS
    assert words[:4] == ["may", "2023", "2023-05-08", "monday"]  # the dates go first, the names' tail is cut
    assert "xa0" in words and "yb19" not in words


@pytest.mark.parametrize(
    ("start", "end", "words"),
    [
        (at(2023, 5, 7), at(2023, 5, 8), ["may", "2023", "2023-05-07", "sunday"]),
        (at(2023, 5, 7, 13), at(2023, 5, 7, 14), ["may", "2023", "2023-05-07", "sunday"]),
        (
            at(2023, 5, 6),
            at(2023, 5, 8),
            ["may", "2023", "2023-05-06", "saturday", "may", "2023", "2023-05-07", "sunday"],
        ),
        (at(2023, 6, 1), at(2023, 7, 1), ["june", "2023", "2023-06"]),
        (
            at(2022, 12, 1),
            at(2023, 3, 1),
            ["december", "2022", "2022-12", "january", "2023", "2023-01", "february", "2023", "2023-02"],
        ),
        (at(2019, 1, 1), at(2020, 1, 1), ["2019"]),
        (at(2000, 1, 1), at(2030, 1, 1), ["2000", "2029"]),
    ],
)
def test_spell(start: datetime, end: datetime, words: list[str]) -> None:
    assert spell(start, end) == words


def test_a_week_is_spelled_as_its_days() -> None:
    words = spell(at(2023, 5, 1), at(2023, 5, 8))
    assert [w for w in words if w.startswith("2023-")] == [f"2023-05-0{d}" for d in range(1, 8)]
    assert "monday" not in words  # every weekday of a week says nothing


# --------------------------------------------------------------------------------------------------------- question


def test_question_expansion_meets_the_memory_expansion() -> None:
    memory = ann("Caroline (8 May, 2023): I went to the support group yesterday")
    question = query_expansion("What did Caroline do on 7 May 2023?", WRITTEN)
    assert question.split() == ["caroline", "may", "2023", "2023-05-07", "sunday"]
    assert set(question.split()) <= set(memory.expansion.split())


def test_question_expansion_in_korean_with_relative_dates() -> None:
    expected = ["민수", "march", "2024", "2024-03-12", "tuesday"]
    assert query_expansion("민수는 어제 어디 갔어?", WRITTEN).split() == expected
    assert query_expansion("지난 5월에 지민이랑 뭐 했어?", WRITTEN).split() == ["지민", "may", "2023", "2023-05"]


def test_question_without_names_or_dates_expands_to_nothing() -> None:
    assert query_expansion("what is the weather like?", WRITTEN) == ""
    assert query_expansion("", WRITTEN) == ""


# ------------------------------------------------------------------------------------------------------- robustness


@pytest.mark.parametrize(
    "content",
    [
        "",
        " ",
        "\u200f\u202eCaroline (8 May, 2023): went yesterday\u202c 🎉",
        "👩‍👩‍👧" * 1000,
        "Caroline (8 May, 2023): " + "I went yesterday and on 9 June 2023. " * 3000,
        "민수 (2023년 5월 8일): " + "어제 " * 5000,
        "(" * 5000 + ":" * 5000,
        "Caroline (99:99 pm on 31 February, 2023): hi",
        "\x00\x7f\u2028\u2029",
    ],
)
def test_odd_input_does_not_crash(content: str) -> None:
    a = ann(content, source="D1:3", session_id="s")
    assert a.thread == "D1"
    assert len(a.expansion.split()) <= MAX_EXPANSION_WORDS
    assert (a.event_from is None) == (a.event_to is None)
    if a.event_from is not None:
        assert a.event_from < a.event_to


@settings(max_examples=150, deadline=None)
@given(
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=300),
    st.datetimes(min_value=datetime(1970, 1, 2), max_value=datetime(2090, 1, 1), timezones=st.just(UTC)),
)
def test_any_text_gives_a_consistent_annotation(content: str, written_at: datetime) -> None:
    a = annotate(content, source=None, session_id="s", written_at=written_at)
    assert a.event_said.tzinfo is not None
    assert (a.event_from is None) == (a.event_to is None)
    if a.event_from is not None:
        assert a.event_from < a.event_to
    words = a.expansion.split()
    assert len(words) == len(set(words)) <= MAX_EXPANSION_WORDS
    assert a.seq == (written_at - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)

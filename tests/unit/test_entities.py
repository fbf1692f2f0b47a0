"""The offline entity extractor (issue 28 item 3): speaker headers, names and keyphrases in English and Korean, the
names a question mentions, and robustness on empty, huge and odd input."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memento_shared.text.entities import extract, question_names, split_header

LOCOMO_TURN = (
    "Caroline (1:56 pm on 8 May, 2023): I went to a LGBTQ support group yesterday and it was so powerful. "
    "I told Melanie the Bank of America ad was great."
)


# ------------------------------------------------------------------------------------------------------------ header


@pytest.mark.parametrize(
    ("text", "speaker", "date_text", "body"),
    [
        (LOCOMO_TURN, "Caroline", "1:56 pm on 8 May, 2023", "I went to a LGBTQ"),
        ("Melanie [2023-05-08]: Sounds fun!", "Melanie", "2023-05-08", "Sounds fun!"),
        ("Mary Jane Watson: hello there", "Mary Jane Watson", None, "hello there"),
        ("민수 (2023년 5월 8일): 어제 갔어", "민수", "2023년 5월 8일", "어제 갔어"),
        ("[2023-05-08] Met Anna at the café.", None, "2023-05-08", "Met Anna"),
        ("2023년 5월 8일: 민수와 영화를 봤다", None, "2023년 5월 8일", "민수와"),
    ],
)
def test_header_gives_speaker_date_and_body(text: str, speaker: str | None, date_text: str | None, body: str) -> None:
    header = split_header(text)
    assert header.speaker == speaker
    assert header.date_text == date_text
    assert text[header.body_start :].startswith(body)


@pytest.mark.parametrize(
    "text",
    [
        "Note: remember to call the bank.",
        "TODO: fix the build",
        "요약: 회의 결과",
        "Meeting at 10: bring snacks",
        "the server: it crashed",
        "May: a month of rain",
        "Time is 10:30 now",
        "오늘: 맑음",
    ],
)
def test_labels_times_and_lower_case_openers_are_no_header(text: str) -> None:
    header = split_header(text)
    assert header.speaker is None
    assert header.body_start == 0
    assert extract(text).speaker is None


def test_speaker_is_reported_apart_from_the_body_names() -> None:
    entities = extract(LOCOMO_TURN)
    assert entities.speaker == "Caroline"
    assert "Melanie" in entities.names
    assert "Caroline" not in entities.names  # only in the header
    assert "May" not in entities.names


# ------------------------------------------------------------------------------------------------------------- names


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I went to the Grand Canyon with Melanie last Friday.", ["Grand Canyon", "Melanie"]),
        ("She works at the Bank of America in New York.", ["Bank of America", "New York"]),
        ("We saw Dr. Smith and bought an iPhone at the Apple store.", ["Smith", "iPhone", "Apple"]),
        ("Caroline's painting won a prize at the MoMA.", []),  # "Caroline" opens the text and is not known
        ("I met Caroline. Caroline's painting won a prize.", ["Caroline"]),  # known from mid-sentence
        ("The Beatles played on Monday in March.", ["Beatles"]),
        ("Mel, look at this! It's for NASA.", ["Mel", "NASA"]),
        ("Met Anna at the café. Sadly, it rained.", ["Anna"]),
        ("Yesterday I talked to John about Paris, London and Rome.", ["John", "Paris", "London", "Rome"]),
    ],
)
def test_english_names(text: str, expected: list[str]) -> None:
    names = extract(text).names
    for name in expected:
        assert name in names
    for word in ("I", "The", "Yesterday", "Monday", "March", "Sadly", "Met", "It's", "Dr", "Mel,"):
        assert word not in names


def test_names_in_order_of_appearance_deduplicated() -> None:
    text = "Then Melanie called Oscar. Oscar barked at Melanie and at MELANIE's cat."
    assert extract(text).names[:2] == ["Melanie", "Oscar"]
    assert sum(1 for n in extract(text).names if n.lower() == "melanie") == 1


def test_a_known_name_counts_where_it_opens_a_sentence() -> None:
    text = "Oscar is a good dog."
    assert "Oscar" not in extract(text).names
    assert "Oscar" in extract(text, known=["Oscar"]).names
    assert "Oscar" in extract("Oscar: Oscar is hungry.").names  # the speaker is known


def test_sentence_openers_are_not_names() -> None:
    text = "Wow. Thanks! Really great news. Went there. Honestly it was fun."
    assert extract(text).names == []


def test_title_case_text_gives_no_names() -> None:
    assert extract("How To Train Your Dragon In Seven Easy Steps Today").names == []
    assert extract("WE ARE ALL GOING TO THE BEACH TOMORROW MORNING").names == []


@pytest.mark.parametrize(
    ("text", "expected", "not_expected"),
    [
        ("민수는 어제 서울에서 친구랑 요가 수업에 갔어.", ["민수", "서울"], ["친구", "요가", "수업", "어제"]),
        ("지민이가 Google에서 일해.", ["지민", "Google"], ["지민이"]),
        ("김 씨가 왔어. 박지훈 님이 전화했어.", ["김", "박지훈"], []),
        ("민수 씨랑 수영을 했어.", ["민수"], ["수영"]),
        ("회사에서 서버가 죽었고 선생님이 고객님께 사과했어.", [], ["회사", "서버", "선생", "고객"]),
        ("우리는 영화를 보고 상태를 확인했다.", [], ["우리", "영화", "상태"]),
        ("영희와 철수는 부산에 갔다.", ["영희", "철수", "부산"], []),
        ("어제 Caroline이랑 Starbucks에서 만났어.", ["Caroline", "Starbucks"], []),
        ("좋은 씨앗을 심었다.", [], ["좋은", "씨앗"]),
        ("현우는 대학원 진학을 고민하고, 서연이는 합격했다.", ["현우", "서연"], ["진학", "서연이", "대학원"]),
        ("정상의 경치가 멋졌고 Google에서 일하는 친구가 가기로 했어.", ["Google"], ["정상", "경치", "일하", "가기"]),
    ],
)
def test_korean_names(text: str, expected: list[str], not_expected: list[str]) -> None:
    names = extract(text).names
    for name in expected:
        assert name in names
    for name in not_expected:
        assert name not in names


# -------------------------------------------------------------------------------------------------------- keyphrases


def test_english_keyphrases_are_content_word_runs_most_repeated_first() -> None:
    text = (
        "We adopted a rescue dog from the animal shelter. The animal shelter staff were kind, "
        "and the animal shelter let us visit."
    )
    phrases = extract(text).keyphrases
    assert phrases[0] == "animal shelter"
    assert "rescue dog" in phrases
    assert all(" " in p for p in phrases)
    assert len(phrases) <= 5


def test_keyphrases_leave_out_names_and_chat_words() -> None:
    turn = "Caroline (8 May, 2023): I went to a LGBTQ support group yesterday, it was really great"
    assert extract(turn).keyphrases == ["support group"]


def test_korean_keyphrase_is_a_bare_noun_before_a_noun_with_a_particle() -> None:
    assert "요가 수업" in extract("친구랑 요가 수업에 갔어").keyphrases
    assert "데이터 베이스" in extract("어제 데이터 베이스를 고쳤다").keyphrases
    assert extract("정말 재미있게 먹고 싶어").keyphrases == []
    # time words, verbs before a noun, nouns with their particle: no phrase
    assert extract("작년 여름에 정부가 발표한 정책에 대해 시민들이 한 시간씩 달리기를 했다").keyphrases == []


# --------------------------------------------------------------------------------------------------------- questions


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("민수는 어디 갔어?", ["민수"]),
        ("지연이랑 뭐 했어?", ["지연"]),
        ("김민수 씨가 언제 왔어?", ["김민수"]),
        ("서울에서 누구를 만났어?", ["서울"]),
        ("What did Caroline research?", ["Caroline"]),
        ("When did Melanie paint a sunrise?", ["Melanie"]),
        ("Caroline's hobbies?", ["Caroline"]),
        ("Did Caroline and Melanie go to the Grand Canyon in May?", ["Caroline", "Melanie", "Grand Canyon"]),
        ("What is the weather like?", []),
        ("언제 회사에 갔어?", []),
    ],
)
def test_question_names(question: str, expected: list[str]) -> None:
    assert question_names(question) == expected


# --------------------------------------------------------------------------------------------------------- robustness


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        ":",
        "(): x",
        "[]",
        "\u200f\u202eCaroline went to Tokyo\u202c 🎉🎉",
        "مرحبا Caroline 👩‍👩‍👧 went to Tokyo",
        "e\u0301cole Émile Zoë 'quoted' ‘curly’ — dash – dash",
        "\x00\x01 Caroline\x7f",
        "A" * 20000,
        ("Caroline met Melanie in Boston. " * 2000),
        "민수" * 5000,
        "Ok" + "!" * 5000,
    ],
)
def test_odd_input_does_not_crash(text: str) -> None:
    entities = extract(text)
    assert len(entities.names) <= 20
    assert len(entities.keyphrases) <= 5
    assert isinstance(question_names(text), list)


def test_emoji_and_bidi_marks_do_not_hide_a_name() -> None:
    assert "Tokyo" in extract("\u200fWe flew to Tokyo\u200f 🎉 with Melanie 👋.").names
    assert "Melanie" in extract("\u200fWe flew to Tokyo\u200f 🎉 with Melanie 👋.").names


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=400))
def test_any_text_gives_names_found_in_it(text: str) -> None:
    entities = extract(text)
    if entities.speaker is not None:
        assert entities.speaker in " ".join(text.split())
    for name in entities.names:
        for word in name.split():
            assert word in text

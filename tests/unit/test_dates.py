"""The date normaliser (issue 28 item 2, issue 30 item 3): English and Korean, absolute and relative, resolved to
half-open UTC ranges against an explicit anchor; then mentions inside free text, false positives, and properties.

Unless a case says otherwise the anchor is Wednesday 2024-03-13 15:00 UTC (a leap year, in ISO week 11, which runs
from Monday 2024-03-11 to Sunday 2024-03-17).
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memento_shared.text.dates import Mention, TimeRange, is_temporal_question, mentions, resolve

ANCHOR = datetime(2024, 3, 13, 15, 0, tzinfo=UTC)


def at(y: int, m: int, d: int, h: int = 0, mi: int = 0, s: int = 0) -> datetime:
    return datetime(y, m, d, h, mi, s, tzinfo=UTC)


def day(y: int, m: int, d: int) -> TimeRange:
    start = at(y, m, d)
    return TimeRange(start, start + timedelta(days=1), "day")


def week(y: int, m: int, d: int) -> TimeRange:
    """The ISO week starting on Monday y-m-d."""
    assert date(y, m, d).weekday() == 0
    start = at(y, m, d)
    return TimeRange(start, start + timedelta(days=7), "week")


def month(y: int, m: int) -> TimeRange:
    return TimeRange(at(y, m, 1), at(y + m // 12, m % 12 + 1, 1), "month")


def year(y: int) -> TimeRange:
    return TimeRange(at(y, 1, 1), at(y + 1, 1, 1), "year")


def season(y: int, first: int) -> TimeRange:
    end = y * 12 + first - 1 + 3
    return TimeRange(at(y, first, 1), at(end // 12, end % 12 + 1, 1), "season")


# ------------------------------------------------------------------------------------------------ resolve: English

ENGLISH = [
    # ISO dates and instants
    ("2023-05-08", day(2023, 5, 8)),
    ("2023-05-08T10:00:00Z", TimeRange(at(2023, 5, 8, 10), at(2023, 5, 8, 10, 0, 1), "second")),
    ("2023-05-08T10:00Z", TimeRange(at(2023, 5, 8, 10), at(2023, 5, 8, 10, 1), "minute")),
    ("2023-05-08 10:00:00", TimeRange(at(2023, 5, 8, 10), at(2023, 5, 8, 10, 0, 1), "second")),
    ("2023-05-08T10:00:00+09:00", TimeRange(at(2023, 5, 8, 1), at(2023, 5, 8, 1, 0, 1), "second")),
    ("2023-05-08T23:30:00-05:00", TimeRange(at(2023, 5, 9, 4, 30), at(2023, 5, 9, 4, 30, 1), "second")),
    (
        "2023-05-08T10:00:00.250Z",
        TimeRange(
            at(2023, 5, 8, 10) + timedelta(microseconds=250000),
            at(2023, 5, 8, 10) + timedelta(microseconds=250001),
            "microsecond",
        ),
    ),
    ("2023/05/08", day(2023, 5, 8)),
    ("2023.5.8", day(2023, 5, 8)),
    ("2023. 5. 8.", day(2023, 5, 8)),
    ("2023-05", month(2023, 5)),
    # absolute dates in common forms
    ("8 May 2023", day(2023, 5, 8)),
    ("8 May, 2023", day(2023, 5, 8)),
    ("8th of May 2023", day(2023, 5, 8)),
    ("the 8th of May, 2023", day(2023, 5, 8)),
    ("May 8, 2023", day(2023, 5, 8)),
    ("May 8th 2023", day(2023, 5, 8)),
    ("Monday, May 8, 2023", day(2023, 5, 8)),
    ("Sept. 3, 2022", day(2022, 9, 3)),
    ("on 8 may 2023", day(2023, 5, 8)),
    ("MAY 8 2023", day(2023, 5, 8)),
    ("May 2023", month(2023, 5)),
    ("in May 2023", month(2023, 5)),
    ("May of 2023", month(2023, 5)),
    ("Dec 2021", month(2021, 12)),
    ("2023", year(2023)),
    ("in 2023", year(2023)),
    ("the year 2019", year(2019)),
    # a month or month-day with no year: the most recent not after the anchor (2024-03-13)
    ("May", month(2023, 5)),
    ("in May", month(2023, 5)),
    ("March", month(2024, 3)),
    ("February", month(2024, 2)),
    ("December", month(2023, 12)),
    ("May 8", day(2023, 5, 8)),
    ("March 13", day(2024, 3, 13)),
    ("March 14", day(2023, 3, 14)),
    ("last May", month(2023, 5)),
    ("last March", month(2023, 3)),
    ("last February", month(2024, 2)),
    ("this May", month(2024, 5)),
    ("next May", month(2024, 5)),
    ("next March", month(2025, 3)),
    ("next February", month(2025, 2)),
    # weekdays (Wednesday anchor)
    ("Monday", day(2024, 3, 11)),
    ("on Monday", day(2024, 3, 11)),
    ("Wednesday", day(2024, 3, 13)),
    ("Thursday", day(2024, 3, 7)),
    ("last Friday", day(2024, 3, 8)),
    ("last Monday", day(2024, 3, 11)),
    ("last Wednesday", day(2024, 3, 6)),
    ("this Friday", day(2024, 3, 15)),
    ("this Monday", day(2024, 3, 11)),
    ("next Friday", day(2024, 3, 15)),
    ("next Wednesday", day(2024, 3, 20)),
    ("this coming Sunday", day(2024, 3, 17)),
    ("Friday last week", day(2024, 3, 8)),
    ("Monday next week", day(2024, 3, 18)),
    # relative days
    ("yesterday", day(2024, 3, 12)),
    ("today", day(2024, 3, 13)),
    ("Today", day(2024, 3, 13)),
    ("tonight", day(2024, 3, 13)),
    ("this morning", day(2024, 3, 13)),
    ("last night", day(2024, 3, 12)),
    ("tomorrow", day(2024, 3, 14)),
    ("the day before yesterday", day(2024, 3, 11)),
    ("the day after tomorrow", day(2024, 3, 15)),
    ("3 days ago", day(2024, 3, 10)),
    ("three days ago", day(2024, 3, 10)),
    ("a day ago", day(2024, 3, 12)),
    ("13 days ago", day(2024, 2, 29)),
    ("in 3 days", day(2024, 3, 16)),
    ("3 days from now", day(2024, 3, 16)),
    # relative weeks, months, years, hours
    ("two weeks ago", week(2024, 2, 26)),
    ("a week ago", week(2024, 3, 4)),
    ("a couple of weeks ago", week(2024, 2, 26)),
    ("last week", week(2024, 3, 4)),
    ("this week", week(2024, 3, 11)),
    ("next week", week(2024, 3, 18)),
    ("the previous week", week(2024, 3, 4)),
    ("the following week", week(2024, 3, 18)),
    ("last weekend", TimeRange(at(2024, 3, 9), at(2024, 3, 11), "weekend")),
    ("this weekend", TimeRange(at(2024, 3, 16), at(2024, 3, 18), "weekend")),
    ("last month", month(2024, 2)),
    ("this month", month(2024, 3)),
    ("next month", month(2024, 4)),
    ("3 months ago", month(2023, 12)),
    ("in two months", month(2024, 5)),
    ("last year", year(2023)),
    ("this year", year(2024)),
    ("next year", year(2025)),
    ("two years ago", year(2022)),
    ("5 hours ago", TimeRange(at(2024, 3, 13, 10), at(2024, 3, 13, 11), "hour")),
    ("an hour ago", TimeRange(at(2024, 3, 13, 14), at(2024, 3, 13, 15), "hour")),
    ("10 minutes ago", TimeRange(at(2024, 3, 13, 14, 50), at(2024, 3, 13, 14, 51), "minute")),
    # "the week before": relative to the anchor alone, to the date when one follows
    ("the week before", week(2024, 3, 4)),
    ("the day before", day(2024, 3, 12)),
    ("the week after", week(2024, 3, 18)),
    ("the year before last", year(2022)),
    ("the week before 9 June 2023", week(2023, 5, 29)),
    ("the day after May 8, 2023", day(2023, 5, 9)),
    ("two days before 2023-05-08", day(2023, 5, 6)),
    ("the month before May 2023", month(2023, 4)),
    ("the year after 2020", year(2021)),
    # seasons (northern, meteorological)
    ("last summer", season(2023, 6)),
    ("this summer", season(2024, 6)),
    ("next summer", season(2024, 6)),
    ("summer 2022", season(2022, 6)),
    ("the summer of 2022", season(2022, 6)),
    ("winter", season(2023, 12)),
    ("last winter", season(2023, 12)),  # in March, the winter just past
    ("in the spring", season(2024, 3)),
    ("last fall", season(2023, 9)),
    # whitespace and punctuation around the expression
    ("  last   week. ", week(2024, 3, 4)),
    ("Yesterday!", day(2024, 3, 12)),
]


@pytest.mark.parametrize(("expression", "expected"), ENGLISH, ids=[c[0] for c in ENGLISH])
def test_resolve_english(expression: str, expected: TimeRange) -> None:
    assert resolve(expression, ANCHOR) == expected


# ------------------------------------------------------------------------------------------------- resolve: Korean

KOREAN = [
    ("2023년 5월 8일", day(2023, 5, 8)),
    ("2023년5월8일", day(2023, 5, 8)),
    ("2023년 5월", month(2023, 5)),
    ("2023년", year(2023)),
    ("5월 8일", day(2023, 5, 8)),
    ("3월 13일", day(2024, 3, 13)),
    ("3월 14일", day(2023, 3, 14)),
    ("5월", month(2023, 5)),
    ("3월", month(2024, 3)),
    ("지난 5월", month(2023, 5)),
    ("지난 2월", month(2024, 2)),
    ("이번 5월", month(2024, 5)),
    ("다음 3월", month(2025, 3)),
    ("올해 5월", month(2024, 5)),
    ("작년 5월", month(2023, 5)),
    ("작년 12월 25일", day(2023, 12, 25)),
    ("내년 1월", month(2025, 1)),
    # weekdays
    ("월요일", day(2024, 3, 11)),
    ("월요일에", day(2024, 3, 11)),
    ("수요일", day(2024, 3, 13)),
    ("지난 금요일", day(2024, 3, 8)),
    ("지난 수요일", day(2024, 3, 6)),
    ("이번 금요일", day(2024, 3, 15)),
    ("다음 금요일", day(2024, 3, 15)),
    ("지난주 금요일", day(2024, 3, 8)),
    ("지난 주 월요일", day(2024, 3, 4)),
    ("이번 주 일요일", day(2024, 3, 17)),
    ("다음 주 월요일", day(2024, 3, 18)),
    # relative days
    ("어제", day(2024, 3, 12)),
    ("어제는", day(2024, 3, 12)),
    ("어제부터", day(2024, 3, 12)),
    ("어젯밤", day(2024, 3, 12)),
    ("그저께", day(2024, 3, 11)),
    ("그제", day(2024, 3, 11)),
    ("오늘", day(2024, 3, 13)),
    ("내일", day(2024, 3, 14)),
    ("모레", day(2024, 3, 15)),
    ("3일 전", day(2024, 3, 10)),
    ("3일전", day(2024, 3, 10)),
    ("이틀 전", day(2024, 3, 11)),
    ("하루 전", day(2024, 3, 12)),
    ("3일 후", day(2024, 3, 16)),
    ("사흘 뒤", day(2024, 3, 16)),
    # relative weeks, months, years, hours
    ("2주 전", week(2024, 2, 26)),
    ("일주일 전", week(2024, 3, 4)),
    ("두 주 전", week(2024, 2, 26)),
    ("지난 주", week(2024, 3, 4)),
    ("지난주", week(2024, 3, 4)),
    ("지난주에", week(2024, 3, 4)),
    ("저번 주", week(2024, 3, 4)),
    ("지지난주", week(2024, 2, 26)),
    ("이번 주", week(2024, 3, 11)),
    ("이번주", week(2024, 3, 11)),
    ("다음 주", week(2024, 3, 18)),
    ("지난 주말", TimeRange(at(2024, 3, 9), at(2024, 3, 11), "weekend")),
    ("지난 달", month(2024, 2)),
    ("지난달", month(2024, 2)),
    ("이번 달", month(2024, 3)),
    ("다음 달", month(2024, 4)),
    ("한 달 전", month(2024, 2)),
    ("3개월 전", month(2023, 12)),
    ("작년", year(2023)),
    ("지난해", year(2023)),
    ("재작년", year(2022)),
    ("올해", year(2024)),
    ("내년", year(2025)),
    ("2년 전", year(2022)),
    ("5시간 전", TimeRange(at(2024, 3, 13, 10), at(2024, 3, 13, 11), "hour")),
    # seasons
    ("작년 여름", season(2023, 6)),
    ("올 여름", season(2024, 6)),
    ("지난 겨울", season(2023, 12)),
    ("2022년 가을", season(2022, 9)),
]


@pytest.mark.parametrize(("expression", "expected"), KOREAN, ids=[c[0] for c in KOREAN])
def test_resolve_korean(expression: str, expected: TimeRange) -> None:
    assert resolve(expression, ANCHOR) == expected


# --------------------------------------------------------------------------------------- resolve: other anchors

EDGES = [
    # year boundary: Monday 2024-01-01
    (at(2024, 1, 1, 9), "yesterday", day(2023, 12, 31)),
    (at(2024, 1, 1, 9), "last week", week(2023, 12, 25)),
    (at(2024, 1, 1, 9), "this week", week(2024, 1, 1)),
    (at(2024, 1, 1, 9), "last month", month(2023, 12)),
    (at(2024, 1, 1, 9), "지난달", month(2023, 12)),
    (at(2024, 1, 1, 9), "last year", year(2023)),
    (at(2024, 1, 1, 9), "작년", year(2023)),
    (at(2024, 1, 1, 9), "December", month(2023, 12)),
    (at(2024, 1, 1, 9), "12월 31일", day(2023, 12, 31)),
    (at(2024, 1, 1, 9), "last Sunday", day(2023, 12, 31)),
    (at(2024, 1, 1, 9), "3 days ago", day(2023, 12, 29)),
    (at(2024, 1, 1, 9), "this winter", season(2023, 12)),
    (at(2024, 1, 1, 9), "last winter", season(2022, 12)),
    # year boundary: Sunday 2023-12-31
    (at(2023, 12, 31, 23, 59), "tomorrow", day(2024, 1, 1)),
    (at(2023, 12, 31, 23, 59), "next week", week(2024, 1, 1)),
    (at(2023, 12, 31, 23, 59), "next month", month(2024, 1)),
    (at(2023, 12, 31, 23, 59), "next year", year(2024)),
    (at(2023, 12, 31, 23, 59), "내일", day(2024, 1, 1)),
    # "last week" on a Monday and on a Sunday: the same previous ISO week
    (at(2024, 3, 11), "last week", week(2024, 3, 4)),
    (at(2024, 3, 17, 23), "last week", week(2024, 3, 4)),
    (at(2024, 3, 11), "지난 주", week(2024, 3, 4)),
    (at(2024, 3, 17, 23), "지난 주", week(2024, 3, 4)),
    (at(2024, 3, 17, 23), "this week", week(2024, 3, 11)),
    (at(2024, 3, 17, 23), "Sunday", day(2024, 3, 17)),
    (at(2024, 3, 17, 23), "last Sunday", day(2024, 3, 10)),
    (at(2024, 3, 11), "Monday", day(2024, 3, 11)),
    (at(2024, 3, 11), "last Monday", day(2024, 3, 4)),
    (at(2024, 3, 11), "next Monday", day(2024, 3, 18)),
    # leap day
    (at(2024, 3, 1, 8), "yesterday", day(2024, 2, 29)),
    (at(2024, 3, 1, 8), "어제", day(2024, 2, 29)),
    (at(2024, 2, 29, 8), "today", day(2024, 2, 29)),
    (at(2024, 2, 29, 8), "a year ago", year(2023)),
    (at(2025, 6, 1), "Feb 29", day(2024, 2, 29)),
    (at(2025, 6, 1), "2월 29일", day(2024, 2, 29)),
    (at(2024, 2, 28), "Feb 29", day(2020, 2, 29)),
    (at(2024, 3, 31), "a month ago", month(2024, 2)),
    # "May" when the anchor is in March, in May and in June
    (at(2024, 3, 13), "May", month(2023, 5)),
    (at(2024, 5, 20), "May", month(2024, 5)),
    (at(2024, 6, 2), "May", month(2024, 5)),
    (at(2024, 3, 13), "last May", month(2023, 5)),
    (at(2024, 5, 20), "last May", month(2023, 5)),
    (at(2024, 6, 2), "last May", month(2024, 5)),
    (at(2024, 5, 20), "next May", month(2025, 5)),
    (at(2024, 6, 2), "5월", month(2024, 5)),
    (at(2024, 6, 2), "지난 5월", month(2024, 5)),
    (at(2024, 5, 20), "지난 5월", month(2023, 5)),
    # the anchor's own offset: 01:00 in Seoul is still the previous day in UTC
    (datetime(2024, 3, 14, 1, 0, tzinfo=timezone(timedelta(hours=9))), "today", day(2024, 3, 13)),
    (datetime(2024, 3, 13, 20, 0, tzinfo=timezone(timedelta(hours=-5))), "today", day(2024, 3, 14)),
]


@pytest.mark.parametrize(("anchor", "expression", "expected"), EDGES, ids=[f"{a:%Y-%m-%d %a}:{e}" for a, e, _ in EDGES])
def test_resolve_edges(anchor: datetime, expression: str, expected: TimeRange) -> None:
    assert resolve(expression, anchor) == expected


NOT_EXPRESSIONS = [
    "",
    "   ",
    "hello",
    "May I ask",
    "I may go",
    "a second opinion",
    "second",
    "March on",
    "the sun",
    "sun",
    "wed",
    "Sat",
    "Mondays",
    "every Monday",
    "yesterday and today",  # two expressions, not one
    "2023-13-01",
    "2023-02-29",
    "31 February 2023",
    "2월 30일",
    "13월",
    "May 45",
    "3 days",
    "3 days before",  # relative to an unknown event
    "오늘날",
    "그제서야",
    "since last week",  # "since" changes the meaning; a caller passes the bound itself
    "12345",
]


@pytest.mark.parametrize("expression", NOT_EXPRESSIONS)
def test_resolve_returns_none_for_what_is_not_one_temporal_expression(expression: str) -> None:
    assert resolve(expression, ANCHOR) is None


def test_a_naive_anchor_is_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        resolve("yesterday", datetime(2024, 3, 13))
    with pytest.raises(ValueError, match="timezone-aware"):
        mentions("yesterday", datetime(2024, 3, 13))


def test_ranges_are_utc_and_contain_what_they_name() -> None:
    r = resolve("2023-05-08T10:00:00+09:00", ANCHOR)
    assert r is not None and r.start.tzinfo is UTC and r.end.tzinfo is UTC
    today = resolve("today", ANCHOR)
    assert today is not None and ANCHOR in today and today.end not in today and today.start in today
    assert "not a datetime" not in today


# ------------------------------------------------------------------------------------------------------- mentions


def found(text: str, anchor: datetime = ANCHOR) -> list[tuple[str, TimeRange]]:
    result = mentions(text, anchor)
    for m in result:
        assert text[m.start : m.end] == m.text and m.span == (m.start, m.end)
    assert all(a.end <= b.start for a, b in zip(result, result[1:], strict=False)), "in order, not overlapping"
    return [(m.text, m.range) for m in result]


MENTIONS = [
    ("Yesterday I met Caroline at the LGBTQ support group.", [("Yesterday", day(2024, 3, 12))]),
    (
        "I moved here in 2019, started the job last May and quit two weeks ago.",
        [("2019", year(2019)), ("last May", month(2023, 5)), ("two weeks ago", week(2024, 2, 26))],
    ),
    ("[1:56 pm on 8 May, 2023] Caroline: Hey Mel!", [("8 May, 2023", day(2023, 5, 8))]),
    ("The meeting was moved to Monday, May 8, 2023 at noon.", [("Monday, May 8, 2023", day(2023, 5, 8))]),
    ("She painted it the week before 9 June 2023.", [("the week before 9 June 2023", week(2023, 5, 29))]),
    ("We went camping the week before, it rained.", [("the week before", week(2024, 3, 4))]),
    (
        "Deadline: 2024-04-01. Kickoff was on 2024-03-01T09:30:00Z.",
        [
            ("2024-04-01", day(2024, 4, 1)),
            ("2024-03-01T09:30:00Z", TimeRange(at(2024, 3, 1, 9, 30), at(2024, 3, 1, 9, 30, 1), "second")),
        ],
    ),
    (
        "In May we planted tomatoes; since March 2023 the garden is ours.",
        [
            ("May", month(2023, 5)),
            ("March 2023", month(2023, 3)),
        ],
    ),
    (
        "I saw her last Friday and again this morning.",
        [
            ("last Friday", day(2024, 3, 8)),
            ("this morning", day(2024, 3, 13)),
        ],
    ),
    (
        "Let's meet next week, maybe on Thursday next week.",
        [
            ("next week", week(2024, 3, 18)),
            ("Thursday next week", day(2024, 3, 21)),
        ],
    ),
    (
        "We fly out in 3 days and come back 2 weeks from now.",
        [
            ("in 3 days", day(2024, 3, 16)),
            ("2 weeks from now", week(2024, 3, 25)),
        ],
    ),
    (
        "Last summer was hot, and in the winter of 2022 it snowed.",
        [
            ("Last summer", season(2023, 6)),
            ("winter of 2022", season(2022, 12)),
        ],
    ),
    (
        "어제 친구를 만났고 지난주 금요일에 영화를 봤다.",
        [
            ("어제", day(2024, 3, 12)),
            ("지난주 금요일", day(2024, 3, 8)),
        ],
    ),
    ("5월 3일 전에 끝내기로 했다.", [("5월 3일", day(2023, 5, 3))]),
    (
        "3일 전에 서울에 갔고, 작년 여름에는 부산에 있었다.",
        [
            ("3일 전", day(2024, 3, 10)),
            ("작년 여름", season(2023, 6)),
        ],
    ),
    (
        "2023년 5월 8일에 입사했고 올해부터 팀장이다.",
        [
            ("2023년 5월 8일", day(2023, 5, 8)),
            ("올해", year(2024)),
        ],
    ),
    (
        "지난 달에 이사했고 다음 주 월요일에 출근한다.",
        [
            ("지난 달", month(2024, 2)),
            ("다음 주 월요일", day(2024, 3, 18)),
        ],
    ),
    (
        "그저께 이틀 전 일주일 전",
        [
            ("그저께", day(2024, 3, 11)),
            ("이틀 전", day(2024, 3, 11)),
            ("일주일 전", week(2024, 3, 4)),
        ],
    ),
    (
        "Yesterday 어제 and 2023년 were all dates",
        [
            ("Yesterday", day(2024, 3, 12)),
            ("어제", day(2024, 3, 12)),
            ("2023년", year(2023)),
        ],
    ),
]


@pytest.mark.parametrize(("text", "expected"), MENTIONS, ids=[c[0][:40] for c in MENTIONS])
def test_mentions(text: str, expected: list[tuple[str, TimeRange]]) -> None:
    assert found(text) == expected


def test_mentions_resolve_against_the_rows_own_time() -> None:
    text = "Yesterday I met Caroline at the LGBTQ support group."
    assert found(text, at(2023, 5, 8, 13, 56)) == [("Yesterday", day(2023, 5, 7))]
    assert found(text, at(2023, 7, 1)) == [("Yesterday", day(2023, 6, 30))]


def test_mention_objects() -> None:
    (m,) = mentions("Met her last week.", ANCHOR)
    assert m == Mention(8, 17, "last week", week(2024, 3, 4))
    assert m.span == (8, 17)


NO_MENTIONS = [
    "May I ask you something?",
    "I may go to the party.",
    "You may want a second opinion.",
    "This may be the one.",
    "It may rain; they may 2x the price.",
    "Steps 3 may fail.",
    "March on, soldiers!",
    "We march on together.",
    "Wait a second.",
    "It was the second time I asked.",
    "I'll be there in a second.",
    "Let the sun shine.",
    "We sat on the mat and wed in June?"[:30],  # "June" is cut off: "sat", "wed", "sun" are not weekdays
    "June said hi to April and August.",
    "Jan is my friend; Dec and Oct are nicknames.",
    "I fall often. Spring cleaning. A winter coat.",
    "Mondays are hard. I swim every Monday. 매주 월요일에 수영한다.",
    "In 2000 people came. Room 2023 is free. We waited 1500 ms.",
    "오늘날의 기술은 놀랍다. 그제서야 알았다. 지난 주인공은 떠났다.",
    "3일 동안 비가 왔다. 전화를 했다. 봄을 봄.",
    "version 1.2.3 released, build 2023 done",
    "I ran 5 km in 25 minutes.",
    "It took me 3 days; I have painted for 7 years.",
]


@pytest.mark.parametrize("text", NO_MENTIONS)
def test_no_false_positives(text: str) -> None:
    assert found(text) == []


def test_lower_case_may_counts_only_with_a_year_or_last_next() -> None:
    assert found("on 8 may 2023 we met") == [("8 may 2023", day(2023, 5, 8))]
    assert found("we met last may") == [("last may", month(2023, 5))]
    assert found("we met in may") == []
    assert found("we met in May") == [("May", month(2023, 5))]


def test_a_cue_makes_a_bare_year_or_month_a_date_but_is_not_part_of_the_mention() -> None:
    assert found("since 2019") == [("2019", year(2019))]
    assert found("until the end of 2022") == [("2022", year(2022))]
    assert found("in early June") == [("June", month(2023, 6))]
    assert found("between 2010 and 2012") == [("2010", year(2010))]  # "and 2012": no cue, see the limits
    assert found("2019") == []
    assert found("June") == []


# ------------------------------------------------------------------------------------------ is_temporal_question

TEMPORAL_QUESTIONS = [
    "When did Caroline go to the LGBTQ support group?",
    "when is the meeting",
    "What year did Melanie start painting?",
    "Which month was the trip?",
    "What date is the deadline?",
    "How long ago did they move?",
    "How long has she been running?",
    "How many years has John worked there?",
    "Since when do you know her?",
    "언제 이사했어?",
    "몇 년 전에 입사했지?",
    "몇 월에 여행 갔어?",
    "며칠에 만났어?",
    "무슨 요일에 회의해?",
    "얼마나 오래 살았어?",
]
NOT_TEMPORAL_QUESTIONS = [
    "What did Caroline paint?",
    "Who is Melanie's husband?",
    "Where did they go on the trip?",
    "Why did she move?",
    "What is her favourite book?",
    "How many kids does Melanie have?",
    "몇 명이 왔어?",
    "어디에 살아?",
    "무엇을 샀어?",
]


@pytest.mark.parametrize("question", TEMPORAL_QUESTIONS)
def test_temporal_questions(question: str) -> None:
    assert is_temporal_question(question)


@pytest.mark.parametrize("question", NOT_TEMPORAL_QUESTIONS)
def test_not_temporal_questions(question: str) -> None:
    assert not is_temporal_question(question)


# ---------------------------------------------------------------------------------------------------- properties

anchors = st.datetimes(
    min_value=datetime(1990, 1, 1),
    max_value=datetime(2090, 12, 31),
    timezones=st.sampled_from([UTC, timezone(timedelta(hours=9)), timezone(timedelta(hours=-7, minutes=-30))]),
)
RELATIVE = [
    "yesterday",
    "today",
    "tomorrow",
    "3 days ago",
    "two weeks ago",
    "last week",
    "this week",
    "next month",
    "last year",
    "last May",
    "May",
    "next February",
    "the week before",
    "last Friday",
    "Sunday",
    "next Monday",
    "last weekend",
    "last winter",
    "this winter",
    "5 hours ago",
    "어제",
    "그저께",
    "오늘",
    "내일",
    "3일 전",
    "2주 전",
    "지난 주",
    "이번 주",
    "지난 달",
    "작년",
    "올해",
    "지난 5월",
    "지난주 금요일",
    "12월 31일",
    "Feb 29",
]
CONTAINS_ANCHOR = ["today", "this week", "this month", "this year", "오늘", "이번 주", "이번 달", "올해"]
CONTAINS_ANCHOR_DAY_START = ["May", "Sunday", "12월 31일", "Feb 29"]  # "not after the anchor": start <= anchor


@settings(max_examples=150, deadline=None)
@given(anchor=anchors)
def test_every_relative_expression_resolves_to_a_non_empty_utc_range(anchor: datetime) -> None:
    for expression in RELATIVE:
        r = resolve(expression, anchor)
        assert r is not None, expression
        assert r.start < r.end and r.start.tzinfo is UTC and r.end.tzinfo is UTC, expression
        if r.granularity == "day":
            assert r.end - r.start == timedelta(days=1) and r.start.hour == 0
        if r.granularity == "week":
            assert r.end - r.start == timedelta(days=7) and r.start.weekday() == 0
        if r.granularity in ("month", "season", "year"):
            assert r.start.day == 1 and r.end.day == 1
    for expression in CONTAINS_ANCHOR:
        assert anchor in resolve(expression, anchor), expression  # type: ignore[operator]
    for expression in CONTAINS_ANCHOR_DAY_START:
        r = resolve(expression, anchor)
        assert r is not None and r.start <= anchor, expression
        assert r.start > anchor - timedelta(days=366 * 4 + 1 if expression == "Feb 29" else 366), expression


@settings(max_examples=150, deadline=None)
@given(anchor=anchors)
def test_relative_ranges_fit_together(anchor: datetime) -> None:
    def r(expression: str) -> TimeRange:
        found = resolve(expression, anchor)
        assert found is not None, expression
        return found

    assert r("yesterday").end == r("today").start and r("today").end == r("tomorrow").start
    assert r("last week").end == r("this week").start == r("지난 주").end
    assert r("last month").end == r("this month").start
    assert r("작년").end == r("올해").start
    assert r("3 days ago").start == r("today").start - timedelta(days=3) == r("3일 전").start
    assert r("the week before") == r("last week") == r("1 week ago")
    assert r("last Friday").end <= r("today").start and r("last Friday").start.weekday() == 4
    assert r("last Friday").start > r("today").start - timedelta(days=8)
    last_may = r("last May")
    assert last_may.end <= r("this month").start and last_may.start.month == 5
    assert r("May").start <= anchor < r("next May").start


@settings(max_examples=100, deadline=None)
@given(
    anchor=anchors,
    parts=st.lists(
        st.sampled_from(["yesterday", "last week", "어제", "지난 주", "on 8 May 2023", "in 2019"]), max_size=5
    ),
    filler=st.sampled_from([" and then ", ", 그리고 ", ". We met ", " — "]),
)
def test_mentions_of_joined_expressions(anchor: datetime, parts: list[str], filler: str) -> None:
    text = "Note: " + filler.join(parts) + "."
    result = mentions(text, anchor)
    assert len(result) == len(parts)
    for mention, part in zip(result, parts, strict=True):
        assert text[mention.start : mention.end] == mention.text
        assert mention.range == resolve(part, anchor)

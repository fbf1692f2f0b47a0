"""Temporal expressions in English and Korean, resolved to half-open UTC ranges (issue 28 item 2, issue 30 item 3).

Pure functions, no I/O. `resolve(expression, anchor)` turns one expression ("3 days ago", "지난 주", "May 8, 2023")
into a `TimeRange` [start, end) at the granularity the expression names; `mentions(text, anchor)` finds every such
expression inside a free text; `is_temporal_question(text)` says whether a question asks about time. The anchor is
the moment the text was written (a row's own time; "now" for a query) and must be timezone-aware; everything is
resolved in UTC, so "yesterday" is the UTC day before the anchor's UTC day.

Why not a library: `dateparser` 1.5 was measured on these cases (2 cores, a benchmark running): 0.2 s to import plus
0.2 s for its first parse, 0.7-3 ms per `parse` (22 ms for "2023년 5월 8일"), 17-25 ms per `search_dates` over 300
characters. It returns instants, not ranges; it misses "지난 주", "지난 달", "지난 금요일", "그저께", "last May" and
"the week before"; and `search_dates` reports "May we", "a second", "we" and "march" as dates. So this is a
table-driven parser: word tables per language, one small regex per form, 0.05-0.3 ms per 300-character text.

Rules (the anchor's UTC day is "today"; weeks are ISO weeks, Monday first):
- ISO date "2023-05-08" (also 2023/05/08, 2023.05.08, "2023. 5. 8."): that day. ISO month "2023-05": that month. ISO
  instant "2023-05-08T10:00:00Z" (an offset is converted; none means UTC): one unit of the finest field given, e.g.
  [10:00:00, 10:00:01) for seconds, [t, t + 1 µs) with a fraction.
- "8 May 2023", "May 8, 2023", "2023년 5월 8일": that day; "May 2023", "2023년 5월": that month; "2023",
  "2023년": that year.
- A month with no year ("May", "in May", "5월") is the most recent May whose first day is not after the anchor: in
  March 2024 it is May 2023, in June 2024 (or in May 2024) it is May 2024. "last May"/"지난 5월" is the most recent
  May strictly before the anchor's month; "this May"/"이번 5월" is May of the anchor's year; "next May" the first May
  after the anchor's month. A month and day with no year ("May 8", "5월 8일") follow the bare-month rule: the most
  recent such date on or before the anchor's day (Feb 29 goes back to the last leap year).
- Seasons (northern meteorological: spring Mar-May, summer Jun-Aug, autumn Sep-Nov, winter Dec-Feb, winter 2023 =
  Dec 2023-Feb 2024) follow the same rules as months: "last winter" in March 2024 is the one that just ended.
- A weekday alone or "on Monday"/"월요일" is the most recent such day on or before the anchor's day (today if it is
  that day); "last Friday"/"지난 금요일" the most recent one strictly before it; "next Friday"/"다음 금요일" the first
  one strictly after it; "this Friday"/"이번 금요일" the one in the anchor's week; "Friday last week"/"지난주 금요일"
  the one in the previous week.
- "yesterday"/"어제", "today"/"오늘", "tomorrow"/"내일", "그저께" (-2), "모레" (+2), ...: that day;
  "last night"/"어젯밤" is yesterday. "3 days ago"/"3일 전": that day; "two weeks ago"/"2주 전": that week;
  "3 months ago": that month; "5 hours ago": that hour; "in 3 days"/"3일 후": that day, and so on.
- "last week"/"지난 주" is the previous ISO week; "this week", "next month", "last year"/"작년", "올해", "재작년" (-2):
  the named calendar unit; "last weekend"/"지난 주말": Saturday-Sunday of the previous week.
- "the week before" (alone) is the week before the anchor's week, and likewise "the day after", "the year before
  last" (-2); followed by a date ("the week before 9 June 2023", "two days after May 8, 2023") it is relative to
  that date's start instead. "N days before" with no date after it is relative to an unknown event: not a mention.

Deliberately not matched, to keep false positives out of memories: modal "may" ("May I ask", "I may go", "this may
be"): a lower-case "may" counts only with a year or as "last/next may", and a capitalised bare "May" needs a cue
("in", "since", "last", ...); likewise a bare month ("March on", "June said"), a bare year ("2023", "2000 people") or
a season ("spring cleaning") need a cue inside a text (`resolve` of the whole expression needs none); weekday and
month abbreviations ("sun", "wed", "sat", "mar") count only inside a full date ("Mar 8, 2023"); "second" is never a
unit; "every Monday", "매주 월요일" and "Mondays" are habits, not dates.

Limits: durations ("for three days", "3일 동안"), times of day ("at 3pm"), vague words ("recently", "a few days
ago"), "from 2019 to 2021" (only 2019 is found) and slashed day-month orders ("05/08/2023", US or not) are out of
scope. Tense is not read: a month or weekday with no qualifier is taken in the past ("on Friday" in "I'll see her on
Friday" is the last Friday), and "in 3 days" is taken as future even where it is a duration ("read it in 3 days").
"Sunday school" and "Good Friday" are taken as weekdays.

For a time filter over [from, to]: take `resolve(from).start` and `resolve(to).end`, so "to: last week" includes the
whole of last week.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, timezone
from itertools import repeat
from typing import Literal

__all__ = ["Granularity", "Mention", "TimeRange", "is_temporal_question", "mentions", "resolve"]

Granularity = Literal["microsecond", "second", "minute", "hour", "day", "weekend", "week", "month", "season", "year"]


@dataclass(frozen=True, slots=True)
class TimeRange:
    """Half-open [start, end) in UTC; `granularity` is the unit the expression named."""

    start: datetime
    end: datetime
    granularity: Granularity

    def __contains__(self, moment: object) -> bool:
        return isinstance(moment, datetime) and self.start <= moment < self.end


@dataclass(frozen=True, slots=True)
class Mention:
    """One temporal expression in a text: `text == source[start:end]`, resolved against the text's anchor."""

    start: int
    end: int
    text: str
    range: TimeRange

    @property
    def span(self) -> tuple[int, int]:
        return (self.start, self.end)


# ---------------------------------------------------------------------------------------------------------- tables

_MONTHS_FULL = {
    "january": 1,
    "february": 2,
    "march": 3,
    "april": 4,
    "may": 5,
    "june": 6,
    "july": 7,
    "august": 8,
    "september": 9,
    "october": 10,
    "november": 11,
    "december": 12,
}
_MONTHS_ABBR = {
    "jan": 1,
    "feb": 2,
    "mar": 3,
    "apr": 4,
    "jun": 6,
    "jul": 7,
    "aug": 8,
    "sep": 9,
    "sept": 9,
    "oct": 10,
    "nov": 11,
    "dec": 12,
}
_MONTHS = _MONTHS_FULL | _MONTHS_ABBR
_WEEKDAYS = {"monday": 0, "tuesday": 1, "wednesday": 2, "thursday": 3, "friday": 4, "saturday": 5, "sunday": 6}
_KO_WEEKDAYS = {"월": 0, "화": 1, "수": 2, "목": 3, "금": 4, "토": 5, "일": 6}
_SEASON_START = {
    "spring": 3,
    "summer": 6,
    "autumn": 9,
    "fall": 9,
    "winter": 12,
    "봄": 3,
    "여름": 6,
    "가을": 9,
    "겨울": 12,
}
_EN_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "a couple of": 2,
    "a couple": 2,
    "couple of": 2,
}
# Native Korean counts: days have their own words; weeks, months, years and hours take 한, 두, 세, ...
_KO_DAY_COUNTS = {"하루": 1, "이틀": 2, "사흘": 3, "나흘": 4, "닷새": 5, "엿새": 6, "이레": 7, "열흘": 10}
_KO_NUMBERS = {"한": 1, "두": 2, "세": 3, "네": 4, "다섯": 5, "여섯": 6, "일곱": 7, "여덟": 8, "아홉": 9, "열": 10}
_EN_UNITS = {u: u for u in ("minute", "hour", "day", "week", "weekend", "month", "year")}
_KO_UNITS = {"분": "minute", "시간": "hour", "일": "day", "주": "week", "주일": "week", "개월": "month", "달": "month"}
_KO_UNITS |= {"년": "year", "해": "year"}
_EN_DAY_WORDS = {
    "the day before yesterday": -2,
    "the day after tomorrow": 2,
    "yesterday": -1,
    "last night": -1,
    "today": 0,
    "tonight": 0,
    "this morning": 0,
    "this afternoon": 0,
    "this evening": 0,
    "tomorrow": 1,
}
_KO_DAY_WORDS = {
    "그끄저께": -3,
    "그끄제": -3,
    "그저께": -2,
    "그제": -2,
    "어저께": -1,
    "어젯밤": -1,
    "어제": -1,
    "오늘밤": 0,
    "오늘": 0,
    "내일모레": 2,
    "내일": 1,
    "모레": 2,
    "글피": 3,
}
# "last"/"지난" and friends: the offset in units from the anchor's own unit.
_EN_STEP = {"last": -1, "previous": -1, "this": 0, "next": 1, "coming": 1, "following": 1}
_KO_STEP = {"지지난": -2, "지난": -1, "저번": -1, "이번": 0, "다음": 1, "오는": 1, "다다음": 2}
_KO_YEAR_WORDS = {"재작년": -2, "작년": -1, "지난해": -1, "올해": 0, "금년": 0, "올": 0, "내년": 1, "내후년": 2}
_KO_PERIOD_UNITS = {"주말": "weekend", "주": "week", "달": "month", "해": "year"}


def _alt(words: object) -> str:
    """A regex alternation of the words, longest first so a prefix never wins over the whole word."""
    return "|".join(re.escape(w).replace(r"\ ", r"\s+") for w in sorted(words, key=len, reverse=True))  # type: ignore[call-overload]


_MONTH_ANY = _alt(_MONTHS)
_MONTH_FULL = _alt(_MONTHS_FULL)
_WEEKDAY = _alt(_WEEKDAYS)
_EN_NUM = r"\d{1,3}|" + _alt(_EN_NUMBERS)
_EN_UNIT = _alt(_EN_UNITS)
_STEP = _alt(_EN_STEP)
# A Korean word ends where a particle or a non-Hangul character starts ("어제는", "지난주에"), but not inside a longer
# word: "오늘날" (nowadays), "그제서야" (only then), "지난 주인" (the last owner) are not dates.
_KO_END = r"(?=[^가-힣]|$|에|엔|의|은|는|이|가|을|를|도|부터|까지|쯤|경|께|동안|내내|중|로|처럼|만|와|과|하고)"
_KO_START = r"(?<![가-힣])"


def _hangul_before(text: str, index: int) -> bool:
    """Whether a Korean word at `index` continues another one ("그어제"): then it is not the word it looks like.

    Checked in code rather than with `(?<![가-힣])` in each pattern: a lookbehind at a pattern's start keeps the regex
    engine from skipping ahead to the word's first character, and a Hangul class costs milliseconds to compile.
    """
    return index > 0 and "가" <= text[index - 1] <= "힣"


# A four-digit number followed by one of these is a quantity, not a year ("in 2000 ms", "by 2048 tokens").
_NOT_YEAR = (
    r"(?!\s*(?:%|[-./:]\d|(?:ms|s|sec|seconds?|minutes?|hours?|days?|km|kg|kb|mb|gb|px|people|persons?|users?|times"
    r"|items?|rows?|tokens?|words?|bytes?|lines?|dollars?|won|euros?|steps?|pages?|calories)\b|원|명|개|번))"
)


# ------------------------------------------------------------------------------------------------------- calendar


def _midnight(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def _days(day: date, count: int = 1, granularity: Granularity = "day") -> TimeRange:
    return TimeRange(_midnight(day), _midnight(day + timedelta(days=count)), granularity)


def _week(day: date) -> TimeRange:
    return _days(day - timedelta(days=day.weekday()), 7, "week")


def _weekend(day: date) -> TimeRange:
    return _days(day - timedelta(days=day.weekday() - 5), 2, "weekend")


def _months(year: int, month: int, count: int = 1, granularity: Granularity = "month") -> TimeRange:
    after = year * 12 + month - 1 + count
    return TimeRange(
        datetime(year, month, 1, tzinfo=UTC), datetime(after // 12, after % 12 + 1, 1, tzinfo=UTC), granularity
    )


def _year(year: int) -> TimeRange:
    return TimeRange(datetime(year, 1, 1, tzinfo=UTC), datetime(year + 1, 1, 1, tzinfo=UTC), "year")


def _shift(unit: str, count: int, base: datetime) -> TimeRange:
    """The `unit` that is `count` units from the one containing `base` (a UTC instant)."""
    if unit in ("minute", "hour"):
        step = timedelta(minutes=1) if unit == "minute" else timedelta(hours=1)
        floor = (
            base.replace(second=0, microsecond=0)
            if unit == "minute"
            else base.replace(minute=0, second=0, microsecond=0)
        )
        start = floor + count * step
        return TimeRange(start, start + step, unit)  # type: ignore[arg-type]
    day = base.date()
    if unit == "day":
        return _days(day + timedelta(days=count))
    if unit == "week":
        return _week(day + timedelta(weeks=count))
    if unit == "weekend":
        return _weekend(day + timedelta(weeks=count))
    if unit == "month":
        index = day.year * 12 + day.month - 1 + count
        return _months(index // 12, index % 12 + 1)
    return _year(day.year + count)


def _recurring_year(first: int, months: int, step: int | None, today: date) -> int:
    """The year in which the yearly period starting in month `first` and lasting `months` months starts.

    step None: the most recent one that starts no later than today's month; -1: the one before it if today is inside
    that one, else that one ("last May" in May is a year back, in June it is this May); 0: the one today is inside, else
    the one starting in today's year; +1: the first one starting after today's month. -2, +2: one more step.
    """
    recent = today.year if first <= today.month else today.year - 1
    inside = (today.year * 12 + today.month) - (recent * 12 + first) < months
    if step is None:
        return recent
    if step < 0:
        return recent + step + (0 if inside else 1)
    if step == 0:
        return recent if inside else today.year
    return recent + step


def _month_year(month: int, step: int | None, today: date) -> int:
    return _recurring_year(month, 1, step, today)


def _season(name: str, step: int | None, year: int | None, today: date) -> TimeRange:
    first = _SEASON_START[name]
    if year is None:
        year = _recurring_year(first, 3, step, today)
    return _months(year, first, 3, "season")


def _month_day(month: int, day: int, today: date) -> TimeRange | None:
    """The most recent `month`/`day` on or before today."""
    year = today.year if (month, day) <= (today.month, today.day) else today.year - 1
    for back in range(9):  # Feb 29 goes back to the last leap year
        try:
            return _days(date(year - back, month, day))
        except ValueError:
            if not (month == 2 and day == 29):
                return None
    return None


def _weekday(weekday: int, step: int | None, week_step: int | None, today: date) -> TimeRange:
    if week_step is not None:
        return _days(today - timedelta(days=today.weekday()) + timedelta(weeks=week_step, days=weekday))
    offset = today.weekday() - weekday
    if step is None:
        return _days(today - timedelta(days=offset % 7))
    if step < 0:
        return _days(today - timedelta(days=(offset - 1) % 7 + 1))
    if step == 0:
        return _days(today - timedelta(days=offset))
    return _days(today + timedelta(days=(-offset - 1) % 7 + 1))


# ----------------------------------------------------------------------------------------------------------- rules
# Each rule's pattern starts with something selective (a digit, a month or weekday name, a Korean word), because a
# pattern that starts with optional words is tried at every position and costs ten times more. Words that come before
# it and change its meaning ("last", "in", "지난") are read backwards by the rule's `before` pattern instead. A rule is
# tried only at its start positions (digit runs, or its first words found by one pass over the text's words) or, for
# the others, only if the text contains one of its gate strings: a text with no date words runs almost no regex.


@dataclass(frozen=True, slots=True)
class _Ctx:
    now: datetime  # the anchor in UTC
    today: date
    whole: bool  # resolving a whole expression (cues optional) rather than searching a text


# What a handler sees: the pattern's match, the `before` match (or None) and the context.
_Handler = Callable[[re.Match[str], "re.Match[str] | None", _Ctx], "TimeRange | None"]
_DIGIT = "digit"


@dataclass(frozen=True, slots=True)
class _Rule:
    pattern: re.Pattern[str]
    handle: _Handler
    # Where the pattern may start: at a digit run, or at one of these English words (lower case); None: anywhere.
    starts: frozenset[str] | str | None
    gates: tuple[str, ...]  # else: the text must contain one of these strings, or the pattern is not tried
    before: re.Pattern[str] | None = None  # matched against the 48 characters before the pattern's match; ends in $
    kind: str = ""  # "shift" ("the week before"), "weekday", "date" (a full date a weekday may precede)
    english: bool = True  # case-insensitive, words separated by spaces; Korean rules are not
    ko_word: bool = False  # a Korean word: not when it continues another word ("그어제")


_RULES: list[_Rule] = []


def _rule(
    pattern: str,
    starts: frozenset[str] | str | None = None,
    gates: tuple[str, ...] = (),
    *,
    before: str | None = None,
    kind: str = "",
    flags: int = re.IGNORECASE,
    ko_word: bool = False,
) -> Callable[[_Handler], _Handler]:
    def register(handle: _Handler) -> _Handler:
        prefix = re.compile(before + "$", flags) if before else None
        _RULES.append(_Rule(re.compile(pattern, flags), handle, starts, gates, prefix, kind, bool(flags), ko_word))
        return handle

    return register


def _words(*tables: object) -> frozenset[str]:
    return frozenset(w for table in tables for phrase in table for w in str(phrase).split())  # type: ignore[attr-defined]


def _g(match: re.Match[str] | None, name: str) -> str | None:
    value = None if match is None else match.group(name)
    return None if value is None else " ".join(value.lower().split())


def _year_ok(year: int, ctx: _Ctx) -> bool:
    return 1 <= year <= 9998 and (ctx.whole or 1900 <= year <= 2099)


_W_MONTHS = _words(_MONTHS)
_W_MONTHS_FULL = _words(_MONTHS_FULL)
# Backwards: a cue that makes a bare month, season or year a date ("in May"), not part of the mention; then a step
# ("last May"), part of it.
_BEFORE_CUE = (
    r"(?:(?<![a-z])(?P<cue>in|during|since|until|till|by|from|through|before|after|of|around|circa|early|mid|late"
    r"|(?:the\s+)?(?:end|beginning|start|middle)\s+of)[-\s]+)?(?:the\s+)?"
)
_BEFORE_STEP = rf"(?:(?<![a-z])(?P<q>{_STEP}|this\s+coming|past)\s+)?"


@_rule(
    r"(?<![\d.:/-])(?P<y>\d{4})-(?P<mo>\d{2})-(?P<d>\d{2})[T ](?P<h>\d{2}):(?P<mi>\d{2})"
    r"(?::(?P<s>\d{2})(?:[.,](?P<f>\d{1,6})\d*)?)?\s*(?P<tz>Z|[+-]\d{2}(?::?\d{2})?)?(?![\d:])",
    _DIGIT,
    ("-",),
)
def _iso_instant(m: re.Match[str], pre: re.Match[str] | None, ctx: _Ctx) -> TimeRange | None:
    tz = m.group("tz")
    zone = UTC
    if tz and tz.upper() != "Z":
        sign = -1 if tz[0] == "-" else 1
        digits = tz[1:].replace(":", "")
        zone = timezone(sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:4] or 0)))
    fraction = m.group("f")
    start = datetime(
        int(m.group("y")),
        int(m.group("mo")),
        int(m.group("d")),
        int(m.group("h")),
        int(m.group("mi")),
        int(m.group("s") or 0),
        int(fraction.ljust(6, "0")) if fraction else 0,
        tzinfo=zone,
    ).astimezone(UTC)
    if fraction:
        return TimeRange(start, start + timedelta(microseconds=1), "microsecond")
    if m.group("s"):
        return TimeRange(start, start + timedelta(seconds=1), "second")
    return TimeRange(start, start + timedelta(minutes=1), "minute")


@_rule(
    r"(?<![\d.:/-])(?P<y>\d{4})(?:(?P<dot>\.\s?)|(?P<sep>[-/]))(?P<mo>\d{1,2})(?(dot)\.\s?|(?P=sep))(?P<d>\d{1,2})"
    r"(?(dot)\.?)(?!\d|[-/.]\d)",
    _DIGIT,
    ("-", "/", "."),
)
def _iso_date(m: re.Match[str], pre: re.Match[str] | None, ctx: _Ctx) -> TimeRange | None:
    return _days(date(int(m.group("y")), int(m.group("mo")), int(m.group("d"))))


@_rule(r"(?<![\d.:/-])(?P<y>\d{4})-(?P<mo>\d{2})(?!\d|-\d)", _DIGIT, ("-",))
def _iso_month(m: re.Match[str], pre: re.Match[str] | None, ctx: _Ctx) -> TimeRange | None:
    return _months(int(m.group("y")), int(m.group("mo")))


@_rule(
    rf"(?<![\d.:/-])(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<m>{_MONTH_ANY})\b\.?(?:,?\s+(?P<y>\d{{4}})\b)?",
    _DIGIT,
    kind="date",
)
def _day_month_year(m: re.Match[str], pre: re.Match[str] | None, ctx: _Ctx) -> TimeRange | None:
    return _dated(m, ctx)


@_rule(
    rf"\b(?P<m>{_MONTH_ANY})\b\.?\s+(?:the\s+)?(?P<d>\d{{1,2}})(?:st|nd|rd|th)?(?![\d:.,]\d|\d)\b"
    r"(?:,?\s+(?P<y>\d{4})\b)?",
    _W_MONTHS,
    kind="date",
)
def _month_day_year(m: re.Match[str], pre: re.Match[str] | None, ctx: _Ctx) -> TimeRange | None:
    return _dated(m, ctx)


def _dated(m: re.Match[str], ctx: _Ctx) -> TimeRange | None:
    month = _MONTHS[_g(m, "m") or ""]
    day = int(m.group("d"))
    if m.group("y") is None:
        if m.group("m") == "may" and not ctx.whole:
            return None  # "steps 3 may fail", "you may 2x": a lower-case "may" needs a year
        return _month_day(month, day, ctx.today)
    year = int(m.group("y"))
    return _days(date(year, month, day)) if _year_ok(year, ctx) else None


@_rule(rf"\b(?P<m>{_MONTH_ANY})\b\.?,?\s+(?:of\s+)?(?P<y>\d{{4}})\b", _W_MONTHS)
def _month_year_en(m: re.Match[str], pre: re.Match[str] | None, ctx: _Ctx) -> TimeRange | None:
    year = int(m.group("y"))
    return _months(year, _MONTHS[_g(m, "m") or ""]) if _year_ok(year, ctx) else None


@_rule(rf"\b(?P<m>{_MONTH_FULL})\b", _W_MONTHS_FULL, before=_BEFORE_CUE + _BEFORE_STEP)
def _month_en(m: re.Match[str], pre: re.Match[str] | None, ctx: _Ctx) -> TimeRange | None:
    q = _g(pre, "q")
    step = -1 if q == "past" else 1 if q == "this coming" else _EN_STEP.get(q or "")
    if not ctx.whole:
        if step is None and _g(pre, "cue") is None:
            return None  # "March on", "May I ask", "June said"
        if m.group("m") == "may" and step not in (-1, 1):
            return None  # "this may be", "which in may cases": a lower-case "may" is a month only after last/next
    month = _MONTHS[_g(m, "m") or ""]
    return _months(_month_year(month, step, ctx.today), month)


@_rule(
    rf"(?<![\d.:/,-])(?P<y>\d{{4}})\b{_NOT_YEAR}",
    _DIGIT,
    before=r"(?:(?<![a-z])(?P<cue>in|during|since|until|till|by|from|through|before|after|of|around|circa|between"
    r"|(?:the\s+)?(?:end|beginning|start|middle)\s+of|early|mid|late)[-\s]+(?:the\s+)?)?(?P<year>year\s+)?",
)
def _year_en(m: re.Match[str], pre: re.Match[str] | None, ctx: _Ctx) -> TimeRange | None:
    year = int(m.group("y"))
    if not ctx.whole and _g(pre, "cue") is None and _g(pre, "year") is None:
        return None  # "2000 people", "room 2023"
    return _year(year) if _year_ok(year, ctx) else None


@_rule(
    r"\b(?P<s>spring|summer|autumn|fall|winter)\b(?:,?\s+(?:of\s+)?(?P<y>\d{4})\b)?",
    frozenset(("spring", "summer", "autumn", "fall", "winter")),
    before=_BEFORE_CUE + _BEFORE_STEP,
)
def _season_en(m: re.Match[str], pre: re.Match[str] | None, ctx: _Ctx) -> TimeRange | None:
    q = _g(pre, "q")
    step = -1 if q == "past" else 1 if q == "this coming" else _EN_STEP.get(q or "")
    year = int(m.group("y")) if m.group("y") else None
    if not ctx.whole and step is None and year is None and (_g(pre, "cue") is None or _g(m, "s") == "fall"):
        return None  # "I fall", "winter coat", "spring cleaning"
    if year is not None and not _year_ok(year, ctx):
        return None
    return _season(_g(m, "s") or "", step, year, ctx.today)


@_rule(
    rf"\b(?P<d>{_WEEKDAY})\b(?!')(?:\s+(?P<w>{_STEP})\s+week\b)?",
    _words(_WEEKDAYS),
    before=_BEFORE_STEP,
    kind="weekday",
)
def _weekday_en(m: re.Match[str], pre: re.Match[str] | None, ctx: _Ctx) -> TimeRange | None:
    q = _g(pre, "q")
    step = -1 if q == "past" else 1 if q == "this coming" else _EN_STEP.get(q or "")
    week = _EN_STEP.get(_g(m, "w") or "")
    return _weekday(_WEEKDAYS[_g(m, "d") or ""], step, week, ctx.today)


@_rule(rf"\b(?P<w>{_alt(_EN_DAY_WORDS)})\b", frozenset(w.split()[0] for w in _EN_DAY_WORDS))
def _day_word_en(m: re.Match[str], pre: re.Match[str] | None, ctx: _Ctx) -> TimeRange | None:
    return _days(ctx.today + timedelta(days=_EN_DAY_WORDS[_g(m, "w") or ""]))


@_rule(rf"\b(?P<n>{_EN_NUM})\s+(?P<u>{_EN_UNIT})s?\s+ago\b", None, (" ago",))
def _ago_en(m: re.Match[str], pre: re.Match[str] | None, ctx: _Ctx) -> TimeRange | None:
    return _shift(_EN_UNITS[_g(m, "u") or ""], -_en_count(m), ctx.now)


# "in 3 days" (not minutes or hours: "ran 5 km in 25 minutes" is a duration; so can "in 3 days" be, see the limits).
@_rule(rf"\bin\s+(?P<n>{_EN_NUM})\s+(?P<u>day|week|weekend|month|year)s?\b(?!\s+ago)", frozenset(("in",)))
def _in_en(m: re.Match[str], pre: re.Match[str] | None, ctx: _Ctx) -> TimeRange | None:
    return _shift(_EN_UNITS[_g(m, "u") or ""], _en_count(m), ctx.now)


@_rule(rf"\b(?P<n>{_EN_NUM})\s+(?P<u>{_EN_UNIT})s?\s+from\s+now\b", None, ("from now",))
def _from_now_en(m: re.Match[str], pre: re.Match[str] | None, ctx: _Ctx) -> TimeRange | None:
    return _shift(_EN_UNITS[_g(m, "u") or ""], _en_count(m), ctx.now)


def _en_count(m: re.Match[str]) -> int:
    word = _g(m, "n") or ""
    return int(word) if word.isdigit() else _EN_NUMBERS[word]


@_rule(rf"\b(?P<q>{_STEP})\s+(?P<u>week|weekend|month|year)\b", _words(_EN_STEP))
def _period_en(m: re.Match[str], pre: re.Match[str] | None, ctx: _Ctx) -> TimeRange | None:
    return _shift(_g(m, "u") or "", _EN_STEP[_g(m, "q") or ""], ctx.now)


@_rule(
    rf"\b(?:(?P<the>the)|(?P<n>{_EN_NUM}))\s+(?P<u>day|week|weekend|month|year)s?\s+"
    r"(?P<dir>before|after|earlier|later|prior\s+to)(?P<last>\s+last)?\b",
    None,
    ("before", "after", "earlier", "later", "prior"),
    kind="shift",
)
def _shift_en(m: re.Match[str], pre: re.Match[str] | None, ctx: _Ctx) -> TimeRange | None:
    return _shift_range(m, ctx.now)


def _shift_range(m: re.Match[str], base: datetime) -> TimeRange:
    count = 1 if m.group("the") else _en_count(m)
    if m.group("last"):
        count += 1
    direction = _g(m, "dir") or ""
    return _shift(_g(m, "u") or "", -count if direction in ("before", "earlier", "prior to") else count, base)


# Korean ------------------------------------------------------------------------------------------------------------
_KO_QUALIFIERS = _alt(_KO_STEP) + "|" + _alt(_KO_YEAR_WORDS)


@_rule(
    r"(?<!\d)(?P<y>\d{4})\s*년(?:\s*(?P<m>\d{1,2})\s*월(?!요일)(?:\s*(?P<d>\d{1,2})\s*일(?!간|동안))?"
    r"|(?!\s*(?:전|후|뒤|동안|간|째|대)))",
    _DIGIT,
    ("년",),
    flags=0,
)
def _year_month_day_ko(m: re.Match[str], pre: re.Match[str] | None, ctx: _Ctx) -> TimeRange | None:
    year = int(m.group("y"))
    if not _year_ok(year, ctx):
        return None
    if m.group("d"):
        return _days(date(year, int(m.group("m")), int(m.group("d"))))
    if m.group("m"):
        return _months(year, int(m.group("m")))
    return _year(year)


@_rule(
    r"(?<![\d.])(?P<m>\d{1,2})\s*월(?!요일)(?:\s*(?P<d>\d{1,2})\s*일(?!간|동안|요일))?",
    _DIGIT,
    ("월",),
    before=rf"(?:{_KO_START}(?P<q>{_KO_QUALIFIERS})\s*)?",
    flags=0,
)
def _month_day_ko(m: re.Match[str], pre: re.Match[str] | None, ctx: _Ctx) -> TimeRange | None:
    month = int(m.group("m"))
    day = int(m.group("d")) if m.group("d") else None
    q = _g(pre, "q")
    if q in _KO_YEAR_WORDS:
        year = ctx.today.year + _KO_YEAR_WORDS[q]
        return _days(date(year, month, day)) if day else _months(year, month)
    step = _KO_STEP.get(q or "")
    if not 1 <= month <= 12:
        return None
    if day is None:
        return _months(_month_year(month, step, ctx.today), month)
    if step is None:
        return _month_day(month, day, ctx.today)
    return _days(date(_month_year(month, step, ctx.today), month, day))


@_rule(
    rf"(?P<s>봄|여름|가을|겨울){_KO_END}",
    None,
    ("봄", "여름", "가을", "겨울"),
    before=rf"(?:{_KO_START}(?P<q>{_KO_QUALIFIERS})\s*|(?<!\d)(?P<y>\d{{4}})\s*년\s*)?",
    flags=0,
)
def _season_ko(m: re.Match[str], pre: re.Match[str] | None, ctx: _Ctx) -> TimeRange | None:
    q = _g(pre, "q")
    if q in _KO_YEAR_WORDS:
        return _season(m.group("s"), None, ctx.today.year + _KO_YEAR_WORDS[q], ctx.today)
    if pre is not None and pre.group("y"):
        return _season(m.group("s"), None, int(pre.group("y")), ctx.today)
    if q is None and not ctx.whole:
        return None  # "봄" alone is also "seeing", "가을" a word in many others
    if q is None and m.start() > 0 and re.match(r"[가-힣]", m.string[m.start() - 1]):
        return None
    return _season(m.group("s"), _KO_STEP.get(q or ""), None, ctx.today)


@_rule(
    rf"(?P<d>[월화수목금토일])요일{_KO_END}",
    None,
    ("요일",),
    before=rf"(?:{_KO_START}(?P<q>{_alt(_KO_STEP)})\s*(?P<w>주\s*)?)?",
    kind="weekday",
    flags=0,
)
def _weekday_ko(m: re.Match[str], pre: re.Match[str] | None, ctx: _Ctx) -> TimeRange | None:
    step = _KO_STEP.get(_g(pre, "q") or "")
    if pre is not None and pre.group("w"):
        return _weekday(_KO_WEEKDAYS[m.group("d")], None, step, ctx.today)
    return _weekday(_KO_WEEKDAYS[m.group("d")], step, None, ctx.today)


@_rule(
    rf"(?P<w>{_alt(_KO_DAY_WORDS)}){_KO_END}", None, ("어", "그", "오늘", "내일", "모레", "글피"), flags=0, ko_word=True
)
def _day_word_ko(m: re.Match[str], pre: re.Match[str] | None, ctx: _Ctx) -> TimeRange | None:
    return _days(ctx.today + timedelta(days=_KO_DAY_WORDS[m.group("w")]))


@_rule(
    rf"(?P<q>{_alt(_KO_STEP)})\s*(?P<u>주말|주|달|해){_KO_END}",
    None,
    ("지난", "저번", "이번", "다음"),
    flags=0,
    ko_word=True,
)
def _period_ko(m: re.Match[str], pre: re.Match[str] | None, ctx: _Ctx) -> TimeRange | None:
    return _shift(_KO_PERIOD_UNITS[m.group("u")], _KO_STEP[m.group("q")], ctx.now)


@_rule(rf"(?P<q>{_alt(_KO_YEAR_WORDS)}){_KO_END}", None, ("년", "해"), flags=0, ko_word=True)
def _year_word_ko(m: re.Match[str], pre: re.Match[str] | None, ctx: _Ctx) -> TimeRange | None:
    if m.group("q") == "올":
        return None  # too short a word to trust alone; it counts before a month or season ("올 여름")
    return _year(ctx.today.year + _KO_YEAR_WORDS[m.group("q")])


# Anchored at 전/후/뒤 (ago/later), the count and unit read backwards: "3일 전", "이틀 뒤", "두 달 전", "일주일 후".
@_rule(
    r"(?P<dir>이후|전|후|뒤)(?=[^가-힣]|$|에|엔|까지|부터|의|쯤|만|인|께|로|이다|였|이었)",
    None,
    ("전", "후", "뒤"),
    before=r"(?P<q>(?<![\d.])(?P<n>\d{1,3})\s*(?P<u>분|시간|일|주일|주|개월|달|년|해)"
    rf"|(?P<dc>{_alt(_KO_DAY_COUNTS)})"
    rf"|(?P<nk>{_alt(_KO_NUMBERS)})\s*(?P<uk>시간|주일|주|달|해)"
    r"|(?P<wk>일주일|일\s*년))\s*",
    flags=0,
)
def _ago_ko(m: re.Match[str], pre: re.Match[str] | None, ctx: _Ctx) -> TimeRange | None:
    if pre is None or pre.group("q") is None or (pre.group("n") is None and _hangul_before(pre.string, pre.start())):
        return None
    if pre.group("n"):
        count, unit = int(pre.group("n")), _KO_UNITS[pre.group("u")]
    elif pre.group("dc"):
        count, unit = _KO_DAY_COUNTS[pre.group("dc")], "day"
    elif pre.group("nk"):
        count, unit = _KO_NUMBERS[pre.group("nk")], _KO_UNITS[pre.group("uk")]
    else:
        count, unit = 1, "week" if pre.group("wk") == "일주일" else "year"
    return _shift(unit, -count if m.group("dir") == "전" else count, ctx.now)


# ------------------------------------------------------------------------------------------------------------- scan

_EVERY = re.compile(r"(?:\b(?:every|each)\s+|매\s*주?\s*)$", re.IGNORECASE)
_LEAD = re.compile(r"(?:(?:on|in|at|during|around|the)\s+)*", re.IGNORECASE)
_TAIL = re.compile(r"(?:에는|에서|에|엔|의|은|는|도|부터|까지|쯤|경|무렵)?[.,!?]*")
_WORD = re.compile(r"[a-z]+")
_DIGITS = re.compile(r"\d+")
_BETWEEN_WEEKDAY_AND_DATE = re.compile(r",?\s+")
_NAIVE = "anchor must be timezone-aware"


@dataclass(slots=True)
class _Hit:
    start: int  # the reported span: the pattern's match plus a step read before it ("last"), not a cue ("in")
    end: int
    full_start: int  # where the cue, if any, starts
    range: TimeRange
    kind: str
    shift: re.Match[str] | None  # for "the week before": applied to a date right after it, else to the anchor


def _before(rule: _Rule, text: str, start: int, word_starts: list[int]) -> re.Match[str] | None:
    """The leftmost match of the rule's `before` pattern that ends where the rule's match starts."""
    assert rule.before is not None
    if rule.english:  # English: every cue starts a word, so try only word starts (much faster)
        for position in word_starts[bisect_left(word_starts, start - 48) : bisect_left(word_starts, start)]:
            found = rule.before.match(text, position, start)
            if found is not None:
                return found
        return rule.before.match(text, start, start)
    return rule.before.search(text, max(0, start - 48), start)


def _scan(text: str, ctx: _Ctx) -> list[_Hit]:
    lowered = text.lower()
    starts: dict[str, list[int]] = {}
    word_starts: list[int] = []
    for word in _WORD.finditer(lowered):
        starts.setdefault(word.group(), []).append(word.start())
        word_starts.append(word.start())
    digits = [run.start() for run in _DIGITS.finditer(text)]
    hits: list[_Hit] = []
    for rule in _RULES:
        if rule.gates and not any(gate in lowered for gate in rule.gates):
            continue
        if rule.starts is None:
            matches = list(rule.pattern.finditer(text))
        else:
            if rule.starts == _DIGIT:
                positions = digits
            else:
                positions = sorted(p for word in rule.starts.intersection(starts) for p in starts[word])
            matches = [m for m in map(rule.pattern.match, repeat(text), positions) if m is not None]
        for match in matches:
            start = full_start = match.start()
            if rule.ko_word and _hangul_before(text, start):
                continue
            pre = None
            if rule.before is not None:
                pre = _before(rule, text, start, word_starts)
                if pre is not None and pre.start() < start:
                    full_start = pre.start()
                    if "cue" not in pre.re.groupindex:  # all of it is part of the mention: "지난 5월", "last Friday"
                        start = full_start
                    elif "q" in pre.re.groupindex and pre.group("q"):  # "in last May": from "last"
                        start = pre.start("q")
            try:
                found = rule.handle(match, pre, ctx)
            except (ValueError, OverflowError):  # 31 February, year 10000, ...
                continue
            if found is None:
                continue
            if not ctx.whole and _EVERY.search(text, max(0, full_start - 8), full_start):
                continue  # "every Monday", "매주 월요일": a habit
            hits.append(_Hit(start, match.end(), full_start, found, rule.kind, match if rule.kind == "shift" else None))
    # Leftmost first, then longest: "May 8, 2023" beats "May 8"; "5월 3일" beats "3일 전" inside it.
    hits.sort(key=lambda h: (h.start, -h.end))
    chosen: list[_Hit] = []
    for hit in hits:
        if not chosen or hit.start >= chosen[-1].end:
            chosen.append(hit)
    merged: list[_Hit] = []
    for hit in chosen:
        previous = merged[-1] if merged else None
        if previous is not None and previous.kind == "shift" and previous.shift is not None and hit.kind != "shift":
            if not text[previous.end : hit.start].strip():  # "the week before" + "9 June 2023"
                base = hit.range.start
                merged[-1] = _Hit(
                    previous.start, hit.end, previous.full_start, _shift_range(previous.shift, base), "", None
                )
                continue
        if previous is not None and previous.kind == "weekday" and hit.kind == "date":
            if _BETWEEN_WEEKDAY_AND_DATE.fullmatch(text, previous.end, hit.start):  # "Monday, 8 May 2023"
                merged[-1] = _Hit(previous.start, hit.end, previous.full_start, hit.range, "date", None)
                continue
        merged.append(hit)
    # "N days before" with no date after it is relative to an unknown event; "the week before" alone is the anchor's.
    return [h for h in merged if h.shift is None or h.shift.group("the")]


def _context(anchor: datetime, whole: bool) -> _Ctx:
    if anchor.tzinfo is None or anchor.utcoffset() is None:
        raise ValueError(_NAIVE)
    now = anchor.astimezone(UTC)
    return _Ctx(now, now.date(), whole)


def resolve(expression: str, anchor: datetime) -> TimeRange | None:
    """The range one temporal expression names, resolved against `anchor`; None if it is not one.

    The whole of `expression` must be the expression, give or take a leading "on"/"in"/"at"/"during", a trailing
    Korean particle ("지난주에", "어제부터") and trailing punctuation. Rules: see the module docstring. Raises
    ValueError for a naive `anchor`.
    """
    ctx = _context(anchor, whole=True)
    text = expression.strip()
    if not text:
        return None
    hits = _scan(text, ctx)
    if len(hits) != 1:
        return None
    hit = hits[0]
    if _LEAD.fullmatch(text, 0, hit.full_start) and _TAIL.fullmatch(text, hit.end):
        return hit.range
    return None


def mentions(text: str, anchor: datetime) -> list[Mention]:
    """Every temporal expression in `text`, in order and non-overlapping, each resolved against `anchor`.

    `anchor` is the text's own time (a memory's event or creation time; a LoCoMo turn's session date). Bare months,
    seasons and years need a cue ("in May", "since 2019"); see the module docstring for what is left out on purpose.
    """
    ctx = _context(anchor, whole=False)
    return [Mention(h.start, h.end, text[h.start : h.end], h.range) for h in _scan(text, ctx)]


_TEMPORAL_QUESTION = re.compile(
    r"\b(?:when|whens?ever|since\s+when|until\s+when|how\s+long|how\s+recently|how\s+often"
    r"|(?:what|which)\s+(?:year|month|day|date|time|week|weekend|season|decade)s?"
    r"|how\s+many\s+(?:years|months|weeks|days|hours)|in\s+what\s+year)\b"
    r"|언제|며칠|몇\s*(?:년|월|일|시|주|달|개월|해|요일|분)|무슨\s*(?:요일|날|달|계절)|어느\s*(?:해|날|달|요일|계절|시기)"
    r"|얼마나\s*(?:오래|전|됐|되었)|얼마\s*전|날짜|연도",
    re.IGNORECASE,
)


def is_temporal_question(text: str) -> bool:
    """Whether a question asks about time: "when", "what year/month/day/date/time", "which year", "how long (ago)",
    "how many days", "since when", "언제", "몇 년/월/일/시", "며칠", "무슨 요일", "어느 해", "얼마나 오래", "얼마 전".

    It looks only for words that ask; a question that *names* a time ("what did I do last May?") is found by
    `mentions`, which gives the range to filter or boost by.
    """
    return _TEMPORAL_QUESTION.search(text) is not None

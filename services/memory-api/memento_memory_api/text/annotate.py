"""What a memory says about its place and its time, computed on write (issue 28 items 2-4; migration 0019).

`annotate(content, source=..., session_id=..., written_at=...)` gives the row's columns:

- thread, seq: where the text stands in a conversation. A source ending in a number after ":", "#" or "/" ("D1:3",
  "conv-7#12", "chat/2024-01/15") is thread "D1", place 3 (the part before the last separator, the trailing number);
  otherwise the MCP session: thread "session:<id>", place = microseconds since the epoch of written_at; else none.
- event_said: the text's own dated header ("Caroline (1:56 pm on 8 May, 2023): ...", "[2023-05-08] ...",
  "2023년 5월 8일: ...") with its time of day if it gives one, else written_at. It is the anchor for the body's dates.
- event_from, event_to: the union of the body's date mentions (memento_shared.text.dates), resolved against
  event_said; None when the body names no time. The header's own date is not an event.
- expansion: words searched beside the content at the lowest weight: the speaker, the header date and the event range
  spelled out ("may 2023 2023-05-07 sunday"), the names, then keyphrases; lower case, deduplicated, at most 40 words
  (the tail is cut); then the stems of the content's words that its words do not already spell ("camping" ->
  "camp"; text.stems), at most 80, so the full-text index finds a memory by a question's word in another form.
- entities: the tokens it links by (text.links; issue 53): its speaker, names and places, and the kinds it names.

`query_expansion(question, now)` spells a question's names and dates the same way, for the lexical search.
Pure functions, no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache

from memento_shared.text.dates import TimeRange, mentions
from memento_shared.text.entities import extract, question_names, split_header
from memento_shared.text.keywords import STOPWORDS
from memento_shared.text.links import entity_tokens
from memento_shared.text.stems import content_stems

__all__ = ["Annotation", "annotate", "query_expansion", "spell"]

MAX_EXPANSION_WORDS = 40
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
_MONTH_NAMES = "january february march april may june july august september october november december".split()
_WEEKDAY_NAMES = "monday tuesday wednesday thursday friday saturday sunday".split()

# The last ":", "#" or "/" followed by digits only ("D1:3"); the greedy thread takes every earlier separator.
_SOURCE_PLACE = re.compile(r"(?P<thread>.*\S)\s*[:#/]\s*(?P<seq>\d{1,18})")
_YEAR = re.compile(r"(?<!\d)\d{4}(?!\d)")
# A time of day inside a header date: "1:56 pm", "13:56", "오후 1시 56분".
_CLOCK = re.compile(r"(?<!\d)(?P<h>\d{1,2}):(?P<m>\d{2})(?::(?P<s>\d{2}))?\s*(?P<ap>[ap])?\.?\s*m?\.?(?![a-z])", re.I)
_KO_CLOCK = re.compile(r"(?P<ap>오전|오후)?\s*(?P<h>\d{1,2})\s*시(?:\s*(?P<m>\d{1,2})\s*분)?")
# What may stand beside the date in a header: the clock, "on"/"at", punctuation.
_HEADER_FILLER = re.compile(r"(?:\s|[,.;/()\[\]-]|\b(?:on|at)\b|에)*", re.I)


@dataclass(frozen=True)
class Annotation:
    thread: str | None  # "D1" for source "D1:3"; "session:<id>" for an MCP session; else None
    seq: int | None  # 3 for "D1:3"; for a session, microseconds since the epoch of written_at
    event_from: datetime | None  # the time the body is about, resolved against event_said; None if it names none
    event_to: datetime | None
    event_said: datetime  # the text's dated header, if any, else written_at
    expansion: str  # speaker, dates spelled out, names, keyphrases: searched at the lowest weight
    entities: list[str]  # the tokens it links by (text.links)


def _place(source: str | None, session_id: str | None, written_at: datetime) -> tuple[str | None, int | None]:
    if source:
        m = _SOURCE_PLACE.fullmatch(source.strip())
        if m is not None:
            return m.group("thread"), int(m.group("seq"))
    if session_id:
        return f"session:{session_id}", (written_at - _EPOCH) // _MICROSECOND
    return None, None


def _clock(text: str) -> timedelta | None:
    m = _CLOCK.search(text)
    if m is not None:
        hour, minute, second = int(m.group("h")), int(m.group("m")), int(m.group("s") or 0)
        ap = (m.group("ap") or "").lower()
    else:
        m = _KO_CLOCK.search(text)
        if m is None:
            return None
        hour, minute, second = int(m.group("h")), int(m.group("m") or 0), 0
        ap = {"오전": "a", "오후": "p"}.get(m.group("ap") or "", "")
    if ap == "p" and hour < 12:
        hour += 12
    elif ap == "a" and hour == 12:
        hour = 0
    if hour > 23 or minute > 59 or second > 59:
        return None
    return timedelta(hours=hour, minutes=minute, seconds=second)


def _header_moment(date_text: str, written_at: datetime) -> datetime | None:
    """The moment a header's date names (it must hold a digit), plus its time of day if given. A date with its year
    needs no anchor, so it is cached: the turns of one conversation session share their header."""
    if _YEAR.search(date_text):
        return _dated_header_moment(date_text, _EPOCH)
    if not any(c.isdigit() for c in date_text):
        return None
    return _dated_header_moment.__wrapped__(date_text, written_at)


@lru_cache(maxsize=1024)
def _dated_header_moment(date_text: str, anchor: datetime) -> datetime | None:
    found = mentions(date_text, anchor)
    if len(found) != 1:
        return None
    mention = found[0]
    rest = date_text[: mention.start] + " " + date_text[mention.end :]
    rest = _KO_CLOCK.sub(" ", _CLOCK.sub(" ", rest))
    if not _HEADER_FILLER.fullmatch(rest):
        return None  # "Meeting at 10", "(work, 2023)": not a dated header
    moment = mention.range.start
    if mention.range.granularity == "day":
        offset = _clock(date_text[: mention.start] + " " + date_text[mention.end :])
        if offset is not None:
            moment += offset
    return moment


def _day_words(day: date, weekday: bool = True) -> list[str]:
    out = [_MONTH_NAMES[day.month - 1], str(day.year), day.isoformat()]
    return out + [_WEEKDAY_NAMES[day.weekday()]] if weekday else out


def spell(start: datetime, end: datetime) -> list[str]:
    """A range in words a question may use: a day as "may 2023 2023-05-07 sunday", up to a week as its months and
    days, up to a season as its months ("may 2023 2023-05"), longer as its years."""
    start, end = start.astimezone(UTC), end.astimezone(UTC)
    last = (end - _MICROSECOND).date() if end > start else start.date()
    first = start.date()
    span = (last - first).days + 1
    if span <= 1:
        return _day_words(first)
    if span <= 7:
        out: list[str] = []
        for offset in range(span):
            out.extend(_day_words(first + timedelta(days=offset), weekday=span <= 2))
        return out
    months = (last.year * 12 + last.month) - (first.year * 12 + first.month) + 1
    if months <= 3:
        out = []
        for index in range(months):
            year, month = divmod(first.year * 12 + first.month - 1 + index, 12)
            out.extend((_MONTH_NAMES[month], str(year), f"{year:04d}-{month + 1:02d}"))
        return out
    years = range(first.year, last.year + 1)
    return [str(y) for y in (years if len(years) <= 10 else (first.year, last.year))]


def _words(parts: list[str], limit: int = MAX_EXPANSION_WORDS) -> str:
    seen: dict[str, None] = {}
    for part in parts:
        for word in part.lower().split():
            word = word.strip(".,;:!?\"'’()[]")
            if word and (word not in STOPWORDS or word in _MONTH_NAMES):  # "may" is a stopword and a month
                seen.setdefault(word, None)
                if len(seen) >= limit:
                    return " ".join(seen)
    return " ".join(seen)


def _union(ranges: list[TimeRange]) -> tuple[datetime, datetime] | None:
    if not ranges:
        return None
    return min(r.start for r in ranges), max(r.end for r in ranges)


def annotate(
    content: str,
    *,
    source: str | None,
    session_id: str | None,
    written_at: datetime,
    keyphrases: bool = True,
    stems: bool = True,
) -> Annotation:
    """The annotation of one memory. `written_at` must be timezone-aware (ValueError otherwise). `keyphrases`: add
    the extracted keyphrases at the end of the expansion; `stems`: then the content's new stems (switches for the
    benchmark's ablation)."""
    if written_at.tzinfo is None or written_at.utcoffset() is None:
        raise ValueError("written_at must be timezone-aware")
    written_at = written_at.astimezone(UTC)
    thread, seq = _place(source, session_id, written_at)
    header = split_header(content)
    said = _header_moment(header.date_text, written_at) if header.date_text else None
    body_start = header.body_start if (said is not None or header.speaker is not None) else 0
    body = content[body_start:]
    event_said = said or written_at
    event = _union([m.range for m in mentions(body, event_said)])
    entities = extract(content, header=header)
    # Most telling first, as the cap cuts the tail: the speaker and the dates are rarely in the content's own words.
    parts: list[str] = []
    if entities.speaker:
        parts.append(entities.speaker)
    if said is not None:
        parts.extend(_day_words(said.date()))
    if event is not None:
        parts.extend(spell(*event))
    parts.extend(entities.names)
    if keyphrases:
        parts.extend(entities.keyphrases)
    return Annotation(
        thread=thread,
        seq=seq,
        event_from=event[0] if event else None,
        event_to=event[1] if event else None,
        event_said=event_said,
        expansion=_with_stems(_words(parts), content) if stems else _words(parts),
        entities=entity_tokens(content, entities),
    )


def _with_stems(expansion: str, content: str) -> str:
    listed = set(expansion.split())
    return " ".join([expansion, *(s for s in content_stems(content) if s not in listed)]).strip()


def query_expansion(question: str, now: datetime) -> str:
    """A question's names and the dates it names, spelled as `annotate` spells them ("caroline may 2023 2023-05").
    `now` must be timezone-aware; relative dates ("last May") are resolved against it."""
    parts = list(question_names(question))
    for mention in mentions(question, now):
        parts.extend(spell(mention.range.start, mention.range.end))
    return _words(parts)

"""Who and what a text names, offline (issue 28 item 3): its speaker, names, and a few keyphrases; English and Korean.

Pure functions, no I/O, one pass of a few regexes (well under a millisecond for a conversation turn), because they run
on every write. Heuristics, not a model:

- speaker: a leading "Name:", "Name (date):" or "Name [date]:" header (LoCoMo turns read "Caroline (1:56 pm on 8 May,
  2023): ..."), where Name is one to four capitalised words or a Korean word, not a label such as "Note:".
- names (people, places, organisations, products): runs of capitalised words ("Bank of America"), all-capital
  abbreviations and inner-capital products ("iPhone"), minus month and weekday names and common capitalised words; a
  single word that opens a sentence counts only if it is known (the speaker, a name found elsewhere in the text, or
  one passed in). Korean: a word before an honorific (씨, 님), or before a particle that follows people (민수는,
  지연이랑, 철수한테) when it is built like a given name or a surname and given name (syllable lists; the common nouns
  built so are listed apart), and listed places ("서울에서"); Latin-script names inside Korean text ("Google에서")
  count wherever they stand. A text in Title Case or capitals gives no names but its speaker.
- keyphrases: runs of two or three content words between stopwords ("pottery class"), most repeated first; Korean: a
  bare noun before a noun with a particle ("요가 수업에" -> "요가 수업").
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache

from memento_shared.text import entity_words as words
from memento_shared.text.dates import mentions

__all__ = ["Entities", "Header", "extract", "question_names", "split_header"]

_MAX_NAMES = 20
_MAX_KEYPHRASES = 5


@dataclass(frozen=True)
class Entities:
    speaker: str | None
    names: list[str] = field(default_factory=list)
    keyphrases: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Header:
    """A text's leading "Name (date):" header: the speaker, the date's text (None if none), where the body starts."""

    speaker: str | None
    date_text: str | None
    body_start: int


# ------------------------------------------------------------------------------------------------------------ header

# "Name (date): ", "Name [date]: ", "Name: " -- the colon must be followed by a space (or the end) so "10:00" is no
# header. The name may not hold brackets, colons or line breaks and is checked in code.
_SPEAKER_HEADER = re.compile(
    r"\s*(?P<name>[^\s:()\[\]][^:()\[\]\n]{0,40}?)\s*(?:\((?P<p>[^()\n]{1,60})\)|\[(?P<b>[^\[\]\n]{1,60})\])?\s*:(?:\s+|$)"
)
# "[2023-05-08] ...", "(8 May, 2023): ..."
_BRACKET_DATE_HEADER = re.compile(r"\s*(?:\((?P<p>[^()\n]{1,60})\)|\[(?P<b>[^\[\]\n]{1,60})\])\s*:?\s*")
# "2023년 5월 8일: ...", "2023-05-08: ..." -- must hold a digit; checked as a date by the caller.
_PLAIN_DATE_HEADER = re.compile(r"\s*(?P<d>[^:\n]{0,40}?\d[^\n]{0,40}?)\s*:(?:\s+|$)")
_HANGUL_WORD = re.compile(r"[가-힣]{1,5}")
# Only absolute dates make a header, so any anchor finds them.
_ANY_ANCHOR = datetime(2000, 1, 1, tzinfo=UTC)


def _speaker_name(name: str) -> str | None:
    name = " ".join(name.split())
    parts = name.split(" ")
    if not 1 <= len(parts) <= 4 or name.lower() in words.HEADER_LABELS or parts[0].lower() in words.HEADER_LABELS:
        return None
    if all(_HANGUL_WORD.fullmatch(p) for p in parts):  # "민수:", "김 민수 씨:", not "오늘:" or "오늘의 할일:"
        if parts[-1] in words.KO_HONORIFICS and len(parts) > 1:
            parts = parts[:-1]
        if len(parts) > 2 or any(p in words.KO_NOT_NAMES or p in words.HEADER_LABELS for p in parts):
            return None
        if len(parts) == 2 and len(parts[0]) != 1:
            return None  # two Korean words make a name only as surname and given name
        return " ".join(parts)
    for part in parts:
        if not part[0].isupper() or any(c.isdigit() for c in part):
            return None
        if part.lower().strip(".") in words.MONTHS or part.lower().strip(".") in words.WEEKDAYS:
            return None
    return name


@lru_cache(maxsize=1024)
def _is_date(text: str) -> bool:
    """An absolute date ("8 May, 2023", "2023년 5월 8일"): it holds a digit and a date the normaliser finds."""
    return any(c.isdigit() for c in text) and bool(mentions(text, _ANY_ANCHOR))


def split_header(text: str) -> Header:
    """The text's leading speaker and/or date header, if it has one; the date is only found, not resolved."""
    m = _SPEAKER_HEADER.match(text)
    if m is not None:
        speaker = _speaker_name(m.group("name"))
        if speaker is not None:
            return Header(speaker, m.group("p") or m.group("b"), m.end())
    for pattern in (_BRACKET_DATE_HEADER, _PLAIN_DATE_HEADER):
        m = pattern.match(text)
        if m is not None:
            date_text = m.group("p") or m.group("b") if pattern is _BRACKET_DATE_HEADER else m.group("d")
            if _is_date(date_text):
                return Header(None, date_text, m.end())
    return Header(None, None, 0)


# ------------------------------------------------------------------------------------------------------------- names

# A Latin-script word (with inner apostrophes, hyphens, digits, "&"), or a run of Hangul.
_TOKEN = re.compile(r"(?P<lat>[A-Za-zÀ-ÖØ-öø-ɏ][A-Za-zÀ-ÖØ-öø-ɏ0-9'’&-]*)|(?P<ko>[가-힣]+)")
_SENTENCE_BREAK = re.compile(r"[.!?:;\n\"“”«»…]|\s[-*•]\s")
_NOT_NAME_ENDINGS = ("ed", "ing", "ly")
_POSSESSIVE = re.compile(r"(?:['’]s|['’])$")


@dataclass(slots=True)
class _Tok:
    text: str
    start: int
    end: int
    korean: bool
    sentence_start: bool
    hangul_after: bool  # a Hangul run follows with no space ("Google에서")


def _tokens(text: str) -> list[_Tok]:
    out: list[_Tok] = []
    previous: _Tok | None = None
    breaks = _SENTENCE_BREAK.search
    for m in _TOKEN.finditer(text):
        start, end = m.span()
        korean = m.lastgroup == "ko"
        if previous is None:
            opens = True
        elif start == previous.end:
            opens = False
            if korean and not previous.korean:
                previous.hangul_after = True
        elif breaks(text, previous.end, start):
            # "Dr. Smith", "J. K. Rowling": a title's or an initial's dot ends no sentence.
            opens = not (
                text[previous.end] == "." and (len(previous.text) == 1 or previous.text.lower() in words.TITLES)
            )
        else:
            opens = False
        previous = _Tok(m.group(), start, end, korean, opens, False)
        out.append(previous)
    return out


def _name_like(word: str) -> bool:
    """Capitalised ("Caroline"), all capitals ("NASA"), or an inner capital ("iPhone", "eBay")."""
    return word[0].isupper() or not word.islower()


def _clean(word: str) -> str:
    if "'" in word or "’" in word:
        word = _POSSESSIVE.sub("", word)
    return word.strip("-&")


def _excluded(word: str) -> bool:
    lowered = word.lower()
    if lowered in words.MONTHS or lowered in words.WEEKDAYS:
        return True
    if word.isupper() and lowered in words.COMMON_ACRONYMS:
        return True
    return lowered in ("i", "i'm", "i've", "i'll", "i'd")


@dataclass(slots=True)
class _Run:
    words: list[str]
    opens: bool  # the run opens a sentence
    hangul_after: bool  # Hangul follows with no space ("Google에서")
    vocative: bool  # a comma follows ("Mel, look")


def _latin_groups(text: str, tokens: list[_Tok]) -> list[_Run]:
    """Runs of name-like words, joined by single spaces or by a connector ("Bank of America")."""
    groups: list[_Run] = []
    run: list[str] = []
    opens = after_title = False
    last: _Tok | None = None

    def close() -> None:
        if run and last is not None:
            groups.append(_Run(list(run), opens, last.hangul_after, text.startswith(",", last.end)))
        run.clear()

    for i, tok in enumerate(tokens):
        word = "" if tok.korean else _clean(tok.text)
        if word and _name_like(word) and not _excluded(word):
            if word.lower().strip(".") in words.TITLES:
                close()
                after_title = True  # "Dr. Smith": the title is dropped, Smith is no sentence start
                continue
            if run and (tok.sentence_start or last is None or text[last.end : tok.start] != " "):
                close()
            if not run:
                opens = tok.sentence_start and not after_title
            run.append(word)
            last, after_title = tok, False
            if tok.hangul_after or word != tok.text.rstrip("-&"):  # "Google에서", "Caroline's": the name ends here
                close()
            continue
        after_title = False
        following = tokens[i + 1] if i + 1 < len(tokens) else None
        if (
            run
            and word.lower() in words.CONNECTORS
            and following is not None
            and not following.korean
            and not following.sentence_start
            and not tok.sentence_start
            and _name_like(following.text)
            and not _excluded(_clean(following.text))
        ):
            run.append(word)
            last = tok
            continue
        close()
    close()
    return groups


def _latin_names(text: str, tokens: list[_Tok], known: set[str], question: bool) -> list[str]:
    groups = _latin_groups(text, tokens)
    # Words seen capitalised in mid-sentence are known, so the same word opening a sentence counts too.
    mid = {w.lower() for g in groups for j, w in enumerate(g.words) if not g.opens or j > 0}
    out: list[str] = []
    for group in groups:
        run, opens, hangul_after, vocative = group.words, group.opens, group.hangul_after, group.vocative
        lowered = [w.lower() for w in run]
        # Common words at the front go ("The Beatles" -> "Beatles", "Yesterday Caroline" -> "Caroline").
        while run and lowered[0] in words.COMMON_CAPITALISED:
            run, lowered, opens = run[1:], lowered[1:], False
        while run and lowered[-1] in words.CONNECTORS:
            run, lowered = run[:-1], lowered[:-1]
        if not run:
            continue
        if opens and not question and not hangul_after and lowered[0] not in known and lowered[0] not in mid:
            if len(run) > 1 and (lowered[0] in words.KEYPHRASE_STOP or lowered[0].endswith(_NOT_NAME_ENDINGS)):
                run, lowered = run[1:], lowered[1:]  # "Met Anna": a verb opens the sentence
            elif len(run) == 1 and not (vocative and not lowered[0].endswith(_NOT_NAME_ENDINGS)):
                continue  # one capitalised word opening a sentence: a name only if known, or called ("Mel, ...")
        if len(run) == 1 and lowered[0] in words.COMMON_CAPITALISED:
            continue
        out.append(" ".join(run))
    return out


_KO_SUFFIX = re.compile(
    "(?P<stem>.+?)(?:(?P<hon>{h})(?:{p})?|(?P<par>{p}))".format(
        h="|".join(words.KO_HONORIFICS), p="|".join(sorted(words.KO_PARTICLES, key=len, reverse=True))
    )
)


@lru_cache(maxsize=8192)
def _ko_stem(word: str) -> tuple[str, str]:
    """The word without its particle or honorific, and what it had: "honorific", "person" (a particle that follows
    people: 는, 랑, 한테, ...), "particle" (any other: 에서, 로, ...) or ""."""
    m = _KO_SUFFIX.fullmatch(word)
    if m is None:
        return word, ""
    if m.group("hon"):
        return m.group("stem"), "honorific"
    return m.group("stem"), "person" if m.group("par") in words.KO_PERSON_PARTICLES else "particle"


def _ko_given(stem: str) -> bool:
    # a second syllable 하 or 기 is far more often a verb ("일하는", "가기로") than a name
    return (
        len(stem) == 2
        and stem[0] in words.KO_NAME_SYLLABLES
        and stem[1] in words.KO_NAME_SYLLABLES
        and stem[1] not in "하기"
    )


def _honorific(tok: _Tok) -> bool:
    """A word that is only an honorific and its particle: "씨", "님이", "씨한테"."""
    word = tok.text
    return tok.korean and word[0] in words.KO_HONORIFICS and (len(word) == 1 or word[1:] in words.KO_PARTICLES)


def _ko_name(stem: str, kind: str, known: set[str]) -> str | None:
    if stem in words.KO_NOT_NAMES:
        return None
    if stem in words.KO_KNOWN_NAMES or stem in known:
        return stem
    if kind == "honorific":
        if stem in words.KO_TITLES or any(stem.endswith(t) and len(t) > 1 for t in words.KO_TITLES):
            return None
        return stem if 1 <= len(stem) <= 4 else None
    if kind != "person":
        return None  # "정상에서", "학교로": a place particle; places count only when listed
    if _ko_given(stem):
        return stem
    if len(stem) == 3 and stem[0] in words.KO_SURNAMES and _ko_given(stem[1:]) and stem[1:] not in words.KO_NOT_NAMES:
        return stem
    if len(stem) == 3 and stem.endswith("이") and _ko_given(stem[:2]) and stem[:2] not in words.KO_NOT_NAMES:
        return stem[:2]  # "지민이가": the friendly -이 after a name ending in a consonant
    return None


def _korean_names(tokens: list[_Tok], known: set[str]) -> list[str]:
    out: list[str] = []
    for i, tok in enumerate(tokens):
        if not tok.korean or (i > 0 and tokens[i - 1].end == tok.start and not tokens[i - 1].korean):
            continue  # a particle glued to a Latin word ("Google에서")
        stem, kind = _ko_stem(tok.text)
        following = tokens[i + 1] if i + 1 < len(tokens) else None
        if kind == "" and following is not None and _honorific(following):
            kind = "honorific"  # "민수 씨", not "좋은 씨앗"
        name = _ko_name(stem, kind, known)
        if name is not None:
            out.append(name)
    return out


def _dedupe(names: Iterable[str], limit: int) -> list[str]:
    seen: dict[str, str] = {}
    for name in names:
        seen.setdefault(name.lower(), name)
        if len(seen) >= limit:
            break
    return list(seen.values())


def _shouting(tokens: list[_Tok]) -> bool:
    """Title Case or capitals throughout: capitalisation says nothing then."""
    latin = [t.text for t in tokens if not t.korean]
    return len(latin) >= 6 and sum(1 for w in latin if w[0].isupper()) > 0.6 * len(latin)


def _names(text: str, tokens: list[_Tok], speaker: str | None, known: Iterable[str], question: bool) -> list[str]:
    known_set = {k.lower() for k in known}
    if speaker:
        known_set.update(p.lower() for p in speaker.split())
        known_set.add(speaker.lower())
    found: list[str] = []
    if not _shouting(tokens):
        found.extend(_latin_names(text, tokens, known_set, question))
    found.extend(_korean_names(tokens, known_set))
    return found


# -------------------------------------------------------------------------------------------------------- keyphrases

_PHRASE_SPLIT = re.compile(r"[^\w\s'’-]+|\s[-–—]\s|\n")
_EN_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*[A-Za-z]|[A-Za-z]")


def _english_keyphrases(text: str) -> list[str]:
    counts: dict[str, int] = {}
    for chunk in _PHRASE_SPLIT.split(text):
        run: list[str] = []
        for word in [*_EN_WORD.findall(chunk), ""]:
            # capitalised words end a phrase: they are names (found apart) or open a sentence
            if word and not word[0].isupper() and word not in words.KEYPHRASE_STOP and len(word) > 1:
                run.append(word)
                continue
            if 2 <= len(run) <= 3:
                phrase = " ".join(run)
                counts[phrase] = counts.get(phrase, 0) + 1
            elif len(run) > 3:  # a long run is a list more often than a phrase: keep its last two words
                phrase = " ".join(run[-2:])
                counts[phrase] = counts.get(phrase, 0) + 1
            run = []
    # most repeated first, then longest, then first seen (dicts keep insertion order, sorted() is stable)
    return sorted(counts, key=lambda p: (-counts[p], -p.count(" ")))


# Adverbs and time words: they open no noun phrase ("작년 여름" is a date, found by the date normaliser).
_KO_NOT_PHRASE_START = frozenset(
    """정말 진짜 너무 아주 조금 많이 그냥 다시 같이 함께 오늘 어제 내일 지금 요즘 항상 자주 지난주 이번주 다음주 지난달
    이번달 다음달 작년 올해 내년 재작년 지난 이번 다음 주말 아침 저녁 점심 새벽""".split()
)


def _korean_keyphrases(tokens: list[_Tok]) -> list[str]:
    out: list[str] = []
    for first, second in zip(tokens, tokens[1:], strict=False):
        if not (first.korean and second.korean) or second.start - first.end != 1:
            continue
        if len(first.text) < 2 or first.text in _KO_NOT_PHRASE_START or first.text[0] in words.KO_HONORIFICS:
            continue
        head, kind = _ko_stem(first.text)
        if first.text.endswith(words.KO_VERB_ENDINGS) or (kind and (len(first.text) != 2 or first.text[-1] != "가")):
            continue  # a verb, or a noun with its particle ("요가" is a noun, not 요 + 가): no compound with the next
        stem, kind = _ko_stem(second.text)
        if kind in ("person", "particle") and len(stem) >= 2 and not stem.endswith(words.KO_VERB_ENDINGS):
            out.append(f"{first.text} {stem}")
    return out


# ----------------------------------------------------------------------------------------------------------- public


def extract(text: str, known: Iterable[str] = (), header: Header | None = None) -> Entities:
    """The speaker, names and keyphrases of one text. `known`: names already known (a thread's speakers), which then
    count even where they open a sentence. `header`: the text's `split_header`, if the caller has it already."""
    if header is None:
        header = split_header(text)
    body = text[header.body_start :]
    tokens = _tokens(body)
    names = _names(body, tokens, header.speaker, known, question=False)
    phrases = _english_keyphrases(body) + _korean_keyphrases(tokens)
    return Entities(header.speaker, _dedupe(names, _MAX_NAMES), _dedupe(phrases, _MAX_KEYPHRASES))


def question_names(question: str) -> list[str]:
    """The names a question mentions: "What did Caroline paint?" -> ["Caroline"]; "민수는 어디 갔어?" -> ["민수"].

    Unlike a memory, a question's first word counts as a name unless it is a common word ("Caroline's hobbies?").
    """
    return _dedupe(_names(question, _tokens(question), None, (), question=True), _MAX_NAMES)

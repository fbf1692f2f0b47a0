"""Questions that relate two events in time (issue 53 item 2): "What did Caroline do after the adoption meeting?",
"What did Mel paint before her trip to Paris?", "When did he meet them after returning?", "입양 모임 후에 뭐 했어?",
"파리에 가기 전에 뭘 그렸어?". `relation(text)` splits such a question into its ask and its anchor clause (the event
the answer is placed against) and says on which side of the anchor's time the answer lies; recall finds the anchor's
row among the rows it read and orders the rest by that time (recall.relations).

Pure, no I/O. Not relations, on purpose:
- a time named by a date expression ("the week before August 3, 2023", "two weeks before 11 May", "the day after",
  "3일 전"): text.dates resolves those, and the time boost uses them;
- idioms and words that point back rather than to an event ("after all", "before I forget", "after that", "before
  long", "as before", "than ever before", "전에 말했듯이");
- a question that asks the gap ("After how many weeks did ...": the clause after the word is the ask);
- an anchor clause with no word of its own (a stopword or a pronoun only).
A "when" or "while" clause ("How did she feel while camping?") relates no order: its answer is the anchor's row.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from memento_shared.text import dates
from memento_shared.text.keywords import STOPWORDS

Side = Literal["after", "before"]

_EN = re.compile(r"\b(after|before)(?=\s)", re.IGNORECASE)  # "after-school" is no relation
# what may follow the word in an idiom, a reference back or a question about the gap, not an event
_EN_NOT = re.compile(
    r"(?:all|that|this|then|which|long|a\s+while|a\s+bit|i\s+forget|i\s+forgot|you\s+know\s+it|it|so|how|what"
    r"|when|where|who|why|ever|now|hand|the\s+fact|doing\s+so|did|does|do|was|were|is|are|will|would|can|could"
    r"|has|have|had|about|or|and)\b",
    re.IGNORECASE,
)
# words before it that make it an adverb: "never before", "as before", "than ever before"
_EN_NOT_AFTER = re.compile(r"\b(?:ever|never|than|as|like|since|until|till|from)\s*$", re.IGNORECASE)
# verbs that make "after" part of them: "look after the dog", "named after her grandmother"; and "or"/"and" before the
# word, the second side of a question asking both ("before and after the migration")
_EN_PHRASAL = re.compile(
    r"\b(?:look|looks|looked|looking|name|named|take|takes|took|taking|go|goes|went|going|chase|chased|ask|asked"
    r"|seek|sought|or|and)\s*$",
    re.IGNORECASE,
)
_EN_DEGREE = re.compile(r"\b(?:just|right|shortly|soon|long|immediately|straight)\s*$", re.IGNORECASE)
_END = re.compile(r"[,;.!?？。]|\s+(?:and|but|or|so)\s+(?=(?:what|who|when|where|why|how|did|do|does|was|is)\b)", re.I)
# Korean: a clause ending in a verb's ㄴ form (한, 다녀온, 먹은...) or a noun, then 후/뒤/다음 (after), or a clause in
# 기 or a noun, then 전 (before), with an optional 에/에는/엔/부터
_KO = re.compile(r"(?<![가-힣])(후|뒤|다음|이후|전|이전|직후|직전)(?:에는|에|엔|부터|까지|의)?(?![가-힣])")
_KO_SIDE: dict[str, Side] = {
    "후": "after", "뒤": "after", "다음": "after", "이후": "after", "직후": "after",
    "전": "before", "이전": "before", "직전": "before",
}  # fmt: skip
# a word before the marker that makes it a time or a reference back, not an event: "얼마 전", "오래 전", "그 후"
_KO_NOT = frozenset("얼마 오래 조금 방금 한참 아까 그 이 저 그때 그런 이런 저런 언제 몇 며칠 예전 훨씬".split())
_KO_WORD = re.compile(r"[가-힣A-Za-z0-9]+")
# a bare 전 (no 에/에는...) then a space reads "before" only after a verb's 기 form ("떠나기 전 무엇을"); after
# anything else it is taken for the pronoun (저는) or the prefix "all/former" ("회사 전 직원")
_KO_BEFORE_OK = re.compile(r"기$")
_WORD = re.compile(r"[0-9A-Za-z가-힣]+")
_PRONOUNS = frozenset("i you he she it we they me him her us them this that there here".split())


@dataclass(frozen=True)
class Relation:
    """A question relating two events: the answer lies on `side` of the `anchor` clause's time; `ask` is the rest."""

    side: Side
    ask: str
    anchor: str


def relation(text: str, found: Sequence[dates.Mention] | None = None) -> Relation | None:
    """`text`'s relation between two events (module docstring), or None when it relates none; `found`, the date
    expressions in `text` when the caller has them already (dates.mentions; only their spans are read)."""
    if found is None:
        found = dates.mentions(text, datetime.now(UTC))
    spans = [m.span for m in found]
    return _english(text, spans) or _korean(text, spans)


def _inside(at: int, spans: list[tuple[int, int]]) -> bool:
    return any(start <= at < end for start, end in spans)


def _has_words(clause: str) -> bool:
    found = [w for w in _WORD.findall(clause.lower()) if len(w) > 1]
    return any(w not in STOPWORDS and w not in _PRONOUNS for w in found)


def _english(text: str, spans: list[tuple[int, int]]) -> Relation | None:
    for m in _EN.finditer(text):
        word, rest = m.group(1).lower(), text[m.end() :]
        if _inside(m.start(), spans) or _EN_NOT.match(rest.lstrip()):
            continue
        if _EN_NOT_AFTER.search(text[: m.start()]) or _EN_PHRASAL.search(text[: m.start()]):
            continue
        end = _END.search(rest)
        anchor = rest[: end.start()] if end else rest
        anchor_at = m.end() + len(anchor) - len(anchor.lstrip())
        anchor = anchor.strip()
        if not _has_words(anchor) or _starts_with_date(anchor_at, spans):
            continue
        ask = _EN_DEGREE.sub("", text[: m.start()]) + (rest[end.start() :] if end else "")
        return Relation("after" if word == "after" else "before", _tidy(ask), anchor)
    return None


def _starts_with_date(at: int, spans: list[tuple[int, int]]) -> bool:
    """The anchor clause starting at `at` is a date ("before April 10, 2023", "before the 10th"): a time, not an
    event. A date found within its first four characters counts ("the ")."""
    return any(start <= at + 4 and end > at for start, end in spans)


def _korean(text: str, spans: list[tuple[int, int]]) -> Relation | None:
    for m in _KO.finditer(text):
        if _inside(m.start(), spans):
            continue
        before = text[: m.start()].rstrip()
        words = _KO_WORD.findall(before)
        if not words or words[-1] in _KO_NOT:
            continue
        if m.group(0) == "전" and not _KO_BEFORE_OK.search(words[-1]) and text[m.end() : m.end() + 1] == " ":
            continue  # "회의에서 전 무슨 말을", "회사 전 직원": the pronoun or "all/former", not "before"
        clause_start = max(before.rfind(c) for c in ",.;!?")  # the anchor runs from the last stop to the marker
        anchor = before[clause_start + 1 :].strip()
        if not _has_words(anchor):
            continue
        ask = f"{before[: clause_start + 1]} {text[m.end() :]}"
        return Relation(_KO_SIDE[m.group(1)], _tidy(ask), anchor)
    return None


def _tidy(text: str) -> str:
    return re.sub(r"\s+(?=[,;.!?？。])", "", " ".join(text.split())).strip(" ,")

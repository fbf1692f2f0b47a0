"""The entities a memory links by, and what a question asks of them (issue 53 item 1-2): offline, no model.

A memory's entity tokens (`entity_tokens`, stored in fragments.entities, migration 0025): its speaker `s:<name>`,
every other name it gives as `n:<name>` or, for a place, `p:<name>` (lower case), and a marker of the kinds it names:
`=named` for any name, `=place` for a place. A place is a listed one (entity_words.PLACES, KO_PLACES) or a name right
after "in", "to", "from", "visited"... ("a trip to Rome"). Kinds that are not names are marked by their words (their
stems, entity_words): `=activity` ("swimming", "pottery"), `=event` ("festival", "fundraiser"), `=food`, `=animal`,
`=instrument`; the lists leave out words of software talk ("race", "cookie", "cat", "event"), and a word whose stem is
one counts only as written ("painting", not "paint"), as this is a coding agents' store first. Two memories are linked
by the tokens they share.

A question's ask (`asked`): the people it is about (its names, as `s:` and `n:` tokens) and the kind of thing it
asks for ("Which cities..." a place, "What books..." something named, "What activities..." an activity), when it
asks for a list of them: a plural after "what"/"which" ("What books has Tim read?"), "both", "how many"; in Korean a
name with a kind word ("민수가 가 본 도시는?", "민수가 좋아하는 운동은?").
Such answers sit in several memories that share the person and the kind but few words with the question, which is what
the second hop (recall.hops) follows. Any other question gets None: the hop is not read.

When an LLM draws a memory's facts (the evaluator), the names they give join its tokens (`fact_tokens`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from memento_shared.text import entity_words as words
from memento_shared.text.entities import Entities, extract, question_names
from memento_shared.text.stems import stem
from memento_shared.text.stems import words as stemmed_words

__all__ = ["WORD_KINDS", "Asked", "asked", "entity_tokens", "fact_tokens", "word_kinds"]

NAMED, PLACE = "=named", "=place"
# a place's cue: the words right before a name ("in", "to the", "visited")
_PLACE_CUE = re.compile(
    r"\b(?:in|to|from|at|near|around|across|through|visit(?:ed|ing|s)?|tour(?:ed|ing)?)\s+(?:the\s+)?$", re.I
)
_PLACE_ASK = re.compile(
    r"\b(?:cit(?:y|ies)|countr(?:y|ies)|states?|places?|locations?|areas?|regions?|where|travel\w*|visit\w*|"
    r"vacation\w*|trips?)\b|어디|도시|나라|국가|지역|장소|여행",
    re.I,
)
_NAMED_ASK = re.compile(
    r"\b(?:books?|novels?|movies?|films?|series|shows?|games?|songs?|bands?|artists?|authors?|names?|players?|"
    r"brands?|teams?)\b|책|소설|영화|드라마|게임|노래|밴드|가수|작가|이름",
    re.I,
)
ACTIVITY, EVENT, FOOD, ANIMAL, INSTRUMENT = "=activity", "=event", "=food", "=animal", "=instrument"
_KIND_WORDS = {
    ACTIVITY: words.ACTIVITY_WORDS,
    EVENT: words.EVENT_WORDS,
    FOOD: words.FOOD_WORDS,
    ANIMAL: words.ANIMAL_WORDS,
    INSTRUMENT: words.INSTRUMENT_WORDS,
}
# the kinds that are not names: a memory is marked by its words (their stems, or as written: entity_words.AS_WRITTEN),
# a question by its kind word
WORD_KINDS = {kind: frozenset(stem(w) for w in listed - words.AS_WRITTEN) for kind, listed in _KIND_WORDS.items()}
_WORD_KINDS_AS_WRITTEN = {kind: listed & words.AS_WRITTEN for kind, listed in _KIND_WORDS.items()}
_WORD_KIND_ASKS = {
    ACTIVITY: re.compile(
        r"\b(?:activit(?:y|ies)|hobb(?:y|ies)|sports?|exercises?|workouts?|interests?|martial arts|outdoor|pastimes?)\b"
        r"|활동|취미|운동|스포츠",
        re.I,
    ),
    EVENT: re.compile(
        r"\b(?:events?|festivals?|concerts?|competitions?|tournaments?|conferences?|shows?)\b|행사|이벤트|축제|공연|대회",
        re.I,
    ),
    FOOD: re.compile(r"\b(?:recipes?|desserts?|dishes|foods?|meals?|treats?)\b|음식|요리|레시피|디저트", re.I),
    ANIMAL: re.compile(r"\b(?:pets?|animals?)\b|반려동물|동물", re.I),
    INSTRUMENT: re.compile(r"\binstruments?\b|악기", re.I),
}
_KIND_WORD = re.compile("|".join(f"(?:{p.pattern})" for p in (_PLACE_ASK, _NAMED_ASK, *_WORD_KIND_ASKS.values())), re.I)
# a list is asked for: "What books has...", "Which US cities does...", "both", "how many"; in Korean a kind word does
_LIST_ASK = re.compile(
    r"\b(?:what|which)\s+(?:\S+\s+){0,2}?\w+(?<!s)s\s+(?:has|have|does|do|did|is|are|was|were)\b|\bboth\b|\bhow many\b"
    r"|[가-힣]",
    re.I,
)


def entity_tokens(content: str, entities: Entities | None = None, known: Iterable[str] = ()) -> list[str]:
    """The tokens `content` links by (module docstring), sorted; `entities` when the caller has extracted them;
    `known`, names that count even where they open a sentence (text.entities.extract)."""
    found = entities or extract(content, known)
    speaker = found.speaker.lower() if found.speaker else None
    tokens = {f"s:{speaker}"} if speaker else set()
    for name in found.names:
        low = name.lower()
        if low == speaker or low.rstrip("s") in words.WEEKDAYS:  # "Fridays": a time, though capitalised
            continue
        place = _is_place(name, low, content)
        tokens.update((f"p:{low}", PLACE, NAMED) if place else (f"n:{low}", NAMED))
    tokens.update(word_kinds(content))
    return sorted(tokens)


def word_kinds(text: str) -> list[str]:
    """The markers of the kinds that are not names whose words `text` holds (module docstring)."""
    written = stemmed_words(text, stems=False)
    found = frozenset(map(stem, written))
    return [kind for kind, held in WORD_KINDS.items() if found & held or written & _WORD_KINDS_AS_WRITTEN[kind]]


def fact_tokens(facts: str, tokens: Iterable[str]) -> list[str]:
    """The tokens a memory's facts (an LLM's, one a line; evaluator) add to its own `tokens`: the names they give, the
    memory's speaker and names known ("Gina opened her studio in Austin" names Gina though she opens it)."""
    held = list(tokens)
    known = [t[2:] for t in held if t.startswith(("s:", "n:", "p:"))]
    added = entity_tokens(facts, known=[k.title() for k in known] + known)
    speakers = {t[2:] for t in held if t.startswith("s:")}
    return sorted(set(held) | {t for t in added if not t.startswith("s:") and t[2:] not in speakers})


def _is_place(name: str, low: str, content: str) -> bool:
    if low in words.PLACES or low in words.KO_PLACES or any(w in words.PLACES for w in low.split()):
        return True
    at = content.find(name)
    return at > 0 and _PLACE_CUE.search(content[max(0, at - 24) : at]) is not None


@dataclass(frozen=True)
class Asked:
    """What a list question asks (module docstring)."""

    subjects: tuple[str, ...]  # the people it is about, as tokens: "s:tim", "n:tim"
    kinds: tuple[str, ...]  # the kinds of thing it asks for: PLACE, NAMED, WORD_KINDS' keys, or none
    names: frozenset[str]  # its names in lower case: never followed as a link (every row of the hop holds them)


def asked(question: str, by_words: bool = True) -> Asked | None:
    """The ask of a question that wants a list of things about someone it names, else None; `by_words` off, it
    asks for places and named things only (RECALL_HOP_WORD_KINDS)."""
    # a kind word before a particle reads as a Korean name ("도시는"): it is what is asked for, not whom
    names = [n.lower() for n in question_names(question) if not _KIND_WORD.fullmatch(n)]
    if not names or not _LIST_ASK.search(question):
        return None
    kinds: tuple[str, ...] = (
        (PLACE,) if _PLACE_ASK.search(question) else (NAMED,) if _NAMED_ASK.search(question) else ()
    )
    if by_words:
        kinds += tuple(kind for kind, ask in _WORD_KIND_ASKS.items() if ask.search(question))
    if not kinds and re.search(r"[가-힣]", question):
        return None  # a Korean question asks for a list only by its kind word
    subjects = tuple(t for n in names for t in (f"s:{n}", f"n:{n}"))
    return Asked(subjects, kinds, frozenset(names))

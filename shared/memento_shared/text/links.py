"""The entities a memory links by, and what a question asks of them (issue 53 item 1-2): offline, no model.

A memory's entity tokens (`entity_tokens`, stored in fragments.entities, migration 0025): its speaker `s:<name>`,
every other name it gives as `n:<name>` or, for a place, `p:<name>` (lower case), and a marker of the kinds it names:
`=named` for any name, `=place` for a place. A place is a listed one (entity_words.PLACES, KO_PLACES) or a name right
after "in", "to", "from", "visited"... ("a trip to Rome"). Two memories are linked by the tokens they share.

A question's ask (`asked`): the people it is about (its names, as `s:` and `n:` tokens) and the kind of thing it
asks for ("Which cities..." a place, "What books..." something named), when it asks for a list of them: a plural
after "what"/"which" ("What books has Tim read?"), "both", "how many"; in Korean a name with a kind word
("민수가 가 본 도시는?").
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

__all__ = ["Asked", "asked", "entity_tokens", "fact_tokens"]

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
_KIND_WORD = re.compile(f"(?:{_PLACE_ASK.pattern})|(?:{_NAMED_ASK.pattern})", re.I)
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
    return sorted(tokens)


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
    kinds: tuple[str, ...]  # the kinds of thing it asks for: PLACE, NAMED, or none (the hop follows links alone)
    names: frozenset[str]  # its names in lower case: never followed as a link (every row of the hop holds them)


def asked(question: str) -> Asked | None:
    """The ask of a question that wants a list of things about someone it names, else None."""
    # a kind word before a particle reads as a Korean name ("도시는"): it is what is asked for, not whom
    names = [n.lower() for n in question_names(question) if not _KIND_WORD.fullmatch(n)]
    if not names or not _LIST_ASK.search(question):
        return None
    kinds = (PLACE,) if _PLACE_ASK.search(question) else (NAMED,) if _NAMED_ASK.search(question) else ()
    if not kinds and re.search(r"[가-힣]", question):
        return None  # a Korean question asks for a list only by its kind word
    subjects = tuple(t for n in names for t in (f"s:{n}", f"n:{n}"))
    return Asked(subjects, kinds, frozenset(names))

"""Words to their stems (issue 53), so a question's word finds a memory that says it in another form: "camped" and
"camping" are both "camp", "paintings" is "paint", 요가를 and 요가는 are both 요가.

- English (and any Latin-script word): the Snowball English stemmer (PyStemmer, the Snowball project's C code; a
  pure-Python stemmer took ~70 µs a word, this one under 1 µs).
- Korean: the word without a trailing particle (keywords' list), when two syllables or more are left.

Memories keep the stems their words do not already spell in their expansion (text.annotate), so the full-text index
finds "camping" by "camp"; the lexical search asks for a word or its stem; recall's context list compares stems.
Pure functions, no I/O.
"""

from __future__ import annotations

import re
from functools import lru_cache

import Stemmer

from memento_shared.text.keywords import KO_PARTICLES, STOPWORDS

__all__ = ["stem", "new_stems", "content_stems", "with_fact_stems", "words"]

MAX_STEMS = 80
_CONTENT_WORD = re.compile(r"[0-9a-z가-힣_]+")  # a word as recall's lexical side splits it

_ENGLISH = Stemmer.Stemmer("english")
_HANGUL = re.compile(r"[가-힣]")
_LATIN = re.compile(r"[a-z]")
_PARTICLES = tuple(sorted(KO_PARTICLES, key=len, reverse=True))


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """The stem of one lower-case word; a word that is neither English nor Korean (digits, an identifier) as given."""
    if _HANGUL.match(word):
        for particle in _PARTICLES:
            if word.endswith(particle) and len(word) - len(particle) >= 2:
                return word[: -len(particle)]
        return word
    if _LATIN.search(word) and word.isalpha():
        return str(_ENGLISH.stemWord(word))
    return word


def words(text: str, stems: bool = True) -> frozenset[str]:
    """The stems of `text`'s words of two letters or more, split as recall's lexical side splits them: a question's
    "camped" and a row's "camping" meet as "camp"; with `stems` off, the words."""
    found = (w for w in _CONTENT_WORD.findall(text.lower()) if len(w) > 1)
    return frozenset(map(stem, found) if stems else found)


def new_stems(words: list[str], limit: int) -> list[str]:
    """The stems of `words` that none of them already is, first seen first, at most `limit`: what a memory's
    expansion adds so the full-text index finds it by a stem."""
    have = set(words)
    out: dict[str, None] = {}
    for word in words:
        s = stem(word)
        if s not in have and s not in out and len(s) > 1:
            out[s] = None
            if len(out) >= limit:
                break
    return list(out)


def with_fact_stems(expansion: str | None, facts: str | None) -> str | None:
    """`expansion` and then the stems of `facts`' words (an LLM's facts, fragments.facts) that neither the facts'
    words nor the expansion already spell: the full-text index finds a fact's "camping" by a question's "camped" as
    it finds the content's (issue 53)."""
    listed = set((expansion or "").split())
    extra = [s for s in content_stems(facts or "") if s not in listed]
    return " ".join([expansion or "", *extra]).strip() or None


def content_stems(content: str) -> list[str]:
    """The stems of `content`'s words (stopwords left out) that none of its words already is, at most MAX_STEMS."""
    found = [w for w in _CONTENT_WORD.findall(content.lower()) if len(w) > 1 and w not in STOPWORDS]
    return new_stems(found, MAX_STEMS)

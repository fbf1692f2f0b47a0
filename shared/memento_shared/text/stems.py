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

from memento_shared.text.keywords import KO_PARTICLES

__all__ = ["stem", "new_stems"]

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

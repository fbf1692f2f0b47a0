"""What a search embeds: the question a text asks, not the whole text.

The model's time grows with every token it reads (about 2.4 ms a token on one core here), and a turn or a context
message is often a paragraph around one question. A text within the bound is embedded whole; a longer one is cut to
its last question (its last sentence ending in "?", else its last sentence) and the sentence before it when both fit;
a sentence longer than the bound keeps its last words. The lexical search still reads the whole text.
"""

from __future__ import annotations

import re

from memento_shared.text.tokenizer import count_tokens

_SENTENCE = re.compile(r"(?<=[.!?。？！])\s+|\n+")
_ASKS = ("?", "？")


def question(text: str, max_tokens: int) -> str:
    """The part of `text` to embed: all of it within `max_tokens` (cl100k tokens), else its last question."""
    text = text.strip()
    if count_tokens(text) <= max_tokens:
        return text
    sentences = [s.strip() for s in _SENTENCE.split(text) if s.strip()]
    asked = [i for i, s in enumerate(sentences) if s.endswith(_ASKS)]
    last = asked[-1] if asked else len(sentences) - 1
    chosen = _last_words(sentences[last], max_tokens)
    if last > 0 and chosen == sentences[last]:
        with_before = f"{sentences[last - 1]} {chosen}"
        if count_tokens(with_before) <= max_tokens:
            chosen = with_before
    return chosen


def last_message(texts: list[str]) -> str:
    """The last of a turn's user messages that says anything: the one the turn asks."""
    return next((t for t in reversed(texts) if t.strip()), "")


def _last_words(sentence: str, max_tokens: int) -> str:
    """The sentence's last words within `max_tokens`: counted word by word from the end (each word with its leading
    space, as the tokenizer splits them), so a long sentence costs one pass."""
    words = sentence.split()
    kept, used = 0, 0
    for word in reversed(words):
        used += count_tokens(" " + word)
        if used > max_tokens and kept:
            break
        kept += 1
    return " ".join(words[len(words) - kept :])

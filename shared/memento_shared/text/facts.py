"""Facts an LLM draws from one memory, for the search index (issue 28): short standalone statements with pronouns
resolved to names and dates kept as written, so a question naming a person or an event finds a memory that says "I"
or "she". Pure functions: the prompt, and the answer's parsing (cleaned, deduplicated, bounded). The evaluator asks
the model (memento_evaluator.facts); fragments.facts holds the result, searched at the lowest weight."""

from __future__ import annotations

import re

from memento_shared.llm import json_array

MAX_FACTS = 8
MAX_CHARS = 200  # per fact
MAX_INPUT = 6000  # characters of the memory sent: the facts of a longer one come from its start
MAX_TOKENS = 600  # of the answer: eight facts of 200 characters, and the brackets

SYSTEM = (
    "You list the facts a memory states, for a search index. Return only a JSON array of strings, at most "
    f"{MAX_FACTS}, each one short standalone sentence under {MAX_CHARS} characters. Replace pronouns and speaker "
    'labels with the names they stand for ("Caroline joined a support group", not "I joined one"); keep dates and '
    "times exactly as the text writes them; state only what the text says. Return [] when it states no fact."
)

_SPACE = re.compile(r"\s+")


def prompt(content: str, topic: str = "") -> str:
    head = f"TOPIC: {topic.strip()}\n" if topic and topic.strip() else ""
    return f"{head}MEMORY:\n{content[:MAX_INPUT]}"


def parse(answer: str) -> list[str]:
    """The facts in a model's answer: the strings of its JSON array, whitespace collapsed, each cut to MAX_CHARS at a
    word boundary, without repeats (case-insensitive), at most MAX_FACTS. Anything else the model says is ignored;
    an answer with no array gives none."""
    found = json_array(answer)
    out: list[str] = []
    seen: set[str] = set()
    for item in found or []:
        if not isinstance(item, str):
            continue
        fact = _cut(_SPACE.sub(" ", item).strip())
        key = fact.casefold()
        if fact and key not in seen:
            seen.add(key)
            out.append(fact)
            if len(out) == MAX_FACTS:
                break
    return out


def joined(facts: list[str]) -> str | None:
    """What fragments.facts holds: one fact a line; None for no facts (the column stays NULL)."""
    return "\n".join(facts) if facts else None


def _cut(fact: str) -> str:
    if len(fact) <= MAX_CHARS:
        return fact
    head = fact[:MAX_CHARS]
    space = head.rfind(" ")
    return (head[:space] if space > MAX_CHARS // 2 else head).rstrip(" ,;:-")

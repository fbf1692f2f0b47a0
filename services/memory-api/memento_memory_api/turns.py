"""Seed 004's turn payloads: Responses-style items, their text, the injected `Memory recall:` block, and the limits
of seed §8. Pure functions: the lifecycle tools (tools/lifecycle/turn.py) do the I/O."""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from typing import Any

from memento_memory_api.settings import MemoryApiSettings
from memento_shared.errors import invalid
from memento_shared.sessions import text_of
from memento_shared.text.tokenizer import count_tokens
from memento_shared.tools.lifecycle import ConversationWindow, ResponseItem

RECALL_PREFIX = "Memory recall:"


def default_turn_id() -> str:
    return f"turn-{int(time.time() * 1000)}-{secrets.token_hex(3)}"


def as_dict(item: ResponseItem) -> dict[str, Any]:
    return item.model_dump(exclude_none=True)


def conversation_window(args: ConversationWindow) -> list[dict[str, Any]]:
    """The current input as `conversation_items` + `current_input_start` + `current_input_count` name it."""
    if args.current_input_start is None or args.current_input_count is None:
        raise invalid("current_input_start", "conversation_items needs current_input_start and current_input_count")
    items = args.conversation_items or []
    if args.current_input_start + args.current_input_count > len(items):
        raise invalid("current_input_count", f"runs past the {len(items)} conversation_items")
    window = items[args.current_input_start : args.current_input_start + args.current_input_count]
    return [as_dict(i) for i in window]


def is_recall(item: dict[str, Any]) -> bool:
    """A `Memory recall:` block memory_before_turn injected (a client replaying its input sends it back)."""
    return item.get("role") == "developer" and text_of(item).lstrip().startswith(RECALL_PREFIX)


def without_recall(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [item for item in items if not is_recall(item)]


def item_hash(item: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(item, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:32]


def tokens(items: list[dict[str, Any]]) -> int:
    """cl100k tokens of the items' text (what the model reads of them)."""
    return sum(count_tokens(text_of(item)) for item in items)


def message(role: str, text: str) -> dict[str, Any]:
    part = "output_text" if role == "assistant" else "input_text"
    return {"type": "message", "role": role, "content": [{"type": part, "text": text}]}


def check_limits(field: str, items: list[ResponseItem] | None, settings: MemoryApiSettings) -> None:
    """Seed §8: at most MEMORY_MAX_ITEMS items per array and MEMORY_MAX_PART_CHARS characters in any text of an item
    (a content part, a tool call's arguments or output, any other field); each refused naming the field
    (INVALID_ARGUMENT in this dialect)."""
    if items is None:
        return
    if len(items) > settings.memory_max_items:
        raise invalid(field, f"{len(items)} items, more than the {settings.memory_max_items} allowed")
    for i, item in enumerate(items):
        _check_texts(f"{field}.{i}", item.model_dump(exclude_none=True), settings.memory_max_part_chars)


def _check_texts(path: str, value: Any, limit: int) -> None:
    if isinstance(value, str):
        if len(value) > limit:
            raise invalid(path, f"more than {limit} characters")
    elif isinstance(value, dict):
        for key, inner in value.items():
            _check_texts(f"{path}.{key}", inner, limit)
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            _check_texts(f"{path}.{index}", inner, limit)


def recall_block(facts: list[str], context: list[str], dropped: int) -> str:
    lines = [RECALL_PREFIX]
    if facts:
        lines += ["Facts:", *(f"- {fact}" for fact in facts)]
    if dropped:
        lines.append(f"({dropped} earlier context items left out to fit the input window)")
    if context:
        lines += ["Recent context:", *context]
    if len(lines) == 1:
        lines.append("(nothing recalled)")
    return "\n".join(lines)


def fit(facts: list[str], context: list[str], fixed_tokens: int, budget: int) -> tuple[list[str], list[str], int]:
    """What of the recall fits beside the input (`fixed_tokens`: the current input and the client's instructions)
    within `budget` tokens: the oldest context lines go first, then the least relevant facts; the current input is
    never cut. Returns the facts and context kept and how many context lines were dropped."""
    facts, context = list(facts), list(context)
    dropped = 0
    # counted line by line, each line once (and a token for each line break): the block's own count can only be
    # smaller (a break may merge with the text before it), and re-encoding the whole block for each line cut was
    # most of a turn's Python
    fact_tokens = [count_tokens(f"- {fact}") + 1 for fact in facts]
    context_tokens = [count_tokens(line) + 1 for line in context]
    # the headers and the note of dropped lines, at most
    size = fixed_tokens + count_tokens(recall_block(["x"], ["x"], 1)) + sum(fact_tokens) + sum(context_tokens)
    while context and size > budget:
        context.pop(0)
        size -= context_tokens.pop(0)
        dropped += 1
    while facts and size > budget:
        facts.pop()
        size -= fact_tokens.pop()
    return facts, context, dropped

"""Tool name → handler. Handlers are bound explicitly to the seed's names, never guessed."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

from memento_memory_api.context import ToolContext


class Answer(NamedTuple):
    """A result whose text content is not its JSON: the protocol dialect answers in the words of its reference
    server (docs/dialects.md "Answers"), with the JSON in structuredContent."""

    result: dict[str, Any]
    text: str


Handler = Callable[[ToolContext, Any], Awaitable[dict[str, Any] | Answer]]
HANDLERS: dict[str, Handler] = {}


def handles(name: str) -> Callable[[Handler], Handler]:
    def bind(fn: Handler) -> Handler:
        if name in HANDLERS:
            raise RuntimeError(f"tool {name!r} bound twice")
        HANDLERS[name] = fn
        return fn

    return bind

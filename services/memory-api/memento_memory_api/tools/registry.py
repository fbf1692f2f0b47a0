"""Tool name → handler. Handlers are bound explicitly to the seed's names, never guessed."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from memento_memory_api.context import ToolContext

Handler = Callable[[ToolContext, Any], Awaitable[dict[str, Any]]]
HANDLERS: dict[str, Handler] = {}


def handles(name: str) -> Callable[[Handler], Handler]:
    def bind(fn: Handler) -> Handler:
        if name in HANDLERS:
            raise RuntimeError(f"tool {name!r} bound twice")
        HANDLERS[name] = fn
        return fn

    return bind

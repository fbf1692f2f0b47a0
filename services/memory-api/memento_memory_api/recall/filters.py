"""What a search holds its candidates to, at every tier and in every statement (seed 000 §6.3: the same filters at
L1, L2 and L3): a topic, a type, any of some tags, recall's narrowing (importance, anchors, case, creation time), and
whether superseded rows are candidates too. Expired rows never are (repositories.fragments.live). One value carries
them from a dialect's query through the engine to each statement, whose filter parameters take `values()`' order."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Filters:
    topic: str | None = None
    type: str | None = None
    superseded: bool = False  # superseded rows are candidates too
    tags: list[str] | None = None  # any of these keywords (seed 003's tags)
    # recall's other filters (repositories.fragments.narrowed): min_importance, is_anchor, case_id, created_from/_to
    narrow: dict[str, Any] | None = None

    @property
    def narrows(self) -> bool:
        """Whether a filter besides `superseded` is given: the search looks at a subset of the caller's rows."""
        return any(value is not None for value in (self.topic, self.type, self.tags, self.narrow))

    def values(self) -> tuple[str | None, str | None, bool, list[str] | None, dict[str, Any] | None]:
        """(topic, type, superseded, tags, narrow): the statements' filter parameters, in their order."""
        return self.topic, self.type, self.superseded, self.tags, self.narrow

    def key(self) -> tuple[Any, ...]:
        """A hashable form of the narrowing filters (a remembered plan's verdict is per filter)."""
        tags = tuple(self.tags) if self.tags is not None else None
        narrow = tuple(sorted(self.narrow.items())) if self.narrow is not None else None
        return self.topic, self.type, tags, narrow


NO_FILTERS = Filters()

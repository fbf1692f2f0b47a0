"""All tool contracts by name, and which ones a set of profiles exposes."""

from __future__ import annotations

from memento_shared.tools import documents, fragments, lifecycle, protocol, simple
from memento_shared.tools.spec import ToolSpec

PROFILES = ("fragments", "simple", "protocol", "lifecycle", "documents")
DEFAULT_PROFILES = ("fragments",)

TOOLS: dict[str, ToolSpec] = {
    spec.name: spec for spec in [*fragments.SPECS, *simple.SPECS, *protocol.SPECS, *lifecycle.SPECS, *documents.SPECS]
}


def tools_for(profiles: tuple[str, ...] | list[str]) -> list[ToolSpec]:
    wanted = set(PROFILES) if "all" in profiles else set(profiles)
    return [spec for spec in TOOLS.values() if spec.profile in wanted]

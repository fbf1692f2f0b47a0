"""Protocol versions. The four handshake revisions are negotiated by `initialize` (the client's version when
supported, else the newest we speak: seed 000 §11.4); the stateless revisions (2026-07-28) are declared by every
request itself and never negotiated."""

from __future__ import annotations

SUPPORTED = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")  # by initialize, in a session
OLDEST, LATEST = SUPPORTED[0], SUPPORTED[-1]
STATELESS = ("2026-07-28",)  # per request, no session
ALL = SUPPORTED + STATELESS  # oldest to newest: what server/discover and UnsupportedProtocolVersion list


def negotiate(requested: object) -> str:
    return requested if isinstance(requested, str) and requested in SUPPORTED else LATEST


def is_stateless(version: object) -> bool:
    return isinstance(version, str) and version in STATELESS


def has_annotations(version: str) -> bool:
    return ALL.index(version) >= ALL.index("2025-03-26")


def has_structured_output(version: str) -> bool:
    """outputSchema, structuredContent and tool titles."""
    return ALL.index(version) >= ALL.index("2025-06-18")

"""Protocol-version negotiation: the client's version when supported, else the newest we speak (seed 000 §11.4)."""

from __future__ import annotations

SUPPORTED = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
OLDEST, LATEST = SUPPORTED[0], SUPPORTED[-1]


def negotiate(requested: object) -> str:
    return requested if isinstance(requested, str) and requested in SUPPORTED else LATEST


def has_annotations(version: str) -> bool:
    return SUPPORTED.index(version) >= SUPPORTED.index("2025-03-26")


def has_structured_output(version: str) -> bool:
    """outputSchema, structuredContent and tool titles."""
    return SUPPORTED.index(version) >= SUPPORTED.index("2025-06-18")

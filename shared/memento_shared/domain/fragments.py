"""Pure fragment rules from seed 000 (§3.1, §5.2, §6.2): no I/O."""

from __future__ import annotations

import hashlib
import secrets
from typing import Literal

FragmentType = Literal["fact", "decision", "error", "preference", "procedure", "relation"]
TtlTier = Literal["hot", "warm", "cold", "permanent"]
RelationType = Literal["related", "caused_by", "resolved_by", "part_of", "contradicts"]

MAX_CONTENT_CHARS = 300
ELLIPSIS = "…"

DEFAULT_IMPORTANCE: dict[str, float] = {
    "preference": 0.95,
    "error": 0.9,
    "decision": 0.8,
    "procedure": 0.7,
    "relation": 0.6,
    "fact": 0.5,
}


def new_fragment_id() -> str:
    return "frag-" + secrets.token_hex(8)


def truncate(content: str) -> str:
    if len(content) <= MAX_CONTENT_CHARS:
        return content
    return content[: MAX_CONTENT_CHARS - 1] + ELLIPSIS


def content_hash(content: str) -> str:
    """First 16 hex of SHA-256 of the redacted, truncated content."""
    return hashlib.sha256(content.encode("utf-8")).hexdigest()[:16]


def infer_ttl(fragment_type: str, importance: float) -> TtlTier:
    """§5.2, evaluated in order."""
    if fragment_type == "preference":
        return "permanent"
    if importance >= 0.8:
        return "permanent"
    if fragment_type in ("error", "procedure"):
        return "hot"
    if importance >= 0.5:
        return "warm"
    return "cold"

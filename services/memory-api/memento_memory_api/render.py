"""A fragment row as tools return it (seed 000 §6.3's fields, plus the tier and similarity where known)."""

from __future__ import annotations

from typing import Any


def fragment(
    row: Any, tier: str | None = None, similarity: float | None = None, linked: bool = False
) -> dict[str, Any]:
    return {
        "id": row["id"],
        "content": row["content"],
        "topic": row["topic"],
        "type": row["type"],
        "keywords": list(row["keywords"]),
        "importance": round(float(row["importance"]), 4),
        "ttl_tier": row["ttl_tier"],
        "is_anchor": row["is_anchor"],
        "created_at": row["created_at"].isoformat(),
        "accessed_at": row["accessed_at"].isoformat() if row["accessed_at"] else None,
        "similarity": round(similarity, 4) if similarity is not None else None,
        "tier": tier,
        "linked": linked,
    }

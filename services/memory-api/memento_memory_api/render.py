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
    } | ({"caseId": row["case_id"]} if row.get("case_id") else {})


def memory(row: Any, relevance: float | None = None) -> dict[str, Any]:
    """Seed 002's Memory: any dialect's row, with confidence 1.0 unless one was given and source "extracted" unless it
    was stored as "explicit" (docs/dialects.md "simple"); a seed-002 client sees no type. Unset optional fields are left
    out, as the seed's examples show them."""
    answer = {
        "id": row["id"],
        "content": row["content"],
        "confidence": round(float(row["confidence"]), 4) if row["confidence"] is not None else 1.0,
        "source": "explicit" if row["source"] == "explicit" else "extracted",
        "created_at": row["created_at"].isoformat(),
        "updated_at": row["updated_at"].isoformat(),
        "accessed_at": (row["accessed_at"] or row["created_at"]).isoformat(),
    }
    for key in ("supersedes", "superseded_by"):
        if row[key] is not None:
            answer[key] = row[key]
    if relevance is not None:
        answer["relevance_score"] = relevance
    return answer

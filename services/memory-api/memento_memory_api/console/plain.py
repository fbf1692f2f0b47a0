"""Database rows as JSON-ready dicts for the console: instants as ISO text, arrays as lists, vectors left out."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

HIDDEN = {"embedding", "key_hash", "content_hash"}


def value(v: Any) -> Any:
    if isinstance(v, datetime):
        return v.isoformat()
    if isinstance(v, Decimal):
        return float(v)
    if isinstance(v, tuple | list):
        return [value(x) for x in v]
    if isinstance(v, dict):
        return {k: value(x) for k, x in v.items()}
    return v


def row(record: Any) -> dict[str, Any]:
    return {k: value(record[k]) for k in record.keys() if k not in HIDDEN}


def rows(records: list[Any]) -> list[dict[str, Any]]:
    return [row(r) for r in records]

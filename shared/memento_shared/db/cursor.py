"""Reading a large result in batches through a server-side cursor."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import asyncpg


async def fetch_batches(
    conn: asyncpg.Connection, sql: str, *args: Any, size: int
) -> AsyncIterator[list[asyncpg.Record]]:
    """The rows of `sql`, `size` at a time, in one pass under the transaction the caller holds open. One fetch per
    batch: iterating a cursor row by row cost more CPU in the caller than Postgres spent on the rows (the
    consolidator's first pass at a million fragments, bench/README.md "sixth pass")."""
    cursor = await conn.cursor(sql, *args)
    while batch := await cursor.fetch(size):
        yield batch

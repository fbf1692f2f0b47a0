"""What other rows say about deleted fragments, cleared with them: every path that deletes fragments (forget, a
memory's delete, expiry purges in memory-api and the consolidator) runs this in the deleting transaction."""

from __future__ import annotations

import asyncpg

# Seed 000 keeps linked_to as a denormalised adjacency list: the deleted ids leave it. A row whose replacement is
# deleted is current again (superseded_by cleared), and a replacement whose original is deleted no longer names it;
# supersession also linked the original to its replacement, so the linked_to condition finds those rows through the
# GIN index, and `supersedes` has an index of its own.
CLEAR_SQL = (
    "UPDATE agent_memory.fragments"
    " SET linked_to = ARRAY(SELECT unnest(linked_to) EXCEPT SELECT unnest($1::text[])),"
    " superseded_by = CASE WHEN superseded_by = ANY($1::text[]) THEN NULL ELSE superseded_by END,"
    " supersedes = CASE WHEN supersedes = ANY($1::text[]) THEN NULL ELSE supersedes END"
    " WHERE linked_to && $1::text[] OR supersedes = ANY($1::text[])"
)


async def clear_references(conn: asyncpg.Connection, ids: list[str]) -> None:
    if ids:
        await conn.execute(CLEAR_SQL, ids)

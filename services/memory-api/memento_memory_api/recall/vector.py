"""L3 semantic side: nearest neighbours in the active profile's partial HNSW index.

The profile id is inlined as a literal (validated by the table's CHECK) so the planner matches the partial
index even with generic plans. Iterative scan keeps returning rows when RLS and the agent filter discard
most of the graph's first candidates.
"""

from __future__ import annotations

import re

import asyncpg

_PROFILE = re.compile(r"^[a-z0-9_]+$")


def vector_sql(profile_id: str, dimension: int) -> str:
    if not _PROFILE.match(profile_id):
        raise ValueError(f"bad profile id {profile_id!r}")
    return (
        f"SELECT e.fragment_id, 1 - (e.embedding::vector({dimension}) <=> $1) AS similarity"
        f" FROM agent_memory.fragment_embeddings e WHERE e.profile_id = '{profile_id}'"
        " AND e.tenant_id = $2 AND e.workspace = $3 AND ($4::text[] IS NULL OR e.agent_id = ANY($4))"
        f" ORDER BY e.embedding::vector({dimension}) <=> $1 LIMIT $5"
    )


async def search(
    conn: asyncpg.Connection,
    profile_id: str,
    dimension: int,
    query_vector,
    tenant_id: str,
    workspace: str,
    agents: list[str] | None,
    limit: int,
) -> list[tuple[str, float]]:
    await conn.execute("SET LOCAL hnsw.iterative_scan = relaxed_order")
    await conn.execute(f"SET LOCAL hnsw.ef_search = {max(40, limit * 2)}")
    rows = await conn.fetch(vector_sql(profile_id, dimension), query_vector, tenant_id, workspace, agents, limit)
    return [(r["fragment_id"], float(r["similarity"])) for r in rows]

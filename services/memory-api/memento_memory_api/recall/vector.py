"""L3 semantic side: nearest neighbours among the caller's vectors in the active profile.

Under a tenant/agent filter an HNSW scan walks the whole graph's neighbourhood and throws most candidates away:
measured on PostgreSQL 18 + pgvector 0.8.6 at 100k rows and a 1% filter, plain HNSW returned ~0.4 of 10 rows,
HNSW with iterative scan 10 rows at recall 0.96 but p50 22 ms, an exact scan of the filtered rows 10 at recall
1.0 in p50 2.5 ms. So each query first counts its partition (bounded, through the scope b-tree):
- up to `exact_max` vectors: exact distances over just those rows (an OFFSET 0 fence keeps the planner off HNSW);
- more, or more than SHARE_FLOOR vectors that make up at least half of the profile's index (its planner
  statistics, pg_class.reltuples): the profile's partial HNSW index with `hnsw.iterative_scan = relaxed_order`, so
  filtered-out candidates make it search further instead of returning fewer than k rows; sorting is disabled for
  that statement because the choice to walk the index was already made on the partition's size.
The share matters because what slows HNSW under a filter is the candidates it must skip: when the partition is most
of the index (one user's store, the usual single-tenant deployment) there are few. Measured on a 10k store of one
partition, k = 50: exact p50/p95 19/25 ms plus 6 ms of counting, HNSW 3.8/8.6 ms at recall@10 0.997.
The profile id is inlined as a literal (validated by the table's CHECK) so the partial index predicate matches.

Round trips are the cost on a busy host, so `choose` counts and applies the index settings in one statement (the
caller runs it while the query is still being embedded), and `search` returns the fragments' rows with their
similarity, filtered by topic and type, in one more.

Counting reads up to exact_max + 1 index entries: 20-80 ms for a large partition at a million fragments, longer
than the query's embedding, and several ms for one near the threshold. Partition sizes move slowly, so
`PartitionVerdicts` remembers each verdict for a while and `choose` skips the count: "small" for a minute (an exact
scan is exact whatever the size, so a partition that grew meanwhile only costs a slower scan), "large" for five
(only forget and consolidation shrink one; a remembered partition that shrank goes through HNSW with iterative scan
until the verdict expires: slower than an exact scan, and for a partition that became tiny within a big index
possibly short of k rows, since the scan stops at hnsw.max_scan_tuples).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass

import asyncpg

from memento_memory_api.repositories.fragments import COLUMNS

_PROFILE = re.compile(r"^[a-z0-9_]+$")
# Under this many vectors an exact scan costs a few ms, as much as walking the index (2000 of 10k: 4.7 against 3.5 ms)
SHARE_FLOOR = 2000


@dataclass(frozen=True)
class Strategy:
    name: str  # "exact" or "hnsw"
    sql: str  # parameters: query vector, tenant, workspace, agents, k, topic, type
    settings: dict[str, str]  # transaction-local settings the statement needs (applied by `choose`)
    partition: tuple  # (tenant, workspace, agents, k): what `choose` counted and `search` looks in


def _scope(profile_id: str, first: int = 2) -> str:
    """The partition filter; its three parameters (tenant, workspace, agents) start at ${first}."""
    if not _PROFILE.match(profile_id):
        raise ValueError(f"bad profile id {profile_id!r}")
    t, w, a = first, first + 1, first + 2
    return (
        f"e.profile_id = '{profile_id}' AND e.tenant_id = ${t} AND e.workspace = ${w}"
        f" AND (${a}::text[] IS NULL OR e.agent_id = ANY(${a}))"
    )


def exact_sql(profile_id: str, dimension: int) -> str:
    # The distance is computed inside the fenced subquery (OFFSET 0), so ORDER BY cannot be pushed down to the HNSW
    # index and only (id, distance) pairs reach the top-N sort. Materialising the vectors themselves instead (a CTE)
    # spilled 1.5 kB per row to a temp file: 15.7 ms against 3.8 ms for 3.4k rows.
    return _with_rows(
        "SELECT fragment_id, 1 - distance AS similarity FROM ("
        f"SELECT e.fragment_id, e.embedding::vector({dimension}) <=> $1 AS distance"
        f" FROM agent_memory.fragment_embeddings e WHERE {_scope(profile_id)} OFFSET 0) candidates"
        " ORDER BY distance LIMIT $5"
    )


def hnsw_sql(profile_id: str, dimension: int) -> str:
    return _with_rows(
        f"SELECT e.fragment_id, 1 - (e.embedding::vector({dimension}) <=> $1) AS similarity"
        f" FROM agent_memory.fragment_embeddings e WHERE {_scope(profile_id)}"
        f" ORDER BY e.embedding::vector({dimension}) <=> $1 LIMIT $5"
    )


def _with_rows(nearest: str) -> str:
    """The k nearest, joined to their fragments; topic and type filter after the k are chosen, as for every tier."""
    columns = ", ".join("f." + c.strip() for c in COLUMNS.split(","))
    return (
        f"SELECT {columns}, hits.similarity FROM ({nearest}) hits"
        " JOIN agent_memory.fragments f ON f.id = hits.fragment_id"
        " WHERE ($6::text IS NULL OR f.topic = $6) AND ($7::text IS NULL OR f.type = $7)"
    )


class PartitionVerdicts:
    """Whether a partition (profile, tenant, workspace, agents, threshold) was counted above the exact-scan threshold,
    remembered for `large_ttl_s` / `small_ttl_s` seconds. Per process and bounded; it holds only verdicts, never rows.
    """

    def __init__(
        self,
        large_ttl_s: float = 300.0,
        small_ttl_s: float = 60.0,
        max_entries: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl_s = {True: large_ttl_s, False: small_ttl_s}
        self.max_entries = max_entries
        self.clock = clock  # tests pass their own: patching time.monotonic would also move the event loop's clock
        self._verdicts: dict[tuple, tuple[bool, float]] = {}

    def get(self, key: tuple) -> bool | None:
        """True (large), False (small), or None when not known or expired."""
        found = self._verdicts.get(key)
        if found is None:
            return None
        if found[1] < self.clock():
            del self._verdicts[key]
            return None
        return found[0]

    def put(self, key: tuple, large: bool) -> None:
        if len(self._verdicts) >= self.max_entries:
            now = self.clock()
            self._verdicts = {k: v for k, v in self._verdicts.items() if v[1] >= now}
            if len(self._verdicts) >= self.max_entries:
                self._verdicts.clear()
        self._verdicts[key] = (large, self.clock() + self.ttl_s[large])


async def choose(
    conn: asyncpg.Connection,
    profile_id: str,
    dimension: int,
    tenant_id: str,
    workspace: str,
    agents: list[str] | None,
    limit: int,
    exact_max: int,
    verdicts: PartitionVerdicts | None = None,
    share_floor: int = SHARE_FLOOR,
) -> Strategy:
    """Count the caller's partition (up to exact_max + 1), compare it with the profile's index, and pick the plan;
    for HNSW the same statement applies the index settings to the transaction. A partition whose verdict `verdicts`
    remembers is not counted again. Call `release` once the search is done (or skipped)."""
    hnsw = {"hnsw.iterative_scan": "relaxed_order", "hnsw.ef_search": str(max(40, limit * 2)), "enable_sort": "off"}
    partition = (tenant_id, workspace, agents, limit)
    key = (profile_id, tenant_id, workspace, tuple(agents) if agents is not None else None, exact_max, share_floor)
    known = verdicts.get(key) if verdicts is not None else None
    if known is False:
        return Strategy("exact", exact_sql(profile_id, dimension), {}, partition)
    apply = [f"set_config('{name}', '{value}', true)" for name, value in hnsw.items()]
    if known:
        await conn.execute("SELECT " + ", ".join(apply))
        return Strategy("hnsw", hnsw_sql(profile_id, dimension), hnsw, partition)
    applied = ", ".join(f"CASE WHEN large THEN {call} END" for call in apply)
    # reltuples is -1 until the index was first vacuumed or analysed: no share is known then
    large = await conn.fetchval(
        f"SELECT large, {applied} FROM (SELECT n > {int(exact_max)} OR (n > {int(share_floor)} AND total > 0"
        " AND n * 2 >= total) AS large FROM (SELECT count(*) AS n FROM (SELECT 1 FROM agent_memory.fragment_embeddings"
        f" e WHERE {_scope(profile_id, first=1)} LIMIT {int(exact_max) + 1}) s) c, (SELECT coalesce(max(reltuples), 0)"
        f" AS total FROM pg_class WHERE oid = to_regclass('agent_memory.fragment_embeddings_hnsw_{profile_id}')) t) d",
        tenant_id,
        workspace,
        agents,
    )
    if verdicts is not None:
        verdicts.put(key, large)
    if not large:
        return Strategy("exact", exact_sql(profile_id, dimension), {}, partition)
    return Strategy("hnsw", hnsw_sql(profile_id, dimension), hnsw, partition)


async def search(
    conn: asyncpg.Connection, strategy: Strategy, query_vector, topic: str | None = None, ftype: str | None = None
) -> list[asyncpg.Record]:
    """The `limit` nearest visible fragments of the partition `choose` counted, with their `similarity`, best
    first."""
    rows = await conn.fetch(strategy.sql, query_vector, *strategy.partition, topic, ftype)
    await release(conn, strategy)
    return sorted(rows, key=lambda r: r["similarity"], reverse=True)


async def release(conn: asyncpg.Connection, strategy: Strategy) -> None:
    """The rest of the transaction plans normally again."""
    if strategy.settings:
        await conn.execute("SELECT set_config('enable_sort', 'on', true)")

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
similarity in one more.

A topic or type filter (seed 000 §6.3: applied at every tier) goes inside the nearest-k search, not after it:
filtered afterwards, 60 close fragments of topic A would fill the k and hide topic B's weaker ones entirely. The
embeddings hold no topic or type, so the filtered variant of each plan checks each candidate's fragment. The exact
plan computes distances for the matching rows only (on a scratch store of 300k + 9k fragments with statistics, the
planner drove it from the fragments' scope and topic indexes: 9k partition, 5% topic 10 ms, 25% type 20 ms, against
15 ms unfiltered). The HNSW plan's iterative scan keeps walking the graph, a primary-key lookup per candidate, until
k pass, but stops at `hnsw.max_scan_tuples` (20,000 by default): a filter that few of a large partition's vectors
pass comes back short of k (30 rows of a 300k partition: 1 to 4 found in 150-300 ms). So for a large partition
`choose` also counts the fragments of the topic and type asked for, up to exact_max + 1 like the partition, and scores
them exactly when there are no more (the rule that makes small partitions exact, applied to the filter's rows); its
plan is made for the values given (see `release`). A walk that still returns fewer than k (a filter past exact_max
but far from the query, or a verdict that has gone stale) is topped up by an exact scan of at most exact_max of the
filter's rows, merged with what the walk found. Without a filter the statements are the ones measured above.

Counting reads up to exact_max + 1 index entries: 20-80 ms for a large partition at a million fragments, longer
than the query's embedding, and several ms for one near the threshold. Partition sizes move slowly, so
`PartitionVerdicts` remembers each verdict (a filter's too) for a while and `choose` skips the count: "small" for a
minute (an exact scan is exact whatever the size, so a partition that grew meanwhile only costs a slower scan),
"large" for five (only forget and consolidation shrink one; a remembered partition that shrank goes through HNSW with
iterative scan until the verdict expires: slower than an exact scan, and for a partition that became tiny within a
big index possibly short of k rows until the exact top-up, since the scan stops at hnsw.max_scan_tuples).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import asyncpg

from memento_memory_api.recall.filters import NO_FILTERS, Filters
from memento_memory_api.repositories.fragments import F_COLUMNS, live, narrowed, profile_literal, tagged

# Under this many vectors an exact scan costs a few ms, as much as walking the index (2000 of 10k: 4.7 against 3.5 ms)
SHARE_FLOOR = 2000


@dataclass(frozen=True)
class Strategy:
    name: str  # "exact" or "hnsw"
    sql: str  # parameters: query vector, then `params`
    settings: dict[str, str]  # transaction-local settings the statement needs (applied by `choose`)
    # Target.params(): what `choose` counted and `search` looks in
    params: tuple[Any, ...]
    fallback_sql: str | None = None  # after a filtered walk short of k: the exact plan over at most exact_max rows


def _scope(profile_id: str, first: int = 2) -> str:
    """The partition filter; its three parameters (tenant, workspace, agents) start at ${first}."""
    profile_id = profile_literal(profile_id)
    t, w, a = first, first + 1, first + 2
    return (
        f"e.profile_id = '{profile_id}' AND e.tenant_id = ${t} AND e.workspace = ${w}"
        f" AND (${a}::text[] IS NULL OR e.agent_id = ANY(${a}))"
    )


# Inside the nearest-k search: the candidate's fragment is of the topic ($6) and type ($7) asked for (NULL: any).
# It repeats the partition's tenant, workspace and agents (the embedding's copies of the fragment's own), so a join
# the planner builds from the fragments' side reads the caller's rows, never every tenant's of that topic (the
# fragments module's docstring); from the embeddings' side it is a primary-key lookup per candidate.
_FILTER = (
    " AND EXISTS (SELECT 1 FROM agent_memory.fragments f WHERE f.id = e.fragment_id AND f.tenant_id = $2"
    " AND f.workspace = $3 AND ($4::text[] IS NULL OR f.agent_id = ANY($4))"
    f" AND ($6::text IS NULL OR f.topic = $6) AND ($7::text IS NULL OR f.type = $7) AND {live('f', '$8')}"
    f" AND {tagged('f', '$9')} AND {narrowed('f', '$10')})"
)


@lru_cache(maxsize=64)
def exact_sql(profile_id: str, dimension: int, filtered: bool = False, cap: int | None = None) -> str:
    # The distance is computed inside the fenced subquery (OFFSET 0), so ORDER BY cannot be pushed down to the HNSW
    # index and only (id, distance) pairs reach the top-N sort. Materialising the vectors themselves instead (a CTE)
    # spilled 1.5 kB per row to a temp file: 15.7 ms against 3.8 ms for 3.4k rows. `cap` scores only that many.
    return _with_rows(
        "SELECT fragment_id, 1 - distance AS similarity FROM ("
        f"SELECT e.fragment_id, e.embedding::vector({dimension}) <=> $1 AS distance"
        f" FROM agent_memory.fragment_embeddings e WHERE {_scope(profile_id)}{_FILTER if filtered else ''}"
        f"{f' LIMIT {int(cap)}' if cap is not None else ''} OFFSET 0) candidates ORDER BY distance LIMIT $5"
    )


@lru_cache(maxsize=64)
def hnsw_sql(profile_id: str, dimension: int, filtered: bool = False) -> str:
    return _with_rows(
        f"SELECT e.fragment_id, 1 - (e.embedding::vector({dimension}) <=> $1) AS similarity"
        f" FROM agent_memory.fragment_embeddings e WHERE {_scope(profile_id)}{_FILTER if filtered else ''}"
        f" ORDER BY e.embedding::vector({dimension}) <=> $1 LIMIT $5"
    )


def _with_rows(nearest: str) -> str:
    """The k nearest, joined to their fragments. The topic and type condition here only restates, for the filtered
    statements, what their search already applied; for the unfiltered ones both parameters are NULL. Expired and
    (unless $8) superseded fragments are dropped here for the unfiltered ones: few rows are either, so the k nearest
    lose at most those few, where checking every candidate's fragment inside the walk would cost a lookup each."""
    return (
        f"SELECT {F_COLUMNS}, hits.similarity FROM ({nearest}) hits"
        " JOIN agent_memory.fragments f ON f.id = hits.fragment_id"
        f" WHERE ($6::text IS NULL OR f.topic = $6) AND ($7::text IS NULL OR f.type = $7) AND {live('f', '$8')}"
        f" AND {tagged('f', '$9')} AND {narrowed('f', '$10')}"
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
        self._verdicts: dict[tuple[Any, ...], tuple[bool, float]] = {}

    def get(self, key: tuple[Any, ...]) -> bool | None:
        """True (large), False (small), or None when not known or expired."""
        found = self._verdicts.get(key)
        if found is None:
            return None
        if found[1] < self.clock():
            del self._verdicts[key]
            return None
        return found[0]

    def put(self, key: tuple[Any, ...], large: bool) -> None:
        if len(self._verdicts) >= self.max_entries:
            now = self.clock()
            self._verdicts = {k: v for k, v in self._verdicts.items() if v[1] >= now}
            if len(self._verdicts) >= self.max_entries:
                self._verdicts.clear()
        self._verdicts[key] = (large, self.clock() + self.ttl_s[large])


HNSW_SETTINGS = {"hnsw.iterative_scan": "relaxed_order", "enable_sort": "off"}  # and hnsw.ef_search, from k
# an exact scan of a large partition's few filtered rows: planned for the topic and type given (see `release`)
CUSTOM_PLANS = {"plan_cache_mode": "force_custom_plan"}


@dataclass(frozen=True)
class Target:
    """What one nearest-vector search looks in: the profile's vectors of the caller's partition (tenant, workspace,
    agents; None: every agent's), the `limit` nearest wanted, of the rows that pass `filters`."""

    profile_id: str
    dimension: int
    tenant_id: str
    workspace: str
    agents: list[str] | None
    limit: int
    filters: Filters = NO_FILTERS

    def params(self) -> tuple[Any, ...]:
        """The search statements' parameters after the query vector ($2 onwards)."""
        return (self.tenant_id, self.workspace, self.agents, self.limit, *self.filters.values())

    def partition_key(self, exact_max: int, share_floor: int) -> tuple[Any, ...]:
        agents = tuple(self.agents) if self.agents is not None else None
        return self.profile_id, self.tenant_id, self.workspace, agents, exact_max, share_floor


async def choose(
    conn: asyncpg.Connection,
    target: Target,
    exact_max: int,
    verdicts: PartitionVerdicts | None = None,
    share_floor: int = SHARE_FLOOR,
) -> Strategy:
    """Count the caller's partition (up to exact_max + 1), compare it with the profile's index, and pick the plan;
    with a filter, a large partition's fragments that pass it are counted too (same bound), and few of them are
    scored exactly rather than walked to through the index. The same statement applies the chosen plan's settings to
    the transaction. A count `verdicts` remembers is not made again. Call `release` once the search is done (or
    skipped). The statements themselves are `plan`'s and `count_sql`'s."""
    key = target.partition_key(exact_max, share_floor)
    filter_key = (*key, *target.filters.key())
    large = verdicts.get(key) if verdicts is not None else None
    many = True if not target.filters.narrows else verdicts.get(filter_key) if verdicts is not None else None
    if large is False or (large and many is not None):
        if large:
            await conn.execute("SELECT " + ", ".join(_apply(settings_for(target, True, many))))
        return plan(target, bool(large), many, exact_max)
    sql, args = count_sql(target, exact_max, share_floor, large, many)
    row = await conn.fetchrow(sql, *args)
    if verdicts is not None:  # only what this statement counted: a remembered verdict keeps its own expiry
        if large is None:
            verdicts.put(key, row["large"])
        if many is None and target.filters.narrows and row["large"]:
            verdicts.put(filter_key, row["many"])
    return plan(target, row["large"], row["many"], exact_max)


def settings_for(target: Target, large: bool, many: bool | None) -> dict[str, str]:
    """The transaction settings of a verdict's plan: none for an exact scan of a small partition, the index walk's for
    a large one, custom plans for a large one's few filtered rows."""
    if not large:
        return {}
    return {**HNSW_SETTINGS, "hnsw.ef_search": str(max(40, target.limit * 2))} if many else CUSTOM_PLANS


def plan(target: Target, large: bool, many: bool | None, exact_max: int) -> Strategy:
    """The statements for a verdict on the partition (`large`) and on its rows that pass the filter (`many`): an exact
    scan unless both are large, then the profile's HNSW index, topped up by an exact scan of at most exact_max of the
    filter's rows when a filtered walk comes back short."""
    settings, params = settings_for(target, large, many), target.params()
    profile_id, dimension, filtered = target.profile_id, target.dimension, target.filters.narrows
    if not (large and many):
        return Strategy("exact", exact_sql(profile_id, dimension, filtered), settings, params)
    fallback = exact_sql(profile_id, dimension, True, int(exact_max)) if filtered else None
    return Strategy("hnsw", hnsw_sql(profile_id, dimension, filtered), settings, params, fallback)


def count_sql(
    target: Target, exact_max: int, share_floor: int, large: bool | None, many: bool | None
) -> tuple[str, list[Any]]:
    """The statement (and its parameters) that counts what is not known yet (`large` or `many` None) and applies the
    settings of the plan the counts choose: columns `large` and `many`."""
    args: list[Any] = [target.tenant_id, target.workspace, target.agents]
    partition = "true" if large else _partition_count(target.profile_id, exact_max, share_floor)
    if many is not None:
        matching = "true" if many else "false"
    else:
        matching = _filter_count(target.filters, exact_max, args)
    # Each count is a scalar subquery, run when first needed (the filter is not counted for a small partition).
    # OFFSET 0 keeps each level a subquery of its own: flattened, every reference to `large` would be a copy of its
    # subquery, counted again (up to ten partition counts per statement).
    applied = ", ".join(
        [f"CASE WHEN large AND many THEN {call} END" for call in _apply(settings_for(target, True, True))]
        + [f"CASE WHEN large AND NOT many THEN {call} END" for call in _apply(CUSTOM_PLANS)]
    )
    sql = (
        f"SELECT large, many, {applied} FROM (SELECT large, CASE WHEN large THEN {matching} END AS many"
        f" FROM (SELECT {partition} AS large OFFSET 0) p OFFSET 0) d"
    )
    return sql, args


def _partition_count(profile_id: str, exact_max: int, share_floor: int) -> str:
    """Whether the partition ($1-$3) is large: more than exact_max vectors, or more than share_floor that are half of
    the profile's index or more. reltuples is -1 until the index was first vacuumed or analysed: no share is known."""
    return (
        f"(SELECT n > {int(exact_max)} OR (n > {int(share_floor)} AND total > 0 AND n * 2 >= total) FROM"
        f" (SELECT count(*) AS n FROM (SELECT 1 FROM agent_memory.fragment_embeddings e WHERE"
        f" {_scope(profile_id, first=1)} LIMIT {int(exact_max) + 1}) s) c, (SELECT coalesce(max(reltuples), 0)"
        " AS total FROM pg_class WHERE oid ="
        f" to_regclass('agent_memory.fragment_embeddings_hnsw_{profile_id}')) t)"
    )


def _filter_count(filters: Filters, exact_max: int, args: list[Any]) -> str:
    """Whether more than exact_max of the partition's fragments pass `filters` (their values appended to `args`).
    Fragments rather than their vectors: the topic and type indexes are on fragments, and a fragment still waiting for
    its vector only makes the count err towards the index walk (whose short answer is topped up)."""
    where = ["f.tenant_id = $1", "f.workspace = $2", "($3::text[] IS NULL OR f.agent_id = ANY($3))"]
    for column, value in (("topic", filters.topic), ("type", filters.type)):
        if value is not None:
            args.append(value)
            where.append(f"f.{column} = ${len(args)}")
    if filters.tags is not None:
        args.append(filters.tags)
        where.append(f"f.keywords && ${len(args)}::text[]")
    if filters.narrow is not None:
        args.append(filters.narrow)
        where.append(narrowed("f", f"${len(args)}"))
    return (
        f"(SELECT count(*) > {int(exact_max)} FROM (SELECT 1 FROM agent_memory.fragments f WHERE"
        f" {' AND '.join(where)} LIMIT {int(exact_max) + 1}) m)"
    )


def _apply(settings: dict[str, str]) -> list[str]:
    return [f"set_config('{name}', '{value}', true)" for name, value in settings.items()]


async def search(conn: asyncpg.Connection, strategy: Strategy, query_vector: Any) -> list[asyncpg.Record]:
    """The `limit` nearest visible fragments of the partition `choose` counted, of the topic and type it was given,
    with their `similarity`, best first."""
    rows = await conn.fetch(strategy.sql, query_vector, *strategy.params)
    short = strategy.fallback_sql is not None and len(rows) < strategy.params[3]
    await release(conn, strategy, custom_plans=short)
    if short:
        # the walk stopped at hnsw.max_scan_tuples before k passed the filter: score the filter's rows instead
        scored = await conn.fetch(strategy.fallback_sql, query_vector, *strategy.params)
        rows = list({r["id"]: r for r in [*rows, *scored]}.values())
    return sorted(rows, key=lambda r: r["similarity"], reverse=True)[: strategy.params[3]]


async def release(conn: asyncpg.Connection, strategy: Strategy, custom_plans: bool = False) -> None:
    """The rest of the transaction plans normally again; with `custom_plans`, each statement for its own parameters.

    An exact scan of a large partition's filtered rows needs that: once a prepared statement has run five times the
    server may keep a generic plan, blind to the topic and type given, and one made for a common topic scans the
    whole partition's vectors for a rare one (scratch store, 300k partition: 110-180 ms against 2 ms planned for
    "rare" after six runs for a 5% topic). The setting stays for the rest of such a transaction: resetting it would
    be one more round trip, and custom planning the few statements after costs less."""
    if "enable_sort" in strategy.settings:
        extra = ", set_config('plan_cache_mode', 'force_custom_plan', true)" if custom_plans else ""
        await conn.execute(f"SELECT set_config('enable_sort', 'on', true){extra}")

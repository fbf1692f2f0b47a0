"""Read your own writes by meaning (issue 47): a search also ranks, by meaning, the caller's newest rows whose vector
the embedder has not written yet, exactly where the vector index will rank them once it has.

A write is acknowledged before its vector exists (the embedder computes it from the outbox event, seconds later under
load). So a search by text first reads the caller's newest written rows (inserted, or whose content was amended:
`updated_at`, newest first per agent namespace through fragments_scope_updated_idx) and keeps those with no vector for
their current content in the active profile: the newest RECALL_FRESH_ROWS written, embedded up to
RECALL_FRESH_TOKENS tokens. Their passages are embedded on the embedder's query lane (one call, beside the question's
own), each is scored by its exact cosine to the question, and merged into the vector list where its similarity puts
it (a stale vector of an amended row is replaced). The vectors are then written back, as the embedder writes them
(kept only while the row still holds the content embedded), off the request path, so the embedder finds them done.

Only the caller's own namespaces are read: another principal's write waits for the embedder, as before. With no model
reachable, the fresh rows are found by their words only, and the answer says meaning search was partial.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import asyncpg
import numpy as np

from memento_memory_api.context import ToolContext
from memento_memory_api.embedding_client import EmbeddingUnavailable
from memento_memory_api.recall.filters import Filters
from memento_memory_api.repositories.fragments import F_COLUMNS, live, narrowed, profile_literal, tagged
from memento_memory_api.uow import Scope
from memento_shared.db.clashes import retrying_clashes
from memento_shared.db.rls import transaction_as

log = logging.getLogger(__name__)


@lru_cache(maxsize=16)
def fresh_sql(profile_id: str) -> str:
    """The caller's newest `$4` written rows of the namespaces `$3` (each walked newest first, then merged), those
    with no vector for their current content in the profile, through the search's filters ($5-$9), newest first."""
    profile_id = profile_literal(profile_id)
    return (
        f"SELECT {F_COLUMNS} FROM (SELECT w.id, w.updated_at FROM unnest($3::text[]) a(agent_id) CROSS JOIN LATERAL"
        " (SELECT id, updated_at FROM agent_memory.fragments WHERE tenant_id = $1 AND workspace = $2"
        " AND agent_id = a.agent_id ORDER BY updated_at DESC LIMIT $4) w ORDER BY w.updated_at DESC LIMIT $4) recent"
        " JOIN agent_memory.fragments f ON f.id = recent.id AND f.tenant_id = $1"
        " WHERE NOT EXISTS (SELECT 1 FROM agent_memory.fragment_embeddings e WHERE e.fragment_id = f.id"
        f" AND e.profile_id = '{profile_id}' AND e.tenant_id = $1 AND e.content_hash = f.content_hash)"
        f" AND ($5::text IS NULL OR f.topic = $5) AND ($6::text IS NULL OR f.type = $6) AND {live('f', '$7')}"
        f" AND {tagged('f', '$8')} AND {narrowed('f', '$9')} ORDER BY recent.updated_at DESC, f.id"
    )


@dataclass
class Fresh:
    """The caller's rows a search scores itself: those within the bound, and whether any were left to the words."""

    rows: list[Any] = field(default_factory=list)
    vectors: asyncio.Task[Any] | None = (
        None  # their passages' vectors (a list in `rows`' order), or None if unavailable
    )
    over_budget: int = 0  # rows past RECALL_FRESH_TOKENS: found by their words only

    def unscored(self, vectors: list[np.ndarray] | None) -> bool:
        """Whether a fresh row of the caller's went without its meaning: past the budget, or no model reachable."""
        return self.over_budget > 0 or (bool(self.rows) and vectors is None)


def own_agents(ctx: ToolContext, agents: list[str] | None) -> list[str]:
    """The namespaces whose rows count as the caller's own: those it reads (its own and 'default'), or, reading
    every agent's as admin, the one it writes to."""
    return agents if agents is not None else [ctx.scope.agent_id]


async def start(
    ctx: ToolContext, conn: asyncpg.Connection, agents: list[str] | None, filters: Filters, shown: str | None = None
) -> Fresh | None:
    """Read the caller's fresh rows (one statement of a few index entries) and start embedding their passages; None
    when the feature is off. `filters` are the search's; a row whose content
    `shown` holds (text the caller hands the model beside the answer) is left to the words."""
    settings = ctx.settings
    if settings.recall_fresh_rows <= 0:
        return None
    scope = ctx.scope
    rows = await conn.fetch(
        fresh_sql(ctx.profile.id),
        scope.tenant_id,
        scope.workspace,
        own_agents(ctx, agents),
        settings.recall_fresh_rows,
        *filters.values(),
    )
    fresh = Fresh()
    used = 0
    for row in rows:  # newest first; the first is embedded whatever its size
        if shown and row["content"] in shown:
            continue  # already in front of the model word for word: its meaning cannot add to what it reads
        if fresh.rows and used + row["estimated_tokens"] > settings.recall_fresh_tokens:
            fresh.over_budget += 1
            continue
        used += row["estimated_tokens"]
        fresh.rows.append(row)
    if fresh.rows:
        fresh.vectors = asyncio.create_task(passages(ctx, [r["content"] for r in fresh.rows]))
    return fresh


async def passages(ctx: ToolContext, texts: list[str]) -> list[np.ndarray] | None:
    """The stored texts' vectors in the active profile, as the embedder writes them; None when it cannot answer."""
    try:
        vectors = await ctx.embedder.embed_passages(texts, ctx.profile.id, stage="fresh")
    except EmbeddingUnavailable as exc:
        log.warning("recall.fresh_embedding_unavailable", extra={"error_type": str(exc)})
        return None
    if any(len(v) != ctx.profile.dimension for v in vectors):
        return None
    return vectors


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """What the index's cosine distance makes of the pair, as a similarity (1 - distance)."""
    a64, b64 = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    norms = float(np.linalg.norm(a64) * np.linalg.norm(b64))
    return float(a64 @ b64 / norms) if norms else 0.0


def merged(
    hits: list[tuple[Any, float]],
    fresh: Fresh,
    vectors: list[np.ndarray],
    query_vector: Any,
    limit: int,
    threshold: float | None,
) -> list[tuple[Any, float]]:
    """The vector list as the index will answer once the fresh rows are embedded: the index's (row, similarity) hits
    (a fresh row's stale vector, of its older content, left out) and the fresh rows at their exact similarity, best
    first, at most `limit`, none under `threshold`."""
    ids = {r["id"] for r in fresh.rows}
    scored = [(r, similarity) for r, similarity in hits if r["id"] not in ids]
    for row, vector in zip(fresh.rows, vectors, strict=True):
        similarity = cosine(query_vector, vector)
        if threshold is None or similarity >= threshold:
            scored.append((row, similarity))
    scored.sort(key=lambda pair: pair[1], reverse=True)
    return scored[:limit]


# As the embedder's store_vectors writes a vector, except that a vector already there for this content is left alone
# ($4, the tenant, restates what the policy allows: named, as tests/integration/test_distribution_plans wants)
STORE_SQL = (
    "INSERT INTO agent_memory.fragment_embeddings (fragment_id, profile_id, tenant_id, workspace, agent_id,"
    " content_hash, embedding) SELECT id, $2, tenant_id, workspace, agent_id, content_hash, $5"
    " FROM agent_memory.fragments WHERE id = $1 AND content_hash = $3 AND tenant_id = $4"
    " ON CONFLICT (fragment_id, profile_id, tenant_id) DO UPDATE SET embedding = EXCLUDED.embedding,"
    " content_hash = EXCLUDED.content_hash, agent_id = EXCLUDED.agent_id, created_at = now()"
    " WHERE agent_memory.fragment_embeddings.content_hash IS DISTINCT FROM EXCLUDED.content_hash"
)


class VectorWriteBack:
    """Writes the vectors searches computed for fresh rows (and memory.search for fresh chunks), off the request
    path, each batch in a transaction of its own under the searching principal (RLS), in key order (as every multi-row
    writer locks). A clash or a failure only leaves them to the embedder, which would have written them anyway."""

    MOST_AT_ONCE = 2  # connections the write-back may hold: a burst of searches must not take the pool from requests
    MOST_WAITING = 64  # batches waiting past that are dropped (the embedder writes them from the outbox anyway)

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool
        self._tasks: set[asyncio.Task[None]] = set()
        self._slots = asyncio.Semaphore(self.MOST_AT_ONCE)
        self._pending: set[tuple[Any, ...]] = set()  # (sql, key) of rows being written: two searches write a row once

    def submit(self, scope: Scope, profile_id: str, rows: list[Any], vectors: list[np.ndarray]) -> None:
        """Fragments' vectors, each kept only while its row still holds the content embedded (STORE_SQL)."""
        batch = [
            (r["id"], profile_id, r["content_hash"], scope.tenant_id, v) for r, v in zip(rows, vectors, strict=True)
        ]
        self.write(scope, STORE_SQL, batch)

    def write(self, scope: Scope, sql: str, batch: list[tuple[Any, ...]]) -> None:
        """`sql` for each tuple of `batch` (its last item a vector), in the order of the rest."""
        fresh = [args for args in batch if (sql, args[:-1]) not in self._pending]
        if not fresh or len(self._tasks) >= self.MOST_WAITING:
            return
        ordered = sorted(fresh, key=lambda args: args[:-1])
        keys = {(sql, args[:-1]) for args in ordered}
        self._pending |= keys
        task = asyncio.create_task(self._write(scope, sql, ordered))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(lambda _: self._pending.difference_update(keys))

    async def _write(self, scope: Scope, sql: str, batch: list[tuple[Any, ...]]) -> None:
        principal = {"tenant_id": scope.tenant_id, "workspace": scope.workspace, "agent_id": scope.agent_id}

        async def once() -> None:
            async with self.pool.acquire() as conn, transaction_as(conn, **principal, access=scope.access):
                await conn.executemany(sql, batch)

        try:
            async with self._slots:
                await retrying_clashes(once, "fresh vector write-back")
        except Exception as exc:  # the embedder writes it from the outbox event anyway
            log.warning("recall.fresh_write_back_failed", extra={"error_type": type(exc).__name__})

    async def stop(self) -> None:
        """Let the writes in progress finish (shutdown bounds the wait)."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

"""The one search engine every dialect's searches go through: candidate lists from L1 (Redis keyword sets), L2 (GIN
keyword overlap), L3 (full text + trigram, and the nearest vectors in the active profile, among them the caller's newest
rows still waiting for theirs, scored by the search itself: recall.fresh) or the newest rows, with the same filters at
every tier (topic, type, no expired row, no superseded one unless asked), fused by RRF.

What a dialect does with the candidates is its own: `recall` (cascade.py) ranks them by seed 000's rules, cuts them to a
token budget and adds linked fragments; `search_memories` (tools/simple/) keeps the fused order and its score.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from opentelemetry import trace

from memento_memory_api.context import ToolContext
from memento_memory_api.embedding_client import EmbeddingUnavailable
from memento_memory_api.recall import fresh, hops, l1, lexical, relevance, rounds, vector
from memento_memory_api.recall.filters import NO_FILTERS, Filters
from memento_memory_api.recall.fusion import rrf
from memento_memory_api.recall.question import question
from memento_memory_api.repositories import fragments as repo
from memento_memory_api.text import annotate
from memento_memory_api.uow import UnitOfWork
from memento_shared.telemetry.metrics import SEARCH_LATENCY
from memento_shared.text import links

log = logging.getLogger(__name__)
CANDIDATES = 50
RRF_K = 10
# a search's neighbours as recall.relevance.read_neighbours reads them: candidate -> neighbour ids, neighbours' rows
Near = tuple[dict[str, list[str]], dict[str, Any]]


@dataclass(frozen=True)
class Query:
    """What to look for. `keywords` are already normalised; `text` runs the lexical and (embedded) vector searches;
    `vector` is a ready vector in the active profile (searched instead of embedding `text`); with none of them, the
    newest rows are the candidates."""

    keywords: list[str] = field(default_factory=list)
    text: str | None = None
    embed_text: str | None = None  # the part of a turn the question is in (its last message), when not all of `text`
    vector: Any = None
    lexical: bool = True  # with `text`: also the full-text list (store_memory's `similar` wants meaning alone)
    filters: Filters = NO_FILTERS  # what every tier holds its candidates to (recall.filters)
    threshold: float | None = None  # minimum cosine similarity of vector hits
    limit: int = CANDIDATES  # per list
    # text the caller hands the model word for word beside the answer (a turn's session items): the caller's rows
    # without a vector that it holds are not embedded for their meaning (recall.fresh)
    shown: str | None = None


@dataclass
class Found:
    rows: dict[str, Any] = field(default_factory=dict)  # id -> fragment row
    tiers: dict[str, str] = field(default_factory=dict)  # id -> the first tier that found it (L1, L2, L3)
    similarity: dict[str, float] = field(default_factory=dict)  # id -> cosine, for vector hits
    ranked: list[list[str]] = field(default_factory=list)  # the lists a relevance order fuses, each best first
    order: list[tuple[str, float]] | None = None  # a search by text's relevance order (recall.relevance)
    context_weight: float = 0.0  # the weight of the context list `order` fused beside `ranked`
    part_lists: list[list[str]] = field(default_factory=list)  # the lexical list of each part of a multi-part question
    rounds: list[str] = field(default_factory=list)  # the rounds list (recall.rounds), fused at `rounds_weight`
    rounds_weight: float = 0.0
    hops: list[str] = field(default_factory=list)  # the second hop's list (recall.hops), fused at `hop_weight`
    hop_weight: float = 0.0
    fresh: list[str] = field(default_factory=list)  # the caller's rows without a vector yet, scored here (recall.fresh)
    partial: bool = False  # meaning search left something out: no question vector, or a fresh row it could not score

    def fused(self) -> list[tuple[str, float]]:
        """(id, score) best first: a search by text's relevance order, else the ranked lists fused by RRF; rows no
        list ranked are not included. No score is above `best_score`."""
        if self.order is not None:
            best = self.best_score()
            return [(i, min(score, best)) for i, score in self.order if i in self.rows]
        return rrf([[i for i in r if i in self.rows] for r in self.ranked], k=RRF_K)

    def best_score(self) -> float:
        """The fused score of a row ranked first in every list: what `fused` scores are fractions of."""
        return (len(self.ranked) + self.context_weight + self.rounds_weight + self.hop_weight) / (RRF_K + 1)


@asynccontextmanager
async def searching(ctx: ToolContext, query: Query) -> AsyncIterator[tuple[UnitOfWork, Found]]:
    """Run `query` in a transaction of the caller's and yield it with what was found; the caller goes on in the same
    transaction (to rank, to read links, to write what it must with the search it made)."""
    agents = ctx.visible_agents()
    # Started before the transaction and awaited inside it: the query embedding (the model's tens of ms) runs while
    # Postgres does the lexical and keyword work, and the L1 read while the transaction opens.
    embedding = None
    if query.text and query.vector is None:
        embedding = asyncio.create_task(_query_vector(ctx, embedded_text(ctx, query)))
    l1_read = None
    # L1 is keyed by agent namespace (admin reads span every agent), and skipped while a lost write may have left it
    # out of step or a read has just failed (recall.l1.L1Keeper): L2 answers meanwhile. L1 holds no expiry or
    # supersession: the rows it names are read back through the same filters as every tier's.
    if query.keywords and agents is not None and ctx.l1_trusted():
        scope = ctx.scope
        l1_read = asyncio.create_task(
            l1.lookup(
                ctx.redis, scope.tenant_id, scope.workspace, agents, query.keywords, query.limit, ctx.l1_read_failed
            )
        )
    try:
        async with ctx.uow(ctx.scope) as uow:
            found = await _gather(ctx, query, uow.conn, agents, embedding, l1_read)
            yield uow, found
    finally:
        for task in (embedding, l1_read):
            if task is not None and not task.done():
                task.cancel()


async def find(ctx: ToolContext, conn: Any, query: Query) -> Found:
    """`query` inside a transaction the caller already holds (a write that searches in its own transaction), with the
    vector it brings or none: nothing is embedded here, so a `text` without `vector` is searched lexically."""
    return await _gather(ctx, query, conn, ctx.visible_agents(), None, None)


def embedded_text(ctx: ToolContext, query: Query) -> str:
    """What the model reads for `query`: its question (recall.question), of `embed_text` when the caller names the
    part to embed (a turn's last message), else of `text`."""
    return question(query.embed_text or query.text or "", ctx.settings.query_embed_max_tokens)


async def _query_vector(ctx: ToolContext, text: str) -> Any:
    try:
        return await ctx.embedder.embed_query(text, ctx.profile.id)
    except EmbeddingUnavailable as exc:
        log.warning("recall.embedding_unavailable", extra={"error_type": str(exc)})
        return None


async def _gather(
    ctx: ToolContext,
    query: Query,
    conn: Any,
    agents: list[str] | None,
    embedding: asyncio.Task[Any] | None,
    l1_read: asyncio.Task[Any] | None,
) -> Found:
    found = Found()
    if query.filters.narrow is not None:
        # the narrowing's conditions are one jsonb parameter: a generic plan (which a prepared statement may switch
        # to after five runs) could not use an index for the case or the time range it holds; plan for the values
        await conn.execute("SELECT set_config('plan_cache_mode', 'force_custom_plan', true)")
    # the caller's rows still waiting for their vector: read first, so their passages embed while the rest runs
    own = await fresh.start(ctx, conn, agents, query.filters, query.shown) if embedding is not None else None
    try:
        await _candidates(ctx, query, conn, agents, embedding, l1_read, found, own)
    finally:
        if own is not None and own.vectors is not None and not own.vectors.done():
            own.vectors.cancel()  # the search failed before it needed them
    return found


async def _candidates(
    ctx: ToolContext,
    query: Query,
    conn: Any,
    agents: list[str] | None,
    embedding: asyncio.Task[Any] | None,
    l1_read: asyncio.Task[Any] | None,
    found: Found,
    own: fresh.Fresh | None,
) -> None:
    scope, filters = ctx.scope, query.filters
    rows, tiers = found.rows, found.tiers
    if query.keywords:
        l1_ids = await l1_read if l1_read is not None else None
        if l1_ids:
            for row in await repo.fetch_by_ids(conn, l1_ids, filters):
                rows[row["id"]] = row
                tiers.setdefault(row["id"], "L1")
        # L2 adds partial matches (any keyword) and covers L1 being down or still rebuilding; for one keyword
        # and no filter, a ready L1 already holds exactly what L2 would find.
        # (L1 holds no expiry or supersession: when a row it named was filtered out, L2 looks further)
        plain = len(query.keywords) == 1 and not filters.narrows  # one keyword, no filter
        l1_complete = l1_ids is not None and len(rows) == len(l1_ids) and plain
        if not l1_complete and len(rows) < query.limit:
            matches = await repo.by_keywords(conn, query.keywords, scope, agents, query.limit, filters=filters)
            for row in matches:
                rows.setdefault(row["id"], row)
                tiers.setdefault(row["id"], "L2")
        if query.text:  # one of the lists text's fusion ranks by; otherwise a dialect ranks the rows themselves
            found.ranked.append(sorted(rows, key=lambda i: (tiers[i] != "L1", -rows[i]["importance"])))

    if query.text or query.vector is not None:
        await _by_text(ctx, query, conn, agents, embedding, found, own)

    if not query.keywords and not query.text and query.vector is None:
        for row in await repo.recent(conn, scope, agents, query.limit, filters):
            rows[row["id"]] = row
            tiers.setdefault(row["id"], "L2")


async def _by_text(
    ctx: ToolContext,
    query: Query,
    conn: Any,
    agents: list[str] | None,
    embedding: asyncio.Task[Any] | None,
    found: Found,
    own: fresh.Fresh | None = None,
) -> None:
    scope = ctx.scope
    started = time.perf_counter()
    # Everything that does not need the query vector runs while the model computes it: the lexical search, its rows,
    # and the vector plan's choice; after it, one statement returns the nearest fragments' rows. Both searches apply
    # the filters themselves, so each returns up to `limit` fragments that satisfy them.
    lexical_ids: list[str] = []
    expanded = ""  # the question with its names and dates spelled out (the lexical search and the order use it)
    tuning = relevance.Tuning.of(ctx.settings, RRF_K)
    if query.text and query.lexical:

        async def by_words(text: str) -> list[str]:
            ids = await lexical.search(
                conn, text, scope, agents, query.limit, filters=query.filters, stems=tuning.stems
            )
            await _fetch_missing(conn, query, ids, found)
            return ids

        expanded = _with_expansion(query.text)
        lexical_ids = await by_words(expanded)
        if ctx.settings.recall_decompose > 0:
            found.part_lists = [await by_words(part) for part in relevance.parts(query.text)]
    strategy = None
    if query.vector is not None or embedding is not None:
        profile = ctx.profile
        target = vector.Target(
            profile.id, profile.dimension, scope.tenant_id, scope.workspace, agents, query.limit, query.filters
        )
        strategy = await vector.choose(conn, target, ctx.settings.vector_exact_max_rows, ctx.partition_verdicts)
        trace.get_current_span().set_attribute("memento.recall.vector_plan", strategy.name)
    near: Near = ({}, {})
    if query.text and query.lexical and tuning.reads_neighbours:
        # while the model computes: the neighbours of the lexical list's first candidates. Read whether or not the
        # vector is ready (a cached question's is), so a question asked again is ordered the same
        first = [found.rows[i] for i in lexical_ids[: tuning.candidates] if i in found.rows]
        near = await relevance.read_neighbours(conn, scope, agents, first, tuning.window, query.filters)
    hop = await _hop_rows(ctx, query, conn, agents, lexical_ids, found, tuning, strategy is not None)
    want = None
    if query.text and query.lexical:
        # the events the question relates in time are read from the question, not a whole turn around it
        asked = embedded_text(ctx, query) if tuning.relation > 0 else None
        want = relevance.wanted(query.text, expanded, stems=tuning.stems, asked=asked)
    # the context list of the rows known so far, scored while the model works rather than after the vector list
    known = None
    if want is not None and want.terms and tuning.context_weight > 0:
        lists = [*found.ranked, lexical_ids, *found.part_lists]
        known = relevance.context(
            lists, near[1] | found.rows, near[0], want.terms, tuning.neighbour_share, tuning.stems
        )
    query_vector = query.vector if query.vector is not None else await embedding if embedding is not None else None
    if query_vector is not None and strategy is not None:
        hits = await vector.search(conn, strategy, query_vector)
        threshold = query.threshold
        hits = [r for r in hits if threshold is None or r["similarity"] >= threshold]
        scored = [(r, float(r["similarity"])) for r in hits]
        if own is not None and own.rows:
            with_fresh = await _with_fresh(ctx, own, scored, query_vector, query, found)
            scored = with_fresh if with_fresh is not None else scored
        for row, similarity in scored:
            found.rows.setdefault(row["id"], row)
            found.tiers.setdefault(row["id"], "L3")
            found.similarity[row["id"]] = similarity
        found.ranked.append([r["id"] for r, _ in scored])
        if want is not None and tuning.rounds > 0:
            # the index's rows only: fresh ones have no stored vector to sum
            await _rounds(ctx, query, conn, agents, hits, query_vector, found, near)
    elif strategy is not None:
        await vector.release(conn, strategy)
    _hop_list(found, near, hop, want, query_vector, tuning.stems)  # without a vector (embedder down): by the rest
    if embedding is not None and query_vector is None:
        found.partial = True  # no question vector: found by words only
    if want is not None:
        found.ranked.append(lexical_ids)
        _arrange(found, want, tuning, near, known)
    SEARCH_LATENCY.labels("hybrid" if query_vector is not None else "lexical").observe(time.perf_counter() - started)


async def _rounds(
    ctx: ToolContext, query: Query, conn: Any, agents: list[str] | None, hits: list[Any], query_vector: Any,
    found: Found, near: Near,
) -> None:  # fmt: skip
    """The rounds list (recall.rounds): the vector hits and the rows beside them, by their round's vector; the rows
    it brings join the neighbours read, to join the answer if the order scores them."""
    ranked, rows = await rounds.read(
        conn, ctx.scope, agents, ctx.profile.id, ctx.profile.dimension, hits, query_vector, query.filters
    )
    found.rounds = ranked
    for i, row in rows.items():
        if i not in found.rows:
            near[1].setdefault(i, row)


async def _hop_rows(
    ctx: ToolContext, query: Query, conn: Any, agents: list[str] | None, lexical_ids: list[str], found: Found,
    tuning: relevance.Tuning, by_meaning: bool,
) -> tuple[links.Asked, list[str], list[Any]] | None:  # fmt: skip
    """The second hop's rows (recall.hops), read while the model embeds the question, when the question asks for a
    list of things about someone (and is searched by meaning too: the hop is ranked with its vector); else None."""
    wanted = by_meaning and query.text and query.lexical and tuning.hop > 0
    text = embedded_text(ctx, query) if wanted and query.text else None  # the question, not a whole turn
    ask = links.asked(text, tuning.hop_word_kinds) if text else None
    if ask is None:
        return None
    followed = hops.links_of([found.rows[i] for i in lexical_ids[: hops.SEEDS] if i in found.rows], ask)
    profile = ctx.profile
    rows = await hops.read(
        conn, ctx.scope, agents, profile.id, profile.dimension, ask, followed, query.filters, tuning.hop_rows
    )
    return ask, followed, rows


def _hop_list(
    found: Found, near: Near, hop: tuple[links.Asked, list[str], list[Any]] | None, want: relevance.Wanted | None,
    query_vector: Any, stems: bool,
) -> None:  # fmt: skip
    """The second hop's list, ranked now that the question's vector is there (or known to be missing); its rows join
    the neighbours read, to join the answer if the order scores them."""
    if hop is None or want is None:
        return
    ask, followed, rows = hop
    found.hops = hops.rank(rows, ask, followed, want.terms, query_vector, stems)
    for row in rows:
        if row["id"] not in found.rows:
            near[1].setdefault(row["id"], row)


async def _with_fresh(
    ctx: ToolContext, own: fresh.Fresh, hits: list[tuple[Any, float]], query_vector: Any, query: Query, found: Found
) -> list[tuple[Any, float]] | None:
    """The vector list with the caller's fresh rows scored in (recall.fresh), their vectors handed to the write-back;
    None when their vectors could not be computed (the index's answer stands, and the search says it was partial)."""
    vectors = await own.vectors if own.vectors is not None else None
    found.partial = own.unscored(vectors)
    if vectors is None:
        return None
    found.fresh = [r["id"] for r in own.rows]
    trace.get_current_span().set_attribute("memento.recall.fresh_rows", len(own.rows))
    if ctx.write_back is not None:
        ctx.write_back.submit(ctx.scope, ctx.profile.id, own.rows, vectors)
    return fresh.merged(hits, own, vectors, query_vector, query.limit, query.threshold)


def _with_expansion(text: str) -> str:
    """The question and, spelled as rows' expansions spell them (text.annotate), the names and times it names."""
    extra = annotate.query_expansion(text, datetime.now(UTC))
    return f"{text} {extra}" if extra else text


def _arrange(
    found: Found, want: relevance.Wanted, tuning: relevance.Tuning, near: Near, known: relevance.Context | None
) -> None:
    """The relevance order of a search by text (recall.relevance): the lists are fused beside the context list over
    the rows and the neighbours read, then time and lifts apply; the neighbours it scored join the rows."""
    neighbours, near_rows = near
    rows = near_rows | found.rows  # a row a list found keeps its own record
    found.order = relevance.order(
        found.ranked, rows, neighbours, want, tuning, found.part_lists, known, found.rounds, found.hops
    )
    for i, _ in found.order:  # the neighbours the context or a lift scored join the answer's rows; the others are none
        if i not in found.rows:
            found.rows[i] = rows[i]
            found.tiers[i] = "L3"
    found.context_weight = tuning.context_weight if want.terms else 0.0
    found.rounds_weight = tuning.rounds if found.rounds else 0.0
    found.hop_weight = tuning.hop if found.hops else 0.0


async def _fetch_missing(conn: Any, query: Query, ids: list[str], found: Found) -> None:
    # the lexical search already applied the filters; reading the rows through them again is only a safety net
    missing = [i for i in ids if i not in found.rows]
    if missing:
        for row in await repo.fetch_by_ids(conn, missing, query.filters):
            found.rows[row["id"]] = row
            found.tiers.setdefault(row["id"], "L3")

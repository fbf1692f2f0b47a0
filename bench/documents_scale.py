"""Seed 001's `memory.search` on a store of N document chunks (10k and 100k), through the gateway (SPEC: p95 ≤ the
query-embedding time + 20 ms). The whole system is started as bench.documents starts it, and one workspace is
bulk-loaded with COPY as the schema owner (the tool path would take an hour at 100k chunks):

- documents derived from the 50 of bench/data/documents_corpus/ (the 50 themselves first, verbatim): some level-2
  sections left out, cities, service names, UPPER_SNAKE identifiers and figures substituted, a scope line naming
  the document's depot, team and reference, so the lexical statistics have a realistic spread rather than 50 texts
  repeated; a tenth of them with an earlier version whose chunks stay in the store (searches read latest versions
  only), a few archived;
- chunked by memory-api's own chunk_markdown, PII-redacted and hashed as canonical.upsert / memory.commit do; the
  chunks' full-text vectors are doc_chunks' generated column, so Postgres computes them exactly as on the tool path;
- doc_term_stats and doc_corpus recomputed in SQL from the latest versions' chunks;
- chunk vectors for the active profile: every chunk of the 50 source documents embedded for real by the embedder (its
  heading path and text, as the embedder embeds chunks), and each derived chunk given the vector of the source chunk
  it shares most words with plus a little noise (bench/load.py's method), so the HNSW graph sees realistic clusters;
- the GIN and HNSW indexes of doc_chunks / chunk_embeddings dropped for the COPY and rebuilt after it, then VACUUM
  ANALYZE. That the HNSW index serves the searches is checked from pg_stat_user_indexes after the run.

Then memory.search at 1 and 8 clients (bench.documents' search_latency) beside the query-embedding time and an MCP
ping, with the corpus queries under varied prefixes so no query vector comes from memory-api's cache; the mean time
of each list inside memory-api (memento_search_latency_seconds) per level; after the run, each list's plan (custom
and generic) for one query of each type, from memory-api's own search functions under EXPLAIN ANALYZE. Writes
bench/results/documents-scale-<n>-<time>.json and refreshes the README's `documents-<n>` block (10000 and 100000).

    python -m bench.documents_scale --chunks 10000 [--data-dir DIR]   # a kept DIR is reused when it holds the load
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import multiprocessing
import os
import platform
import random
import re
import sys
import time
import uuid
import zlib
from concurrent.futures import ProcessPoolExecutor
from datetime import UTC, datetime, timedelta
from functools import cache

import asyncpg
import httpx
import numpy as np
from pgvector.asyncpg import register_vector
from prometheus_client.parser import text_string_to_metric_families

from bench.documents import PREFIXES, QUERIES, embed, read_corpus, search_latency
from bench.load import embed_pool
from bench.report import RESULTS, percentiles, replace_readme_block
from bench.run import System, through_gateway
from memento_embedder.api import MAX_CHARS
from memento_embedder.handlers import chunk_text
from memento_memory_api.recall.documents import LEXICAL_TOP_K, SEMANTIC_TOP_K, TRIGRAM_TOP_K
from memento_memory_api.recall.lexical import identifier_in
from memento_memory_api.repositories import documents as repo
from memento_memory_api.tools.documents.handlers import new_item_id
from memento_memory_api.uow import Scope
from memento_shared.db.rls import set_principal
from memento_shared.internal_http import InternalClient
from memento_shared.text.chunking import chunk_markdown, outline
from memento_shared.text.keywords import normalise_keywords
from memento_shared.text.redaction import redact_pii

TENANT = "default"
NOISE = 0.03  # per-dimension noise on a source chunk's vector (bench/load.py's)
OLD_VERSION_SHARE = 0.1  # derived documents that also keep an earlier version (its chunks and vectors)
ARCHIVED_SHARE = 0.03
WARM_PREFIX = "prime: "  # the unmeasured warm-up searches' prefix: none of the measured texts
MORE_PREFIXES = ("q: ", "lookup ", "where is ", "docs on ", "question: ", "explain ", "recall ", "details: ")
LISTS = ("lexical", "semantic", "trigram", "hybrid")
SEED = 7

CITIES = ("Amsterdam", "Berlin", "Frankfurt")  # the source corpus's
NEW_CITIES = (
    "Rotterdam", "Utrecht", "Eindhoven", "Antwerp", "Ghent", "Lille", "Cologne", "Dortmund", "Hamburg", "Bremen",
    "Leipzig", "Dresden", "Poznan", "Wroclaw", "Gdansk", "Brno", "Ostrava", "Graz", "Linz", "Basel", "Lyon", "Nantes",
    "Bordeaux", "Porto", "Braga", "Valencia", "Bilbao", "Seville", "Turin", "Bologna", "Verona", "Malmo", "Aarhus",
    "Odense", "Tampere", "Tartu", "Riga", "Kaunas", "Cork", "Leeds", "Nottingham", "Bristol", "Gothenburg", "Uppsala",
    "Bergen", "Stavanger", "Zagreb", "Ljubljana", "Kosice", "Debrecen", "Cluj", "Plovdiv", "Thessaloniki", "Lisbon",
)  # fmt: skip
SERVICES = ("dispatch-api", "notify-worker", "route-planner", "partner-gateway", "scan-ingest", "courier-app")
SERVICE_SUFFIXES = ("v2", "next", "edge", "eu", "west", "east", "north", "south", "batch", "rt", "core", "lite")
TEAMS = (
    "platform", "routing", "courier app", "partner", "billing", "tracking", "notifications", "data", "security",
    "depot operations", "mobile", "infrastructure", "reliability", "payments", "growth", "support tooling",
)  # fmt: skip
IDENTIFIER = re.compile(r"\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b")
# figures of 2 to 5 digits standing alone: not parts of dates, times, versions, names or paths
FIGURE = re.compile(r"(?<![\w.,:/-])\d{2,5}(?![\w:/-]|[.,]\d|\s?%)")
WORD = re.compile(r"\w+")


# --- the corpus: documents derived from the 50 source documents (runs in worker processes) ---


@cache
def sources() -> list[dict]:
    return read_corpus()


@cache
def source_chunks() -> list[list[tuple[int, set[str]]]]:
    """Each source document's chunks as (pool index, its words): the pool is every source chunk, in order."""
    out, n = [], 0
    for doc in sources():
        chunks = chunk_markdown(redact_pii(doc["content"]))
        out.append([(n + i, set(WORD.findall(c.text.lower()))) for i, c in enumerate(chunks)])
        n += len(chunks)
    return out


@cache
def top_sections(i: int) -> list[tuple[int, int]]:
    """Source document i's level-2 sections, as (start, end)."""
    return [(s.start, s.end) for s in outline(sources()[i]["content"]) if s.level == 2]


def vary_figures(text: str, rng: random.Random) -> str:
    def one(m: re.Match) -> str:
        value = int(m.group())
        if 1990 <= value <= 2039 or rng.random() < 0.5:  # years, and half the figures, stay
            return m.group()
        return str(max(2, round(value * rng.choice((0.5, 0.6, 0.75, 1.25, 1.5, 2, 3)))))

    return FIGURE.sub(one, text)


def derive(v: int, revision: int) -> dict:
    """Document `v`: the source documents themselves for v < 50, else source v % 50 varied (the same variation for
    every revision of v but for its figures, as an edit would change them)."""
    base = sources()[v % len(sources())]
    if v < len(sources()):
        return dict(base)
    rng = random.Random(f"{SEED}-{v}")
    content = base["content"]
    top = top_sections(v % len(sources()))
    if len(top) >= 3:  # leave out up to a quarter of the level-2 sections
        for start, end in sorted(rng.sample(top, rng.randint(0, len(top) // 4)), reverse=True):
            content = content[:start].rstrip("\n") + "\n\n" + content[end:].lstrip("\n")
    city = rng.choice(NEW_CITIES)
    swaps = {c: city if i == 0 else rng.choice(NEW_CITIES) for i, c in enumerate(CITIES)}
    swaps |= {s: f"{s}-{rng.choice(SERVICE_SUFFIXES)}" for s in SERVICES if rng.random() < 0.5}
    tag = f"{rng.choice('ABCDEFGHJKLMNPRSTUVWXYZ')}{rng.randint(1, 99)}"

    def substitute(text: str) -> str:
        text = re.sub("|".join(rf"\b{re.escape(k)}\b" for k in swaps), lambda m: swaps[m.group()], text)
        # half the identifiers get the document's tag (the same ones in every revision and in the title)
        return IDENTIFIER.sub(
            lambda m: f"{m.group()}_{tag}" if zlib.crc32(f"{v}{m.group()}".encode()) % 2 else m.group(), text
        )

    content = substitute(content)
    scope = (
        f"Scope: the {city} depot; owned by the {rng.choice(TEAMS)} team; reference "
        f"PW-{rng.randint(1000, 99999)}, unit {rng.getrandbits(24):06x}."
    )
    head, _, rest = content.partition("\n")
    content = f"{head}\n\n{scope}\n{rest}" if head.startswith("# ") else f"{scope}\n\n{content}"
    content = vary_figures(content, random.Random(f"{SEED}-{v}-{revision}"))
    key = base["canonicalKey"]
    return base | {
        "title": f"{substitute(base['title'])} ({city})",
        "canonicalKey": f"{key}/{city.lower()}-{v}" if key else None,
        "content": content,
    }


def build(v: int) -> dict:
    """Document v with its versions, each chunked as the tools chunk it, and each chunk's pool vector: the source
    chunk it shares most words with (Jaccard)."""
    derived = v >= len(sources())
    rng = random.Random(f"{SEED}-meta-{v}")
    revisions = [0, 1] if derived and rng.random() < OLD_VERSION_SHARE else [1]
    candidates = source_chunks()[v % len(sources())]
    versions = []
    for revision in revisions:
        doc = derive(v, revision)
        content = redact_pii(doc["content"])  # as _within_limit stores it
        rows = []
        for c in chunk_markdown(content):
            words = set(WORD.findall(c.text.lower()))
            pool = max(candidates, key=lambda p: len(words & p[1]) / (len(words | p[1]) or 1))[0]
            rows.append((c.index, c.text, c.heading_path, c.anchor, c.start, c.end, c.token_estimate, pool))
        content_hash = hashlib.sha256(content.encode()).hexdigest()
        if versions and versions[-1][1] == content_hash:  # no figure changed: the tools would keep one version
            versions.pop()
        versions.append((content, content_hash, rows))
    return {
        "kind": doc["kind"],
        "title": doc["title"],
        "canonicalKey": doc["canonicalKey"],
        "docClass": doc["docClass"],
        "tags": normalise_keywords(doc["tags"]),
        "archived": derived and rng.random() < ARCHIVED_SHARE,
        "age_minutes": rng.randint(60, 180 * 24 * 60),
        "versions": versions,
    }


def corpus(n: int) -> list[dict]:
    """Documents 0, 1, 2, ... until their latest versions hold at least n chunks, built on every core."""
    per_doc = sum(len(c) for c in source_chunks()) / len(sources())
    docs: list[dict] = []
    held = 0
    context = multiprocessing.get_context("spawn")  # no fork of a process holding an event loop and connections
    with ProcessPoolExecutor(max_workers=os.cpu_count() or 1, mp_context=context) as workers:
        while held < n:
            more = int((n - held) / per_doc * 1.05) + 4
            for doc in workers.map(build, range(len(docs), len(docs) + more), chunksize=32):
                if held >= n:
                    break
                docs.append(doc)
                held += len(doc["versions"][-1][2])
    return docs


# --- the load ---


async def stored(owner: asyncpg.Connection, workspace: str, profile: str) -> dict:
    """What the workspace holds: latest-version chunks, all chunk rows, chunks without a vector, doc_corpus's count."""
    row = await owner.fetchrow(
        "SELECT count(*) FILTER (WHERE c.version_num = i.latest_version) AS latest, count(*) AS rows,"
        " count(*) FILTER (WHERE NOT EXISTS (SELECT 1 FROM agent_memory.chunk_embeddings e WHERE e.item_id = c.item_id"
        " AND e.version_num = c.version_num AND e.chunk_index = c.chunk_index AND e.profile_id = $3)) AS unembedded"
        " FROM agent_memory.doc_chunks c JOIN agent_memory.doc_items i ON i.id = c.item_id"
        " WHERE c.tenant_id = $1 AND c.workspace = $2",
        TENANT, workspace, profile,
    )  # fmt: skip
    corpus_chunks = await owner.fetchval(
        "SELECT chunks FROM agent_memory.doc_corpus WHERE tenant_id = $1 AND workspace = $2", TENANT, workspace
    )
    return dict(row) | {"corpus_chunks": corpus_chunks}


async def clear(owner: asyncpg.Connection, workspace: str) -> None:
    """A partial or other-sized load of the workspace, gone (versions, chunks and vectors go by the cascades)."""
    for table in ("doc_items", "doc_term_stats", "doc_corpus", "doc_commits"):
        await owner.execute(
            f"DELETE FROM agent_memory.{table} WHERE tenant_id = $1 AND workspace = $2", TENANT, workspace
        )


# the full-text, trigram and vector indexes of the chunk tables: built once after the COPY rather than row by row
BULK_INDEXES = (
    "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'agent_memory'"
    " AND tablename IN ('doc_chunks', 'chunk_embeddings') AND indexdef ~ 'USING (gin|hnsw)'"
)

# BM25's statistics (repositories/documents.py keeps them incrementally: df = latest-version chunks holding a term,
# the terms being the tsvector's lexemes; the corpus's chunk count and summed token estimates), from scratch
TERM_STATS = """
INSERT INTO agent_memory.doc_term_stats (tenant_id, workspace, term, df)
SELECT $1, $2, t.term, count(*) FROM agent_memory.doc_chunks c
JOIN agent_memory.doc_items i ON i.id = c.item_id AND c.version_num = i.latest_version
CROSS JOIN LATERAL unnest(tsvector_to_array(c.tsv)) AS t(term)
WHERE c.tenant_id = $1 AND c.workspace = $2 GROUP BY t.term
"""
CORPUS_STATS = """
INSERT INTO agent_memory.doc_corpus (tenant_id, workspace, chunks, tokens)
SELECT $1, $2, count(*), coalesce(sum(c.token_estimate), 0) FROM agent_memory.doc_chunks c
JOIN agent_memory.doc_items i ON i.id = c.item_id AND c.version_num = i.latest_version
WHERE c.tenant_id = $1 AND c.workspace = $2
"""


def records(docs: list[dict], workspace: str, profile: str, pool: np.ndarray) -> dict[str, list[tuple]]:
    rng = np.random.default_rng(SEED)
    now = datetime.now(UTC)
    out: dict[str, list[tuple]] = {"doc_items": [], "doc_versions": [], "doc_chunks": [], "chunk_embeddings": []}
    commit_id, committed = None, 0
    for d in docs:
        item_id = new_item_id()
        created = now - timedelta(minutes=d["age_minutes"])
        updated = created + (now - created) * 0.5 if len(d["versions"]) > 1 else created
        if not d["canonicalKey"]:  # memory.commit's documents: ten a commit, as bench.documents loads them
            commit_id = commit_id if committed % 10 else str(uuid.uuid4())
            committed += 1
        out["doc_items"].append(
            (item_id, TENANT, workspace, d["kind"], d["title"], d["canonicalKey"], d["docClass"],
             bool(d["canonicalKey"]), "archived" if d["archived"] else "active", False, d["tags"], created, updated,
             len(d["versions"]))
        )  # fmt: skip
        for num, (content, content_hash, chunks) in enumerate(d["versions"], 1):
            at = created if num == 1 else updated
            out["doc_versions"].append(
                (TENANT, workspace, item_id, num, content, content_hash, None if d["canonicalKey"] else commit_id, at)
            )
            noise = rng.normal(0, NOISE, (len(chunks), pool.shape[1])).astype(np.float32)
            for (index, text, path, anchor, start, end, tokens, p), e in zip(chunks, noise, strict=True):
                out["doc_chunks"].append(
                    (TENANT, workspace, item_id, num, index, text, path, anchor, start, end, tokens)
                )
                vector = pool[p] + e
                out["chunk_embeddings"].append(
                    (TENANT, workspace, item_id, num, index, profile, vector / np.linalg.norm(vector), at)
                )
    return out


COLUMNS = {
    "doc_items": ["id", "tenant_id", "workspace", "kind", "title", "canonical_key", "doc_class", "is_canonical",
                  "status", "pinned", "tags", "created_at", "updated_at", "latest_version"],
    "doc_versions": ["tenant_id", "workspace", "item_id", "version_num", "content", "content_hash", "commit_id",
                     "created_at"],
    "doc_chunks": ["tenant_id", "workspace", "item_id", "version_num", "chunk_index", "text", "heading_path", "anchor",
                   "start_char", "end_char", "token_estimate"],
    "chunk_embeddings": ["tenant_id", "workspace", "item_id", "version_num", "chunk_index", "profile_id", "embedding",
                         "created_at"],
}  # fmt: skip


async def bulk_load(system: System, owner: asyncpg.Connection, workspace: str, profile: str, n: int) -> dict:
    seconds: dict[str, float] = {}
    started = time.perf_counter()
    before = await stored(owner, workspace, profile)
    if before["latest"] >= n and before["unembedded"] == 0 and before["corpus_chunks"] == before["latest"]:
        return {"reused": True, "seconds": {"check": round(time.perf_counter() - started, 1)}}
    if before["rows"] or before["corpus_chunks"] is not None:
        await clear(owner, workspace)
    pool_texts = []
    for doc in sources():
        chunks = chunk_markdown(redact_pii(doc["content"]))
        pool_texts += [chunk_text(list(c.heading_path), c.text)[:MAX_CHARS] for c in chunks]  # /v1/embeddings' limit
    mark = time.perf_counter()
    docs = await asyncio.to_thread(corpus, n)
    seconds["generate_and_chunk"] = round(time.perf_counter() - mark, 1)
    print(f"bench: {len(docs)} documents generated and chunked in {seconds['generate_and_chunk']} s", flush=True)
    mark = time.perf_counter()
    pool = await asyncio.to_thread(embed_pool, system.service_url("embedder"), pool_texts)
    seconds["embed_pool"] = round(time.perf_counter() - mark, 1)
    print(f"bench: {len(pool_texts)} source chunks embedded in {seconds['embed_pool']} s", flush=True)
    rows = records(docs, workspace, profile, pool)

    await register_vector(owner)
    await owner.execute("SET maintenance_work_mem = '1GB'; SET max_parallel_maintenance_workers = 2")
    indexes = {r["indexname"]: r["indexdef"] for r in await owner.fetch(BULK_INDEXES)}
    try:
        for name in indexes:
            await owner.execute(f"DROP INDEX agent_memory.{name}")
        mark = time.perf_counter()
        async with owner.transaction():
            for table, columns in COLUMNS.items():
                await owner.copy_records_to_table(
                    table, schema_name="agent_memory", records=rows[table], columns=columns
                )
            await owner.execute(TERM_STATS, TENANT, workspace)
            await owner.execute(CORPUS_STATS, TENANT, workspace)
        seconds["copy_and_stats"] = round(time.perf_counter() - mark, 1)
    finally:
        mark = time.perf_counter()
        for definition in indexes.values():  # also after a failed load: a kept data dir keeps its indexes
            await owner.execute(definition.replace("CREATE INDEX ", "CREATE INDEX IF NOT EXISTS ", 1))
        seconds["indexes"] = round(time.perf_counter() - mark, 1)
    mark = time.perf_counter()
    for table in (*COLUMNS, "doc_term_stats", "doc_corpus"):
        await owner.execute(f"VACUUM (ANALYZE) agent_memory.{table}")
    seconds["vacuum_analyze"] = round(time.perf_counter() - mark, 1)
    seconds["total"] = round(time.perf_counter() - started, 1)
    return {"reused": False, "seconds": seconds, "rebuilt_indexes": sorted(indexes)}


async def describe(owner: asyncpg.Connection, workspace: str, profile: str) -> dict:
    row = await owner.fetchrow(
        "SELECT count(*) AS documents, count(*) FILTER (WHERE is_canonical) AS canonical,"
        " count(*) FILTER (WHERE status = 'archived') AS archived, sum(latest_version) AS versions"
        " FROM agent_memory.doc_items WHERE tenant_id = $1 AND workspace = $2",
        TENANT, workspace,
    )  # fmt: skip
    held = await stored(owner, workspace, profile)
    corpus_row = await owner.fetchrow(
        "SELECT chunks, tokens FROM agent_memory.doc_corpus WHERE tenant_id = $1 AND workspace = $2", TENANT, workspace
    )
    terms = await owner.fetchval(
        "SELECT count(*) FROM agent_memory.doc_term_stats WHERE tenant_id = $1 AND workspace = $2 AND df > 0",
        TENANT, workspace,
    )  # fmt: skip
    elsewhere = await owner.fetchval(
        "SELECT count(*) FROM agent_memory.chunk_embeddings WHERE profile_id = $1 AND NOT (tenant_id = $2"
        " AND workspace = $3)",
        profile, TENANT, workspace,
    )  # fmt: skip
    return dict(row) | {
        "chunks": held["latest"],
        "chunk_rows": held["rows"],
        "unembedded": held["unembedded"],
        "mean_chunk_tokens": round(corpus_row["tokens"] / max(corpus_row["chunks"], 1), 1),
        "terms": terms,
        "other_workspaces_vectors": elsewhere,  # in the same HNSW index: the searches walk past them
    }


# --- the measurements ---


async def index_scans(owner: asyncpg.Connection) -> dict[str, int]:
    rows = await owner.fetch(
        "SELECT indexrelname, idx_scan FROM pg_stat_user_indexes WHERE schemaname = 'agent_memory'"
        " AND relname IN ('doc_chunks', 'chunk_embeddings')"
    )
    return {r["indexrelname"]: r["idx_scan"] for r in rows}


async def list_times(client: httpx.AsyncClient) -> dict[str, tuple[float, float]]:
    """memory-api's memento_search_latency_seconds as (sum, count) per list."""
    text = (await client.get("/metrics")).text
    out: dict[str, list[float]] = {}
    for family in text_string_to_metric_families(text):
        if family.name == "memento_search_latency_seconds":
            for s in family.samples:
                if s.name.endswith(("_sum", "_count")):
                    out.setdefault(s.labels["search_type"], [0.0, 0.0])[s.name.endswith("_count")] = s.value
    return {k: (v[0], v[1]) for k, v in out.items()}


def mean_ms(before: dict, after: dict) -> dict[str, float]:
    """The mean ms of each list between two list_times snapshots."""
    out = {}
    for name in LISTS:
        total, count = (after.get(name, (0, 0))[i] - before.get(name, (0, 0))[i] for i in (0, 1))
        if count:
            out[name] = round(total / count * 1000, 2)
    return out


def leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


async def ping(system: System, concurrency: int, ops: int) -> dict:
    """The MCP ping through the gateway (bench.run's): the floor under every call. A client and gateway that speak a
    protocol revision without ping answer it with an error: recorded, and the searches are measured all the same."""
    try:
        return percentiles(await through_gateway(system, None, "ping", concurrency, ops))
    except Exception as exc:
        print(f"  ping c={concurrency} failed: {leaf(exc)!r}", flush=True)
        return {"error": repr(leaf(exc))}


class Explaining:
    """A connection for repositories/documents.py's search functions that runs each of their queries under EXPLAIN
    (ANALYZE, BUFFERS) first: the plans memory.search's own SQL gets, without a copy of that SQL here."""

    def __init__(self, conn: asyncpg.Connection) -> None:
        self.conn = conn
        self.plans: list[dict] = []

    async def execute(self, sql: str, *args) -> str:
        return await self.conn.execute(sql, *args)

    async def fetch(self, sql: str, *args) -> list:
        plan = await self.conn.fetchval(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}", *args)
        self.plans.append(json.loads(plan)[0])
        return await self.conn.fetch(sql, *args)


def plan_summary(plan: dict) -> dict:
    """A plan's execution time and its nodes in order (with the index or table each reads)."""
    nodes: list[str] = []

    def walk(node: dict) -> None:
        on = node.get("Index Name") or node.get("Relation Name")
        nodes.append(node["Node Type"] + (f" {on}" if on else ""))
        for child in node.get("Plans", []):
            walk(child)

    walk(plan["Plan"])
    return {"ms": round(plan["Execution Time"], 2), "nodes": list(dict.fromkeys(nodes))}


async def plans(system: System, workspace: str, profile: str, dimension: int) -> dict:
    """The plans of memory.search's three lists for one query of each type, run by memory-api's own functions under
    the bench principal, as custom plans and as the generic plans a prepared statement may switch to after five
    runs (memory-api's asyncpg pool prepares every statement)."""
    chosen: dict[str, str] = {}
    for q in json.loads(QUERIES.read_text())["queries"]:
        if q["type"] not in chosen and (q["type"] != "identifier" or identifier_in(q["query"])):
            chosen[q["type"]] = q["query"]
    scope = Scope(tenant_id=TENANT, workspace=workspace, agent_id="default")
    embedder = InternalClient(system.service_url("embedder"), timeout_s=30)
    conn = await asyncpg.connect(system.info["database_url"], server_settings={"search_path": "agent_memory,public"})
    await register_vector(conn)
    out: dict = {}
    try:
        for kind, text in chosen.items():
            vector = await embed(embedder, "plan: " + text, profile)
            for mode in ("custom", "generic"):
                async with conn.transaction():
                    await set_principal(conn, tenant_id=TENANT, workspace=workspace, agent_id="default")
                    if mode == "generic":
                        await conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
                    x, names = Explaining(conn), ["lexical", "semantic"]
                    await repo.bm25(x, scope, text, None, False, LEXICAL_TOP_K)
                    await repo.nearest(x, scope, profile, dimension, vector, None, False, SEMANTIC_TOP_K)
                    if identifier := identifier_in(text):
                        await repo.trigram(x, scope, identifier, None, False, TRIGRAM_TOP_K)
                        names.append("trigram")
                out[f"{kind}|{mode}"] = {"query": text} | {
                    n: plan_summary(p) for n, p in zip(names, x.plans, strict=True)
                }
    finally:
        await conn.close()
        await embedder.aclose()
    return out


async def measure(system: System, owner: asyncpg.Connection, workspace: str, profile: str, dimension: int, args):
    queries = [q["query"] for q in json.loads(QUERIES.read_text())["queries"]]
    texts = [p + q for p in (*PREFIXES, *MORE_PREFIXES) for q in queries]
    needed = sum(args.ops // c * c + 3 * c for c in args.concurrency)
    if needed > len(texts):
        raise SystemExit(f"bench: {needed} distinct queries needed, {len(texts)} available; lower --ops")
    results: dict = {}
    embedder, times = InternalClient(system.service_url("embedder"), timeout_s=30), []
    try:
        for text in ["lookup: " + q for q in queries]:  # bench.documents' texts: other than every search's
            started = time.perf_counter()
            await embed(embedder, text, profile)
            times.append(time.perf_counter() - started)
    finally:
        await embedder.aclose()
    results["query_embedding"] = percentiles(times[3:])  # the first three warm it, unmeasured
    print(f"  query embedding alone: {results['query_embedding']}", flush=True)
    scans_before = await index_scans(owner)
    searches = 0
    if args.warmup:  # cold index and heap pages after a restart on a kept store: read once, unmeasured
        await search_latency(system, workspace, [WARM_PREFIX + q for q in queries * 10], 1, args.warmup)
        searches += args.warmup + 3
    latency = results["latency"] = {}
    results["memory_api_list_ms"] = {}
    async with httpx.AsyncClient(base_url=system.service_url("memory-api"), timeout=10) as metrics:
        for c in args.concurrency:
            latency[f"ping|c{c}"] = await ping(system, c, args.ops)
            before = await list_times(metrics)
            latency[f"memory.search|c{c}"] = await search_latency(system, workspace, texts, c, args.ops)
            results["memory_api_list_ms"][f"c{c}"] = mean_ms(before, await list_times(metrics))
            searches += args.ops // c * c + 3 * c
            texts = texts[args.ops // c * c + 3 * c :]
            print(f"  memory.search c={c}: {latency[f'memory.search|c{c}']}", flush=True)
            print(f"    mean ms per list in memory-api: {results['memory_api_list_ms'][f'c{c}']}", flush=True)
    # the backends report their index scans when idle for a while (at most ~10 s later): wait for them
    hnsw = f"chunk_embeddings_hnsw_{profile}"
    deadline = time.monotonic() + 20
    while True:
        scans = {k: v - scans_before.get(k, 0) for k, v in (await index_scans(owner)).items()}
        if scans.get(hnsw, 0) >= searches or time.monotonic() > deadline:
            break
        await asyncio.sleep(1)
    results["index_scans"] = {"searches": searches, **{k: v for k, v in sorted(scans.items()) if v}}
    results["hnsw_used"] = scans.get(hnsw, 0) >= searches
    try:  # a diagnostic: never the reason a run fails (others change those functions' signatures)
        results["plans"] = await plans(system, workspace, profile, dimension)
    except Exception as exc:
        results["plans"] = {"error": repr(exc)}
    return results


async def main_async(args: argparse.Namespace) -> dict:
    args.url = None  # bench.run's System: always a system of our own
    workspace = f"bench-docs-scale-{args.chunks}"  # one per size, so a kept data dir can hold both
    system = System(args)
    system.start()
    owner = None
    try:
        owner = await asyncpg.connect(system.owner_url())
        profile, dimension = await owner.fetchrow(
            "SELECT id, dimension FROM agent_memory.embedding_profiles WHERE is_active"
        )
        results: dict = {
            "machine": f"{platform.machine()}, {os.cpu_count()} cores",
            "command": "python -m bench.documents_scale " + " ".join(sys.argv[1:]),
            "workspace": workspace,
            "profile": profile,
            "ops_per_level": args.ops,
        }
        results["load"] = await bulk_load(system, owner, workspace, profile, args.chunks)
        results["corpus"] = await describe(owner, workspace, profile)
        print(f"bench: load {results['load']}\nbench: corpus {results['corpus']}", flush=True)
        if results["corpus"]["other_workspaces_vectors"]:
            print(
                f"bench: note: {results['corpus']['other_workspaces_vectors']} vectors of other workspaces share the"
                " HNSW index (a kept data dir loaded at another size): use one data dir per size for the README",
                flush=True,
            )
        results.update(await measure(system, owner, workspace, profile, dimension, args))
        return results
    finally:
        if owner is not None:
            await owner.close()
        system.stop()


# --- the report ---


def table(results: dict) -> list[str]:
    embed_p95 = results["query_embedding"]["p95_ms"]
    target = round(embed_p95 + 20, 2)
    rows = [
        "| operation | clients | p50 ms | p95 ms | p99 ms | ops/s | target p95 |",
        "|---|---|---|---|---|---|---|",
        f"| query embedding alone (embedder HTTP) | 1 | {results['query_embedding']['p50_ms']} | {embed_p95} "
        f"| {results['query_embedding']['p99_ms']} | — | — |",
    ]
    for key, stats in results["latency"].items():
        op, level = key.split("|")
        if "error" in stats:
            rows.append(f"| {op} | {level[1:]} | — | — | — | — | failed: {stats['error']} |")
            continue
        mark = (
            "— (floor)" if op == "ping" else f"≤ {target} (embedding + 20) {'✓' if stats['p95_ms'] <= target else '✗'}"
        )
        ops = stats.get("throughput_per_s", "—")
        rows.append(
            f"| {op} | {level[1:]} | {stats['p50_ms']} | {stats['p95_ms']} | {stats['p99_ms']} | {ops} | {mark} |"
        )
    return rows


def lists_line(results: dict) -> str:
    parts = [
        f"{level[1:]} client(s): " + ", ".join(f"{k} {v}" for k, v in times.items())
        for level, times in results["memory_api_list_ms"].items()
    ]
    return (
        "Mean ms of each list inside memory-api (`memento_search_latency_seconds`; hybrid = the three lists, the "
        "chunk rows and the fusion, after the query embedding): " + "; ".join(parts) + "."
    )


def plan_lines(results: dict) -> list[str]:
    """A table of each list's plans: per plan mode, the execution ms for each query type and the indexes / tables
    read (over the query types)."""
    found = results.get("plans", {})
    if "error" in found:
        return [f"Plans: not taken ({found['error']})."]
    rows: dict[tuple[str, str], dict] = {}
    for key, lists in found.items():
        kind, mode = key.split("|")
        for name, plan in lists.items():
            if name != "query":
                row = rows.setdefault((name, mode), {"ms": [], "reads": {}})
                row["ms"].append(f"{plan['ms']} ({kind})")
                row["reads"] |= dict.fromkeys(n for n in plan["nodes"] if n.startswith(("Index", "Bitmap", "Seq")))
    out = ["| list | plan | ms by query | reads |", "|---|---|---|---|"]
    for (name, mode), row in sorted(rows.items()):
        out.append(f"| {name} | {mode} | {', '.join(row['ms'])} | {', '.join(row['reads']) or '—'} |")
    return out


def markdown(results: dict) -> str:
    c, load = results["corpus"], results["load"]
    scans = results["index_scans"]
    hnsw = scans.get(f"chunk_embeddings_hnsw_{results['profile']}", 0)
    loaded = "reused from a kept data dir" if load["reused"] else f"bulk-loaded in {load['seconds']['total']} s"
    return "\n".join([
        f"Latest: {c['chunks']:,} latest-version chunks ({c['chunk_rows']:,} chunk rows with earlier versions) in "
        f"{c['documents']:,} documents derived from the 50 of `bench/data/documents_corpus/` ({c['canonical']:,} "
        f"canonical, {c['archived']:,} archived; {c['terms']:,} distinct terms, {c['mean_chunk_tokens']} tokens a "
        f"chunk), one workspace, {loaded}; {results['ops_per_level']} searches per row, {results['machine']}. "
        f"Produced by `{results['command'].strip()}` (`bench/results/{results['file']}`). The HNSW index on chunk "
        f"vectors served {hnsw} scans for {scans['searches']} searches "
        f"({'every search used it' if results['hnsw_used'] else 'NOT every search used it'}).",
        "",
        *table(results),
        "",
        lists_line(results),
        "",
        "Plans of memory.search's lists (memory-api's functions under EXPLAIN ANALYZE after the run; generic: the "
        "plan a prepared statement may switch to):",
        "",
        *plan_lines(results),
    ])  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=10_000, help="latest-version chunks to load (10000, 100000)")
    parser.add_argument("--data-dir", help="data dir for the started system (default: a fresh temporary one)")
    parser.add_argument("--port", type=int, default=56632, help="gateway port of the started system")
    parser.add_argument("--ops", type=int, default=200, help="measured memory.search calls per concurrency level")
    parser.add_argument("--warmup", type=int, default=50, help="unmeasured searches first (other query texts)")
    parser.add_argument("--concurrency", type=lambda s: [int(x) for x in s.split(",")], default=[1, 8])
    parser.add_argument("--no-readme", action="store_true", help="do not refresh its block in docs/benchmarks.md")
    args = parser.parse_args()
    results = asyncio.run(main_async(args))
    RESULTS.mkdir(parents=True, exist_ok=True)
    results["file"] = f"documents-scale-{args.chunks}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    (RESULTS / results["file"]).write_text(json.dumps(results, indent=2) + "\n")
    print("\n" + "\n".join(table(results)) + "\n\n" + lists_line(results))
    scans = results["index_scans"]
    print(f"index scans during the searches: {scans} — HNSW used by every search: {results['hnsw_used']}")
    print("plans of the lists (EXPLAIN ANALYZE after the run):\n" + "\n".join(plan_lines(results)))
    if not args.no_readme and replace_readme_block(f"documents-{args.chunks}", markdown(results)):
        print(f"bench: README block documents-{args.chunks} refreshed")
    print(f"bench: results written to bench/results/{results['file']}")


if __name__ == "__main__":
    main()

"""Seed 001's `documents` dialect on the whole system (started as bench.run starts it), in one run. Ranking: the
corpus of bench/data/documents_corpus/ loaded through the gateway (official MCP client), then, once every chunk has
its vector, each query of bench/data/documents_queries.json ranked by memory.search's lexical, semantic and trigram
lists alone, by their fusion (memory-api's own functions under the bench principal) and by memory.search through the
gateway (the two must agree): recall@5/@10 and MRR@20, overall and per query type. Latency: memory.search at 1 and 8
clients beside the query-embedding time and MCP ping; canonical.upsert of a ~20 KB document beside chunk_markdown's
time, and each upsert's answer → all its chunks searchable by meaning. Writes bench/results/documents-<time>.json
and refreshes the README's `documents` block.

    python -m bench.documents [--port P] [--data-dir DIR] [--ranking-only]
    python -m bench.documents --replay documents-ranking-<time>.json   # the ranking again from a run's stored lists
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import secrets
import sys
import time
import uuid
from dataclasses import asdict, replace
from pathlib import Path

import asyncpg
import numpy as np
from mcp import Client
from pgvector.asyncpg import register_vector

from bench import documents_fusion as fusion
from bench.dialects import call, gateway_client
from bench.report import RESULTS, ROOT, percentiles, replace_readme_block
from bench.run import System, through_gateway
from memento_memory_api.recall.documents import (
    LEXICAL_TOP_K,
    SEMANTIC_TOP_K,
    TRIGRAM_TOP_K,
    Weights,
    beside,
    distinct_words,
    fuse,
    lift,
    prefer_canonical,
)
from memento_memory_api.recall.lexical import identifier_in, terms
from memento_memory_api.repositories import documents as repo
from memento_memory_api.settings import MemoryApiSettings
from memento_memory_api.uow import Scope
from memento_shared.db.rls import set_principal
from memento_shared.internal_http import InternalClient
from memento_shared.text.chunking import chunk_markdown, outline

CORPUS = ROOT / "bench" / "data" / "documents_corpus"
QUERIES = ROOT / "bench" / "data" / "documents_queries.json"
LISTS = ("lexical", "semantic", "trigram", "seed", "fused", "gateway")
LABEL = {
    "lexical": "lexical (BM25)",
    "semantic": "semantic",
    "trigram": "trigram",
    "seed": "fused, seed 001's weights (Part 8)",
    "fused": "fused, memory-api's weights (chosen on all: in-sample)",
    "gateway": "memory.search (gateway)",
    "held_out": "fused, weights and neighbour lift chosen on the other folds (held out)",
    "held_out_before": "the same without the canonical preference (held out; before issue 48)",
} | {f"lift {v}": f"fused, neighbour lift {v}, weights chosen on the other folds (held out)" for v in fusion.LIFTS}
TYPES = ("keyword", "paraphrase", "identifier")
MRR_DEPTH = 20
# query texts for the latency rows: the set's queries under these prefixes, so that no measured search meets a query
# vector memory-api cached during the ranking (which asked the bare queries)
PREFIXES = ("docs: ", "find: ", "search: ", "about: ", "notes on ")


def read_corpus() -> list[dict]:
    docs = []
    for path in sorted(CORPUS.glob("*.md")):
        head, body = path.read_text().split("\n---\n", 1)
        meta = dict(line.split(": ", 1) for line in head.splitlines()[1:])
        tags = [t.strip() for t in meta.get("tags", "").split(",") if t.strip()]
        docs.append({"kind": meta["kind"], "title": meta["title"].strip('"'), "docClass": meta.get("docClass"),
                     "canonicalKey": meta.get("canonicalKey"), "tags": tags, "content": body})  # fmt: skip
    return docs


async def load(client: Client, docs: list[dict]) -> dict[str, str]:
    """Every document through the tools: canonical.upsert for canonical ones, memory.commit (10 a commit) for the
    rest. Returns item ids by canonicalKey and by title."""
    ids: dict[str, str] = {}
    for d in docs:
        if d["canonicalKey"]:
            args = {"canonicalKey": d["canonicalKey"], "docClass": d["docClass"], "title": d["title"],
                    "contentMarkdown": d["content"], "tags": d["tags"]}  # fmt: skip
            args["idempotencyKey"] = str(uuid.uuid4())
            ids[d["canonicalKey"]] = ids[d["title"]] = (await call(client, "canonical.upsert", args))["itemId"]
    rest = [d for d in docs if not d["canonicalKey"]]
    for i in range(0, len(rest), 10):
        batch = rest[i : i + 10]
        entries = [{"kind": d["kind"], "title": d["title"], "content": d["content"], "tags": d["tags"]} for d in batch]
        answer = await call(client, "memory.commit", {"idempotencyKey": str(uuid.uuid4()), "entries": entries})
        ids.update((d["title"], item["itemId"]) for d, item in zip(batch, answer["items"], strict=True))
    return ids


async def embedded(owner: asyncpg.Connection, workspace: str, profile: str, item=None, poll=0.5, timeout=900) -> int:
    """Wait until every latest-version chunk of the workspace (or of one item) has a vector in the profile; returns
    how many still have none (0 unless the timeout passed)."""
    deadline = time.monotonic() + timeout
    while missing := await owner.fetchval(
        "SELECT count(*) FROM agent_memory.doc_chunks c JOIN agent_memory.doc_items i ON i.id = c.item_id"
        " AND c.version_num = i.latest_version WHERE c.workspace = $1 AND ($3::text IS NULL OR c.item_id = $3)"
        " AND NOT EXISTS (SELECT 1 FROM agent_memory.chunk_embeddings e WHERE e.item_id = c.item_id"
        " AND e.version_num = c.version_num AND e.chunk_index = c.chunk_index AND e.profile_id = $2)",
        workspace, profile, item,
    ):  # fmt: skip
        if time.monotonic() > deadline:
            return missing
        await asyncio.sleep(poll)
    return 0


def answers(query: dict, docs: dict[str, dict], ids: dict[str, str]) -> list[tuple[str, list[str]]]:
    """A query's answers as (item id, heading path): `section` is an anchor or a heading title of the document."""
    out = []
    for r in query["relevant"]:
        sections = outline(docs[r["doc"]]["content"])
        by_anchor = re.match(r"h\d:", r["section"])
        found = [s for s in sections if (s.anchor if by_anchor else s.title.lower()) == r["section"].lower()]
        if len(found) != 1:
            raise SystemExit(f"bench: {query['id']}: section {r['section']!r} of {r['doc']!r} found {len(found)} times")
        out.append((ids[r["doc"]], found[0].heading_path))
    return out


def hit(answer: tuple[str, list[str]], result: tuple[str, list[str]]) -> bool:
    """A result answers when it is the answer's item and within its section (a subsection counts)."""
    return result[0] == answer[0] and list(result[1][: len(answer[1])]) == list(answer[1])


def measure(ranked: list[tuple[str, list[str]]], relevant: list[tuple[str, list[str]]]) -> dict[str, float]:
    def recall(k: int) -> float:
        return sum(any(hit(a, r) for r in ranked[:k]) for a in relevant) / len(relevant)

    first = next((n for n, r in enumerate(ranked[:MRR_DEPTH], 1) if any(hit(a, r) for a in relevant)), None)
    return {"recall@5": recall(5), "recall@10": recall(10), "mrr": 1 / first if first else 0.0}


async def embed(embedder: InternalClient, text: str, profile: str) -> np.ndarray:
    answer = await embedder.post_json("/v1/embeddings", {"input": [text], "input_type": "query", "profile": profile})
    if answer.status != 200:
        raise SystemExit(f"bench: the embedder answered HTTP {answer.status}")
    return np.asarray(json.loads(answer.content)["data"][0]["embedding"], dtype=np.float32)


SEED = Weights(k=60.0, lexical=0.4, semantic=0.5, trigram=0.1, canonical_boost=0.15, coverage_power=0.0)


async def rank(system: System, client: Client, workspace: str, profile: tuple[str, int], queries, docs, ids) -> dict:
    """Each query's three lists, their fusion with the seed's weights (Part 8) and with memory-api's, computed
    in-process with memory.search's own functions under its principal, and memory.search's answer through the
    gateway, each scored against the query's answers; then the weights chosen and scored on held-out folds
    (bench.documents_fusion) over the same lists."""
    settings = MemoryApiSettings(DATABASE_URL=system.info["database_url"], REDIS_URL=system.info["redis_url"])
    scope = Scope(tenant_id="default", workspace=workspace, agent_id="default")
    embedder = InternalClient(system.service_url("embedder"), timeout_s=30)
    conn = await asyncpg.connect(system.info["database_url"], server_settings={"search_path": "agent_memory,public"})
    await register_vector(conn)
    per_query, disagree, raw, preferred, texts = [], [], [], [], {}
    try:
        for q in queries:
            words, identifier = terms(q["query"]), identifier_in(q["query"])
            vector = await embed(embedder, q["query"], profile[0])
            async with conn.transaction():
                await set_principal(conn, tenant_id="default", workspace=workspace, agent_id="default")
                lexical, covered = (
                    await repo.bm25(conn, scope, q["query"], None, False, LEXICAL_TOP_K) if words else ([], [])
                )
                lists = {
                    "lexical": lexical,
                    "semantic": await repo.nearest(conn, scope, *profile, vector, None, False, SEMANTIC_TOP_K),
                    "trigram": (
                        await repo.trigram(conn, scope, identifier, None, False, TRIGRAM_TOP_K) if identifier else []
                    ),
                }
                listed = list({k for found in lists.values() for k in found})
                rows = await repo.chunk_rows(conn, listed)
                # the chunks beside every listed one, so the folds can lift whichever chunks a weighting ranks best
                rows.update(await repo.chunk_rows(conn, list({n for k in listed for n in beside(k)} - set(rows))))
            canonical = {k: r["is_canonical"] for k, r in rows.items()}
            coverage = max(covered, default=0.0)
            relevant = answers(q, docs, ids)
            hits = {k: [a for a, answer in enumerate(relevant) if hit(answer, (k[0], rows[k]["heading_path"]))]
                    for k in rows}  # fmt: skip
            words = {k: distinct_words(r["text"]) for k, r in rows.items()}
            texts.update((key_text(k), r["text"]) for k, r in rows.items())
            raw.append({"id": q["id"], "type": q["type"], "doc": q["relevant"][0]["doc"], "lists": dict(lists),
                        "canonical": canonical, "coverage": coverage, "lexical_coverage": covered,
                        "hits": {k: a for k, a in hits.items() if a}, "answers": len(relevant),
                        "present": set(rows), "words": words})  # fmt: skip
            shipped = Weights.of(settings)
            plain = lift(fuse(lists, canonical, shipped, coverage), rows, shipped)
            fused = prefer_canonical(plain, canonical, words.__getitem__, shipped.same)
            if [k for k, _ in fused[:MRR_DEPTH]] != [k for k, _ in plain[:MRR_DEPTH]]:
                preferred.append(q["id"])
            lists["seed"] = [key for key, _ in fuse(lists, canonical, SEED, coverage)]
            lists["fused"] = [key for key, _ in fused]
            ranked = {name: [(k[0], list(rows[k]["heading_path"])) for k in keys] for name, keys in lists.items()}
            found = (await call(client, "memory.search", {"query": q["query"], "limit": MRR_DEPTH}))["results"]
            ranked["gateway"] = [(r["itemId"], r["headingPath"]) for r in found]
            mine = [(k[0], rows[k]["anchor"], round(s, 6)) for k, s in fused[:MRR_DEPTH]]
            if mine != [(r["itemId"], r["sectionAnchor"], r["score"]) for r in found]:
                disagree.append(q["id"])
            per_query.append({"id": q["id"], "type": q["type"], "trigram_ran": identifier is not None,
                              **{name: measure(ranked[name], relevant) for name in LISTS}})  # fmt: skip
    finally:
        await conn.close()
        await embedder.aclose()
    print("bench: choosing the fusion weights on held-out folds ...", flush=True)
    before, tuning = retune(raw, Weights.of(settings).same)
    summary = {}
    for group in ("all", *TYPES):
        chosen = [p for p in per_query if group in ("all", p["type"])]
        summary[group] = {"queries": len(chosen), "trigram_ran": sum(p["trigram_ran"] for p in chosen)} | {
            name: {m: round(sum(p[name][m] for p in chosen) / len(chosen), 3) for m in ("recall@5", "recall@10", "mrr")}
            for name in LISTS
        }
        summary[group].update(held_out_rows(before, tuning, group))
    for record in raw:  # chunk keys as text, for the results file
        record["lists"] = {n: [key_text(k) for k in keys] for n, keys in record["lists"].items()}
        record["canonical"] = [key_text(k) for k, c in record["canonical"].items() if c]
        record["hits"] = {key_text(k): a for k, a in record["hits"].items()}
        record["present"] = sorted(key_text(k) for k in record["present"])
        del record["words"]  # the chunks' texts are kept once, in `chunk_texts`
    return {"summary": summary, "fused_vs_gateway_disagree": disagree, "per_query": per_query,
            "tuning": {k: v for k, v in tuning.items() if k != "per_query_held_out"},
            "tuning_before": {k: v for k, v in before.items() if k != "per_query_held_out"},
            "canonical_preference_changed_top20": preferred,
            "shipped": asdict(Weights.of(settings)), "lists_per_query": raw, "chunk_texts": texts}  # fmt: skip


def retune(raw: list[dict], same: float) -> tuple[dict, dict]:
    """The weights chosen and scored on held-out folds twice: without the canonical preference (the seed's weighting
    has none: the figures before issue 48) and with it at `same`, as memory-api ships it."""
    return fusion.tune(raw, SEED), fusion.tune(raw, replace(SEED, same=same))


def held_out_rows(before: dict, tuning: dict, group: str) -> dict:
    rows = {"held_out": tuning["summary"][group]["held_out"], "held_out_before": before["summary"][group]["held_out"]}
    return rows | {f"lift {value}": s for value, s in tuning["summary"][group]["held_out_lift"].items()}


def replay(path: str) -> dict:
    """A results file's ranking again, from its stored lists and chunk texts, with this checkout's fusion and
    canonical preference (no system started): the held-out rows and memory-api's in-sample row recomputed, the
    single lists' rows and the gateway's as that run measured them."""
    results = json.loads((Path(path) if Path(path).exists() else RESULTS / path).read_text())
    ranking, texts = results["ranking"], results["ranking"]["chunk_texts"]

    def key(text: str) -> tuple:
        item, version, index = text.rsplit("/", 2)
        return item, int(version), int(index)

    raw = []
    for r in ranking["lists_per_query"]:
        present = {key(k) for k in r["present"]}
        raw.append(r | {"lists": {n: [key(k) for k in ks] for n, ks in r["lists"].items()},
                        "canonical": {key(k): True for k in r["canonical"]},
                        "hits": {key(k): a for k, a in r["hits"].items()}, "present": present,
                        "words": {k: distinct_words(texts[key_text(k)]) for k in present}})  # fmt: skip
    same = MemoryApiSettings.model_fields["document_canonical_same_words"].default
    shipped = replace(Weights(**ranking["shipped"]), same=same)
    before, tuning = retune(raw, same)
    for group in ("all", *TYPES):
        chosen = [q for q in raw if group in ("all", q["type"])]
        ranking["summary"][group]["fused"] = fusion.mean(fusion.metrics(q, fusion.ranking(q, shipped)) for q in chosen)
        ranking["summary"][group].update(held_out_rows(before, tuning, group))
    ranking["tuning"] = {k: v for k, v in tuning.items() if k != "per_query_held_out"}
    ranking["tuning_before"] = {k: v for k, v in before.items() if k != "per_query_held_out"}
    ranking["shipped"] = asdict(shipped)
    ranking["canonical_preference_changed_top20"] = [
        q["id"]
        for q in raw
        if fusion.ranking(q, shipped)[:MRR_DEPTH] != fusion.ranking(q, replace(shipped, same=0))[:MRR_DEPTH]
    ]
    results["replayed_from"] = results.pop("file")
    results["command"] = "python -m bench.documents " + " ".join(sys.argv[1:])
    return results


def key_text(key: tuple) -> str:
    return "/".join(map(str, key))


async def search_latency(system: System, workspace: str, texts: list[str], concurrency: int, ops: int) -> dict:
    latencies: list[float] = []
    pool = iter(texts)

    async def loop(count: int) -> None:
        async with gateway_client(system, "documents", workspace) as client:
            for i in range(count + 3):  # the first three warm the session, unmeasured
                started = time.perf_counter()
                await call(client, "memory.search", {"query": next(pool)})
                if i >= 3:
                    latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(loop(ops // concurrency) for _ in range(concurrency)))
    return percentiles(latencies) | {"throughput_per_s": round(len(latencies) / (time.perf_counter() - started), 1)}


def big_document(docs: list[dict], size: int = 20_000) -> str:
    """Corpus documents under one title, each heading a level down, up to `size` bytes + 5 %."""
    parts = ["# Parcelwise handbook (bench copy)\n"]
    for d in docs:
        part = re.sub(r"^(#{1,5}) ", r"#\1 ", d["content"], flags=re.M)
        if len("\n".join([*parts, part]).encode()) <= size * 1.05:
            parts.append(part)
    return "\n".join(parts)


async def upsert_latency(client, owner, workspace: str, profile: str, content: str, count: int) -> dict:
    """canonical.upsert of a new version of the same ~20 KB document, `count` times; after each answer, the time
    until every chunk of that version has its vector (polled every 10 ms), before the next upsert."""
    upserts, searchable = [], []
    for n in range(count):
        args = {"canonicalKey": "bench/handbook", "docClass": "app_spec", "title": "Parcelwise handbook",
                "contentMarkdown": f"{content}\n\nRevision {secrets.token_hex(4)}-{n}.\n",
                "idempotencyKey": str(uuid.uuid4())}  # fmt: skip
        started = time.perf_counter()
        answer = await call(client, "canonical.upsert", args)
        answered = time.perf_counter()
        upserts.append(answered - started)
        if await embedded(owner, workspace, profile, answer["itemId"], poll=0.01, timeout=300):
            raise SystemExit("bench: an upserted version's chunks had no vectors after 5 minutes")
        searchable.append(time.perf_counter() - answered)
    return {"upsert": percentiles(upserts), "answer_to_searchable": percentiles(searchable)}


async def main_async(args: argparse.Namespace) -> dict:
    args.url = None  # bench.run's System: always a system of our own
    docs, queries = read_corpus(), json.loads(QUERIES.read_text())["queries"]
    by_name = {d["title"]: d for d in docs} | {d["canonicalKey"]: d for d in docs if d["canonicalKey"]}
    workspace = f"bench-docs-{secrets.token_hex(3)}"  # a kept data dir gets a fresh corpus each run
    system = System(args)
    system.start()
    owner = None
    try:
        owner = await asyncpg.connect(system.owner_url())
        profile = tuple(
            await owner.fetchrow("SELECT id, dimension FROM agent_memory.embedding_profiles WHERE is_active")
        )
        results: dict = {
            "machine": f"{platform.machine()}, {os.cpu_count()} cores",
            "command": "python -m bench.documents " + " ".join(sys.argv[1:]),
            "profile": profile[0],
            "corpus": {"documents": len(docs), "canonical": sum(bool(d["canonicalKey"]) for d in docs)},
        }
        async with gateway_client(system, "documents", workspace) as client:
            started = time.perf_counter()
            ids = await load(client, docs)
            results["corpus"]["load_s"] = round(time.perf_counter() - started, 2)
            results["corpus"]["chunks"] = await owner.fetchval(
                "SELECT count(*) FROM agent_memory.doc_chunks WHERE workspace = $1", workspace
            )
            print(f"bench: loaded {len(docs)} documents ({results['corpus']['chunks']} chunks)", flush=True)
            started = time.perf_counter()
            if missing := await embedded(owner, workspace, profile[0]):
                raise SystemExit(f"bench: {missing} chunks still have no vector after 15 minutes")
            results["corpus"]["embedded_after_s"] = round(time.perf_counter() - started, 1)
            print(f"bench: every chunk embedded {results['corpus']['embedded_after_s']} s after the load", flush=True)
            results["ranking"] = await rank(system, client, workspace, profile, queries, by_name, ids)
            if args.ranking_only:
                return results

            embedder, times = InternalClient(system.service_url("embedder"), timeout_s=30), []
            for text in ["lookup: " + q["query"] for q in queries]:  # other texts than every search's
                started = time.perf_counter()
                await embed(embedder, text, profile[0])
                times.append(time.perf_counter() - started)
            await embedder.aclose()
            results["query_embedding"] = percentiles(times[3:])  # the first three warm it, unmeasured
            texts = [p + q["query"] for p in PREFIXES for q in queries]
            latency = results["latency"] = {}
            for c in args.concurrency:
                latency[f"ping|c{c}"] = percentiles(await through_gateway(system, None, "ping", c, args.ops))
                latency[f"memory.search|c{c}"] = await search_latency(system, workspace, texts, c, args.ops)
                texts = texts[args.ops + 3 * c :]
                print(f"  memory.search c={c}: {latency[f'memory.search|c{c}']}", flush=True)
            content = big_document(docs)
            results["upsert_document"] = {"bytes": len(content.encode()), "chunks": len(chunk_markdown(content))}
            times = []
            for _ in range(101):  # the first call loads the tokenizer: unmeasured
                started = time.perf_counter()
                chunk_markdown(content)
                times.append(time.perf_counter() - started)
            results["chunk_markdown"] = percentiles(times[1:])
            results.update(await upsert_latency(client, owner, workspace, profile[0], content, args.upserts))
        return results
    finally:
        if owner is not None:
            await owner.close()
        system.stop()


def lines(results: dict) -> tuple[list[str], list[str]]:
    """The ranking table and the latency rows, as markdown."""
    s = results["ranking"]["summary"]
    table = ["| ranking | recall@5 | recall@10 | MRR@20 | " + " | ".join(f"{t} r@10 / MRR" for t in TYPES) + " |",
             "|---|---|---|---|" + "---|" * len(TYPES)]  # fmt: skip
    for name in (*LISTS, "held_out", "held_out_before", *(f"lift {v}" for v in fusion.LIFTS)):
        cells = [s["all"][name][m] for m in ("recall@5", "recall@10", "mrr")]
        cells += [f"{s[t][name]['recall@10']} / {s[t][name]['mrr']}" for t in TYPES]
        table.append(f"| {LABEL[name]} | " + " | ".join(map(str, cells)) + " |")
    if "latency" not in results:  # --ranking-only
        return table, []
    embed_p95, chunking = results["query_embedding"]["p95_ms"], results["chunk_markdown"]["p95_ms"]

    def against(p95: float, target: float, rule: str) -> str:
        return f"≤ {target:.2f} ({rule}) {'✓' if p95 <= target else '✗'}"

    rows = [
        "| operation | clients | p50 ms | p95 ms | target p95 |",
        "|---|---|---|---|---|",
        f"| query embedding alone (embedder HTTP) | 1 | {results['query_embedding']['p50_ms']} | {embed_p95} | — |",
    ]
    for key, stats in results["latency"].items():
        op, level = key.split("|")
        target = "— (floor)" if op == "ping" else against(stats["p95_ms"], embed_p95 + 20, "embedding + 20")
        rows.append(f"| {op} | {level[1:]} | {stats['p50_ms']} | {stats['p95_ms']} | {target} |")
    up, lag = results["upsert"], results["answer_to_searchable"]
    size = f"{results['upsert_document']['bytes'] / 1000:.1f} KB, {results['upsert_document']['chunks']} chunks"
    upsert_target = against(up["p95_ms"], 50 + chunking, "50 + chunking")
    rows += [
        f"| chunk_markdown alone ({size}) | 1 | {results['chunk_markdown']['p50_ms']} | {chunking} | — |",
        f"| canonical.upsert ({size}) | 1 | {up['p50_ms']} | {up['p95_ms']} | {upsert_target} |",
        f"| upsert answer → every chunk searchable by meaning | 1 | {lag['p50_ms']} | {lag['p95_ms']} | — |",
    ]
    return table, rows


def markdown(results: dict) -> str:
    table, rows = lines(results)
    corpus, ranking = results["corpus"], results["ranking"]
    s = ranking["summary"]
    return "\n".join([
        f"Latest: {corpus['documents']} documents ({corpus['canonical']} canonical, {corpus['chunks']} chunks), "
        f"{s['all']['queries']} queries ({', '.join(str(s[t]['queries']) + ' ' + t for t in TYPES)}; the trigram "
        f"list runs for the {s['all']['trigram_ran']} holding an identifier-like word), {results['machine']}. "
        f"Produced by `{results['command'].strip()}` (`bench/results/{results['file']}`). Fusion computed "
        f"in-process with memory.search's functions; memory.search through the gateway differed from it on "
        f"{len(ranking['fused_vs_gateway_disagree'])} queries.", "", *table, "", *rows,
    ])  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", help="data dir for the started system (default: a fresh temporary one)")
    parser.add_argument("--port", type=int, default=56532, help="gateway port of the started system")
    parser.add_argument("--ops", type=int, default=200, help="measured memory.search calls per concurrency level")
    parser.add_argument("--upserts", type=int, default=30, help="measured canonical.upserts of the ~20 KB document")
    parser.add_argument("--concurrency", type=lambda s: [int(x) for x in s.split(",")], default=[1, 8])
    parser.add_argument("--no-readme", action="store_true", help="do not refresh its block in docs/benchmarks.md")
    parser.add_argument("--ranking-only", action="store_true", help="the ranking alone: no latency, no README block")
    parser.add_argument("--replay", metavar="FILE", help="re-tune a results file's stored lists (bench/results/)")
    args = parser.parse_args()
    if args.replay:
        args.ranking_only = True
        results = replay(args.replay)
    else:
        results = asyncio.run(main_async(args))
    RESULTS.mkdir(parents=True, exist_ok=True)
    kind = "replay-" if args.replay else "ranking-" if args.ranking_only else ""
    results["file"] = f"documents-{kind}{time.strftime('%Y%m%d-%H%M%S')}.json"
    (RESULTS / results["file"]).write_text(json.dumps(results, indent=2) + "\n")
    table, rows = lines(results)
    print("\n" + "\n".join(table) + "\n\n" + "\n".join(rows))
    disagree = results["ranking"]["fused_vs_gateway_disagree"]
    print(f"\nfused in-process vs memory.search through the gateway: {len(disagree)} queries differ {disagree or ''}")
    if not (args.no_readme or args.ranking_only):
        replace_readme_block("documents", markdown(results))
    print(f"bench: results written to bench/results/{results['file']}")


if __name__ == "__main__":
    main()

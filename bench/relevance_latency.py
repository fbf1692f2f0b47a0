"""Recall-by-text latency of the shipped relevance order against plain fusion, alternating (issue 28, item 6: "the
latency rows of recall by text unchanged within the run's noise").

The system is started like `make run` (bench.run's System) and N LoCoMo conversations are stored through the gateway
as bench.locomo stores them (`remember`, `"{speaker} ({date}): {text}"`, topic = session, source = dia id). Then two
memory-api apps run in this process on that same store (create_app, the system's database, Valkey, embedder and
internal secret; the rest of the settings from the environment, as the launcher gives its memory-api):

- shipped: the default RECALL_* settings (context list, neighbours of the first candidates read, time boost, lift);
- plain:   RECALL_CONTEXT_WEIGHT=0, RECALL_LIFT=0, RECALL_TIME_BOOST=0 (bench.locomo.OFF: the engine's lists fused by
           RRF, no neighbours read).

Every question with evidence is asked as `recall {text}` (includeLinks false) on both apps in the order A B B A, the
app that is A alternating from question to question, for R rounds: slow drift of a loaded machine (another process,
a checkpoint) falls on both apps alike, and the paired difference per question (mean of the two shipped calls − mean
of the two plain ones) cancels it. Each app's query-embedding cache is emptied before every call, so every call pays
the model as a new question does; the query embedding alone (the embedder's /v1/embeddings, input_type query, through
the client memory-api uses) is timed in the same loop: the floor SPEC's "p95 ≤ query embedding + 20 ms" is read
against.

Sanity, before the figures are trusted: the first questions' ids from each app equal the gateway's for the same
settings (the system restarted with plain's environment at the end for plain's), the store has rows with a thread
(what the neighbour statement reads), and the neighbour index was scanned while the apps ran.

    python -m bench.relevance_latency                      # 2 conversations, 3 rounds, a fresh data dir
    python -m bench.relevance_latency --conversations 1 --rounds 1 --data-dir /tmp/rl   # quicker; reusable store
    python -m bench.relevance_latency --conversations 1 --bulk 1000000 --data-dir DIR       # beside a million

With `--bulk N`, each conversation's workspace first gets N fragments bulk-loaded beside it (bench.load: COPY, in
threads of 40 as sessions write them; most of an hour for a million, reused from a kept data dir): the searches and
the neighbour reads then run over a store of that size.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path

import asyncpg
import httpx
import numpy as np

from bench.load import load
from bench.locomo import DATA, OFF, Tools, git_state, store, turns, wait_embedded
from bench.report import percentiles, save
from bench.run import System
from memento_memory_api.app import create_app
from memento_shared.internal_http import InternalClient
from memento_shared.principal import HEADER, SCOPES, Principal, encode_principal
from memento_shared.settings import Settings

APPS = ("shipped", "plain")
ARGUMENTS = {"includeLinks": False}  # beside `text`; the default token budget, as agents call it
BOOTSTRAP = 2000


class App:
    """One memory-api in this process (its real lifespan), called as the gateway calls it."""

    def __init__(self, name: str, settings: Settings) -> None:
        self.name = name
        self.app = create_app(settings)
        self.secret = settings.internal_secret
        self.client: httpx.AsyncClient | None = None

    async def start(self, stack: AsyncExitStack) -> App:
        await stack.enter_async_context(self.app.router.lifespan_context(self.app))
        self.client = await stack.enter_async_context(
            httpx.AsyncClient(transport=httpx.ASGITransport(app=self.app), base_url="http://memory-api", timeout=60)
        )
        return self

    async def recall(self, workspace: str, text: str) -> list[str]:
        principal = Principal(tenant_id="default", scopes=SCOPES, workspace=workspace)
        headers = {HEADER: encode_principal(principal, self.secret)}
        response = await self.client.post(
            "/v1/tools/recall", json={"arguments": {"text": text, **ARGUMENTS}}, headers=headers
        )
        body = response.json() if response.status_code == 200 else {"error": {"code": f"HTTP {response.status_code}"}}
        if "error" in body:  # a tool error is an HTTP 200 too: it must not pass for a fast answer
            raise SystemExit(f"bench: recall on {self.name} failed: {body['error']}")
        return [f["id"] for f in body["result"]["fragments"]]

    async def ids(self, sample_questions: dict[str, list[str]]) -> dict[str, list[list[str]]]:
        return {w: [await self.recall(w, t) for t in texts] for w, texts in sample_questions.items()}

    async def timed_recall(self, workspace: str, text: str) -> float:
        self.app.state.embedder.cache.clear()  # every call embeds, as a question not asked before does
        started = time.perf_counter()
        await self.recall(workspace, text)
        return time.perf_counter() - started


def settings_for(system: System, overrides: dict[str, str]) -> Settings:
    return Settings(
        DATABASE_URL=system.info["database_url"],
        REDIS_URL=system.info["redis_url"],
        EMBEDDER_URL=system.service_url("embedder"),
        MEMENTO_INTERNAL_SECRET=system.secrets["internal_secret"],
        **overrides,
    )


def questions(sample: dict) -> list[str]:
    """The questions bench.locomo asks: those with string evidence."""
    return [qa["question"] for qa in sample["qa"] if any(isinstance(e, str) for e in qa.get("evidence", []))]


async def stored_count(owner_url: str, workspace: str) -> int:
    """The conversation's turns stored in `workspace` (they carry their dia id as source; bulk rows none)."""
    conn = await asyncpg.connect(owner_url)
    try:
        return await conn.fetchval(
            "SELECT count(*) FROM agent_memory.fragments WHERE workspace = $1 AND source IS NOT NULL", workspace
        )
    finally:
        await conn.close()


async def store_all(system: System, data: list[dict], bulk: int = 0) -> dict:
    """Each conversation stored through the gateway (skipped when a kept data dir already holds it), embedded; with
    `bulk`, after that many fragments were bulk-loaded into its workspace."""
    owner, out = system.owner_url(), {}
    for sample in data:
        workspace = "locomo-" + sample["sample_id"]
        items = turns(sample["conversation"])
        loaded = 0
        if bulk:
            started = time.perf_counter()
            loaded = len((await load(owner, system.service_url("embedder"), bulk, workspace))["ids"])
            print(f"bench: {workspace}: {loaded} bulk fragments in {time.perf_counter() - started:.0f}s", flush=True)
        started = time.perf_counter()
        if await stored_count(owner, workspace) < len(items):
            stored = len(await store(system, items, workspace))
        else:
            stored = await stored_count(owner, workspace)
        store_s = time.perf_counter() - started
        waited = await wait_embedded(owner, workspace, loaded + stored)
        out[workspace] = {
            "bulk": loaded,
            "turns": len(items),
            "stored": stored,
            "store_s": round(store_s, 1),
            "embed_wait_s": round(waited, 1),
        }
        print(f"bench: {workspace}: {stored} turns stored in {store_s:.0f}s, embedded {waited:.0f}s later", flush=True)
    return out


async def store_facts(owner_url: str, workspaces: list[str]) -> dict:
    """What the neighbour statement reads: rows with a thread, and how often its index has been scanned so far."""
    conn = await asyncpg.connect(owner_url)
    try:
        row = await conn.fetchrow(
            "SELECT count(*) AS rows, count(*) FILTER (WHERE thread IS NOT NULL) AS threaded,"
            " count(DISTINCT (workspace, thread)) FILTER (WHERE thread IS NOT NULL) AS threads,"
            " count(*) FILTER (WHERE updated_at > created_at) AS updated"
            " FROM agent_memory.fragments WHERE workspace = ANY($1)",
            workspaces,
        )
        scans = await conn.fetchval(
            "SELECT coalesce(sum(idx_scan), 0) FROM pg_stat_user_indexes WHERE indexrelname = 'fragments_thread_idx'"
        )
        return {**dict(row), "thread_index_scans": int(scans)}
    finally:
        await conn.close()


async def gateway_ids(system: System, sample_questions: dict[str, list[str]]) -> dict[str, list[list[str]]]:
    out = {}
    for workspace, texts in sample_questions.items():
        async with Tools(system, workspace) as tools:
            out[workspace] = [[f["id"] for f in (await tools.call("recall", {"text": t, **ARGUMENTS}))["fragments"]]
                              for t in texts]  # fmt: skip
    return out


async def measure(apps: dict[str, App], asked: list[tuple[str, str]], embedder: InternalClient, profile: str,
                  rounds: int) -> tuple[dict[str, list[float]], list[float], list[float]]:  # fmt: skip
    """R rounds over every question: the embedding floor, then A B B A; returns seconds per app, the floor, and the
    paired difference shipped − plain per question and round."""
    times: dict[str, list[float]] = {name: [] for name in APPS}
    floor, paired = [], []
    for r in range(rounds):
        started = time.perf_counter()
        for n, (workspace, text) in enumerate(asked):
            t0 = time.perf_counter()
            answer = await embedder.post_json(
                "/v1/embeddings", {"input": [text], "input_type": "query", "profile": profile}
            )
            floor.append(time.perf_counter() - t0)
            if answer.status != 200:
                raise SystemExit(f"bench: the embedder answered HTTP {answer.status}")
            a, b = APPS if (n + r) % 2 == 0 else APPS[::-1]
            got: dict[str, list[float]] = {name: [] for name in APPS}
            for name in (a, b, b, a):
                got[name].append(await apps[name].timed_recall(workspace, text))
            for name in APPS:
                times[name].extend(got[name])
            paired.append(float(np.mean(got["shipped"]) - np.mean(got["plain"])))
        print(
            f"bench: round {r + 1}/{rounds}: {len(asked)} questions in {time.perf_counter() - started:.0f}s", flush=True
        )
    return times, floor, paired


def flat(answers: dict[str, list[list[str]]]) -> list[list[str]]:
    return [ids for w in sorted(answers) for ids in answers[w]]


def same(a: dict[str, list[list[str]]], b: dict[str, list[list[str]]]) -> int:
    """How many questions got the same ids, in the same order, in both."""
    return sum(x == y for x, y in zip(flat(a), flat(b), strict=True))


def stats(seconds: list[float]) -> dict:
    return percentiles(seconds) | {"mean_ms": round(1000 * float(np.mean(seconds)), 2)}


def median_interval(values: list[float], seed: int = 28) -> tuple[float, float, float]:
    """The median of `values` (ms) and its bootstrap 95 % interval (percentile method, seeded: the same run prints
    the same interval)."""
    x = np.asarray(values) * 1000
    rng = np.random.default_rng(seed)
    medians = np.median(x[rng.integers(0, len(x), size=(BOOTSTRAP, len(x)))], axis=1)
    return float(np.median(x)), float(np.percentile(medians, 2.5)), float(np.percentile(medians, 97.5))


def p95_difference(times: dict[str, list[float]], seed: int = 28) -> tuple[float, float, float]:
    """p95(shipped) − p95(plain) in ms and its bootstrap 95 % interval, resampling questions-and-rounds (each one's
    two calls per app stay together): whether the p95 row itself differs by more than the run's noise."""
    shipped = np.asarray(times["shipped"]).reshape(-1, 2) * 1000
    plain = np.asarray(times["plain"]).reshape(-1, 2) * 1000
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(shipped), size=(BOOTSTRAP, len(shipped)))
    diffs = [np.percentile(shipped[i], 95) - np.percentile(plain[i], 95) for i in picks]
    point = float(np.percentile(shipped, 95) - np.percentile(plain, 95))
    return point, float(np.percentile(diffs, 2.5)), float(np.percentile(diffs, 97.5))


async def restart_plain(args: argparse.Namespace, system: System) -> System:
    """The system again on the same data dir with plain's environment, for the gateway's plain answers."""
    system.stop()
    (Path(args.data_dir) / "run.json").unlink(missing_ok=True)  # the restart writes its own
    saved = dict(os.environ)
    os.environ.update(OFF)
    try:
        plain = System(args)
        plain.start()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return plain


async def main_async(args: argparse.Namespace) -> dict:
    if not args.data_dir:
        args.data_dir = tempfile.mkdtemp(prefix="memento-relevance-latency-")
    data = json.loads(args.data.read_text())[: args.conversations]
    asked = [("locomo-" + s["sample_id"], q) for s in data for q in questions(s)]
    sample_questions = {"locomo-" + s["sample_id"]: questions(s)[: args.sanity] for s in data}
    system = System(args)
    system.start()
    try:
        stored = await store_all(system, data, args.bulk)
        owner = system.owner_url()
        before = await store_facts(owner, list(stored))
        expected, got = {}, {}
        async with AsyncExitStack() as stack:
            apps = {
                "shipped": App("shipped", settings_for(system, {})),
                "plain": App("plain", settings_for(system, OFF)),
            }
            for app in apps.values():
                await app.start(stack)
            first = {name: await app.ids(sample_questions) for name, app in apps.items()}
            embedder = InternalClient(system.service_url("embedder"), timeout_s=30)  # the client memory-api uses
            stack.push_async_callback(embedder.aclose)
            profile = apps["shipped"].app.state.profile.id
            warm = asked[:: max(1, len(asked) // args.warmup)][: args.warmup] if args.warmup else []
            await measure(apps, warm, embedder, profile, 1)  # unmeasured: pools, caches, the model's first calls
            print(f"bench: warmed up with {len(warm)} questions; measuring {len(asked)} x {args.rounds}", flush=True)
            started = time.perf_counter()
            times, floor, paired = await measure(apps, asked, embedder, profile, args.rounds)
            wall = time.perf_counter() - started
            # the gateway and the app asked at the same moment: one question's answer changed between the start and
            # the end of a trial run on a settled store (no row's updated_at moved), so moments are not compared
            expected["shipped"] = await gateway_ids(system, sample_questions)
            got["shipped"] = await apps["shipped"].ids(sample_questions)
        await asyncio.sleep(1.5)  # Postgres publishes a backend's index counters shortly after its transactions
        after = await store_facts(owner, list(stored))
        if not args.no_plain_check:
            system = await restart_plain(args, system)
            expected["plain"] = await gateway_ids(system, sample_questions)
            async with AsyncExitStack() as stack:
                got["plain"] = await (await App("plain", settings_for(system, OFF)).start(stack)).ids(sample_questions)
    finally:
        system.stop()
    sanity = {
        name: {"questions": len(flat(expected[name])), "same_ids_as_gateway": same(expected[name], got[name])}
        for name in expected
    }
    differ = len(flat(first["shipped"])) - same(first["shipped"], first["plain"])
    changed = len(flat(first["shipped"])) - same(first["shipped"], got["shipped"])
    med, low, high = median_interval(paired)
    p95_d, p95_low, p95_high = p95_difference(times)
    results = {
        "command": "python -m bench.relevance_latency " + " ".join(sys.argv[1:]),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end",
        "git": git_state(),
        "conversations": [s["sample_id"] for s in data],
        "store": stored,
        "questions": len(asked),
        "rounds": args.rounds,
        "calls_per_app": len(times["shipped"]),
        "settings": {"shipped": "defaults", "plain": OFF},
        "arguments": {"text": "<question>", **ARGUMENTS},
        "latency": {name: stats(times[name]) for name in APPS} | {"query_embedding": stats(floor)},
        "shipped_minus_plain_ms": {
            "median_of_paired": round(med, 2),
            "bootstrap_95": [round(low, 2), round(high, 2)],
            "mean_of_paired": round(1000 * float(np.mean(paired)), 2),
            "pairs": len(paired),
            "p95_difference": round(p95_d, 2),
            "p95_difference_bootstrap_95": [round(p95_low, 2), round(p95_high, 2)],
            "p95_within_noise": p95_low <= 0 <= p95_high,
        },
        "sanity": {
            **sanity,
            "sample_questions_where_shipped_and_plain_differ": differ,
            "sample_questions_whose_shipped_answer_changed_during_the_run": changed,
            "rows_updated_after_insert": after["updated"],
            "rows": after["rows"],
            "rows_with_thread": after["threaded"],
            "threads": after["threads"],
            "thread_index_scans_while_measuring": after["thread_index_scans"] - before["thread_index_scans"],
        },
        "measure_wall_s": round(wall, 1),
    }
    return results


def table(results: dict) -> str:
    lat, d = results["latency"], results["shipped_minus_plain_ms"]
    p95_low, p95_high = d["p95_difference_bootstrap_95"]
    lines = [
        f"recall {{text}} (includeLinks false), {results['questions']} LoCoMo questions x {results['rounds']} rounds, "
        f"{results['calls_per_app']} calls per app, A B B A per question; memory-api in-process, query-embedding cache "
        "emptied before each call",
        "",
        "| | p50 ms | p95 ms | mean ms |",
        "|---|---|---|---|",
    ]
    for name, label in (("shipped", "shipped (defaults)"), ("plain", "plain fusion (context, lift, time off)"),
                        ("query_embedding", "query embedding alone (floor)")):  # fmt: skip
        s = lat[name]
        lines.append(f"| {label} | {s['p50_ms']} | {s['p95_ms']} | {s['mean_ms']} |")
    lines += [
        "",
        f"shipped − plain, median of {d['pairs']} paired differences: {d['median_of_paired']:+.2f} ms "
        f"(bootstrap 95 % {d['bootstrap_95'][0]:+.2f} … {d['bootstrap_95'][1]:+.2f}); "
        f"mean {d['mean_of_paired']:+.2f} ms.",
        f"p95 shipped − p95 plain: {d['p95_difference']:+.2f} ms (bootstrap 95 % {p95_low:+.2f} … {p95_high:+.2f}): "
        + ("within the run's noise." if d["p95_within_noise"] else "more than the run's noise."),
        f"SPEC target p95 ≤ floor p95 + 20 ms = {lat['query_embedding']['p95_ms'] + 20:.2f} ms: shipped p95 "
        f"{lat['shipped']['p95_ms']} ms.",
    ]
    s = results["sanity"]
    for name in ("shipped", "plain"):
        if name in s:
            lines.append(
                f"sanity {name}: {s[name]['same_ids_as_gateway']}/{s[name]['questions']} same ids as the gateway"
            )
    lines.append(
        f"sanity neighbours: {s['rows_with_thread']}/{s['rows']} rows with a thread ({s['threads']} threads); thread "
        f"index scanned {s['thread_index_scans_while_measuring']} times while measuring; shipped and plain differ on "
        f"{s['sample_questions_where_shipped_and_plain_differ']} of the sample questions"
    )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conversations", type=int, default=2, help="the first N LoCoMo conversations (default 2)")
    parser.add_argument("--rounds", type=int, default=3, help="times every question is asked, A B B A each time")
    parser.add_argument("--warmup", type=int, default=30, help="unmeasured questions first (A B B A each)")
    parser.add_argument("--sanity", type=int, default=3, help="questions per conversation checked against the gateway")
    parser.add_argument("--no-plain-check", action="store_true", help="skip the restart that checks plain's ids")
    parser.add_argument("--bulk", type=int, default=0, help="fragments bulk-loaded beside each conversation first")
    parser.add_argument("--data", type=Path, default=DATA, help="LoCoMo JSON (default ../shared/data/locomo-dev.json)")
    parser.add_argument("--data-dir", help="data dir for the system (default a fresh temporary one; reused if given)")
    parser.add_argument("--port", type=int, default=56447, help="gateway port of the started system")
    args = parser.parse_args()
    args.url, args.key = None, None  # System: always a started one (the apps need the store's URLs and secret)
    results = asyncio.run(main_async(args))
    print("\n" + table(results))
    save(results, "relevance-latency")
    ok = all(v["same_ids_as_gateway"] == v["questions"] for k, v in results["sanity"].items() if k in APPS)
    if not ok or results["sanity"]["rows_with_thread"] == 0:
        raise SystemExit("bench: a sanity check failed (see above): the figures may not measure what they claim")


if __name__ == "__main__":
    main()

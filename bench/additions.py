"""Issue 30's benchmark rows on N bulk-loaded fragments, on the whole system started as bench.run starts it, in one
run, through the gateway with the official MCP client (one client):

- batch_remember of 200 fragments against 200 single `remember` calls of the same kind of fragments (each round a
  new workspace and new texts, so nothing is a duplicate): fragments acknowledged per second, per round;
- recall by one keyword with pages of 50 (`pageSize`): the first page (the search, and the snapshot of its ordered
  answer kept in Redis) and the next pages (`cursor`: the snapshot's ids read back), beside the same recall without
  pages and an MCP ping, for the store's most common keywords.

    python -m bench.additions --n 10000
    python -m bench.additions --n 1000000 --data-dir DIR    # a store bench.run loaded there is reused
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import secrets
import sys
import time

import asyncpg

from bench.dialects import call, gateway_client
from bench.load import load
from bench.report import RESULTS, percentiles, replace_readme_block
from bench.run import WORKSPACE, System, wait_for_l1

BATCH = 200
PAGE = 50
NEXT_PAGES = 3


def fragments(run: str, count: int) -> list[dict]:
    return [
        {"content": f"Run {run}: deploy step {i} for orders-api checks replica lag under {i % 7 + 2} seconds.",
         "topic": "deploy", "type": "procedure", "keywords": ["deploy", f"step-{i}"]}
        for i in range(count)
    ]  # fmt: skip


async def writes(system: System, rounds: int) -> dict:
    singles, batches = [], []
    for r in range(rounds):
        run = secrets.token_hex(3)
        async with gateway_client(system, "fragments", f"bench-batch-{run}") as client:
            await client.send_ping()
            started = time.perf_counter()
            for entry in fragments(run + "s", BATCH):
                await call(client, "remember", entry)
            singles.append(BATCH / (time.perf_counter() - started))
            started = time.perf_counter()
            answer = await call(client, "batch_remember", {"fragments": fragments(run + "b", BATCH)})
            batches.append(BATCH / (time.perf_counter() - started))
            if answer["created"] != BATCH:
                raise SystemExit(f"bench: batch_remember stored {answer['created']} of {BATCH}")
        print(f"  round {r + 1}: remember {singles[-1]:.1f}/s, batch_remember {batches[-1]:.1f}/s", flush=True)
    return {
        "remember_per_s": [round(x, 1) for x in singles],
        "batch_remember_per_s": [round(x, 1) for x in batches],
    }


async def common_keywords(system: System, count: int) -> list[str]:
    owner = await asyncpg.connect(system.owner_url())
    try:
        rows = await owner.fetch(
            "SELECT k, count(*) AS n FROM (SELECT unnest(keywords) AS k FROM agent_memory.fragments"
            " TABLESAMPLE SYSTEM (2) WHERE workspace = $1) s GROUP BY k ORDER BY n DESC LIMIT $2",
            WORKSPACE,
            count,
        )
    finally:
        await owner.close()
    return [r["k"] for r in rows]


async def pages(system: System, keywords: list[str], rounds: int) -> dict:
    times: dict[str, list[float]] = {"ping": [], "recall": [], "first_page": [], "next_page": []}
    sizes = []
    async with gateway_client(system, "fragments") as client:
        for i in range(rounds):
            for keyword in keywords:
                base = {"keywords": [keyword], "includeLinks": False, "tokenBudget": 100_000}
                started = time.perf_counter()
                await client.send_ping()
                ping = time.perf_counter() - started
                started = time.perf_counter()
                await call(client, "recall", base)
                plain = time.perf_counter() - started
                started = time.perf_counter()
                answer = await call(client, "recall", {**base, "pageSize": PAGE})
                first = time.perf_counter() - started
                nexts = []
                for _ in range(NEXT_PAGES):
                    if "nextCursor" not in answer:
                        break
                    started = time.perf_counter()
                    answer = await call(client, "recall", {"cursor": answer["nextCursor"]})
                    nexts.append(time.perf_counter() - started)
                if i > 0:  # the first round warms the session and the caches, unmeasured
                    times["ping"].append(ping)
                    times["recall"].append(plain)
                    times["first_page"].append(first)
                    times["next_page"] += nexts
                    sizes.append(len(nexts))
    return {name: percentiles(values) for name, values in times.items()} | {"next_pages_per_walk": sizes}


async def main_async(args: argparse.Namespace) -> dict:
    args.url = None
    system = System(args)
    system.start()
    try:
        results: dict = {
            "n": args.n,
            "machine": f"{platform.machine()}, {os.cpu_count()} cores",
            "command": "python -m bench.additions " + " ".join(sys.argv[1:]),
        }
        print(f"bench: bulk-loading {args.n} fragments ...", flush=True)
        loaded = await load(system.owner_url(), system.service_url("embedder"), args.n, WORKSPACE)
        results["load"] = {k: v for k, v in loaded.items() if k != "ids"}
        await wait_for_l1(system)
        results["writes"] = await writes(system, args.rounds)
        keywords = await common_keywords(system, args.keywords)
        results["keywords"] = keywords
        results["pages"] = await pages(system, keywords, args.rounds + 1)
        return results
    finally:
        system.stop()


def lines(results: dict) -> list[str]:
    w, p = results["writes"], results["pages"]

    def median(values: list[float]) -> float:
        return sorted(values)[len(values) // 2]

    single, batch = median(w["remember_per_s"]), median(w["batch_remember_per_s"])
    rows = [
        "| operation | fragments acknowledged per second (median of rounds) | rounds |",
        "|---|---|---|",
        f"| 200 × remember (one client, one after another) | {single} | {w['remember_per_s']} |",
        f"| batch_remember of 200 | {batch} ({batch / single:.1f}×) | {w['batch_remember_per_s']} |",
        "",
        f"| recall by one keyword ({len(results['keywords'])} most common), gateway, 1 client | p50 ms | p95 ms |",
        "|---|---|---|",
    ]
    labels = {
        "ping": "MCP ping (the floor)",
        "recall": "recall without pages",
        "first_page": f"first page (pageSize {PAGE}: the search and its snapshot)",
        "next_page": "next page (cursor)",
    }
    rows += [f"| {labels[k]} | {p[k]['p50_ms']} | {p[k]['p95_ms']} |" for k in labels]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10_000, help="fragments in the store")
    parser.add_argument("--data-dir", help="data dir for the started system (default: a fresh temporary one)")
    parser.add_argument("--port", type=int, default=56632, help="gateway port of the started system")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each measurement")
    parser.add_argument("--keywords", type=int, default=10, help="how many common keywords to page through")
    parser.add_argument("--no-readme", action="store_true", help="do not refresh its block in docs/benchmarks.md")
    args = parser.parse_args()
    results = asyncio.run(main_async(args))
    RESULTS.mkdir(parents=True, exist_ok=True)
    results["file"] = f"additions-{args.n}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    (RESULTS / results["file"]).write_text(json.dumps(results, indent=2) + "\n")
    table = lines(results)
    print("\n" + "\n".join(table))
    if not args.no_readme and args.n in (10_000, 1_000_000):
        head = (
            f"Latest: {args.n:,} fragments, {results['machine']}, every service on the same machine. Produced by "
            f"`{results['command'].strip()}` (`bench/results/{results['file']}`)."
        )
        replace_readme_block(f"additions-{args.n}", head + "\n\n" + "\n".join(table))
    print(f"bench: results written to bench/results/{results['file']}")


if __name__ == "__main__":
    main()

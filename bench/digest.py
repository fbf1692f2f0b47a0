"""Reads while the workers digest a burst of writes, beside the same reads once they are idle (issue 46).

On N bulk-loaded fragments, started as bench.run starts the system: a burst of `remember` through the gateway
(8 clients, as fast as they go), then at once recall by text through the gateway (one client, the official MCP
client) while the embedder and evaluator work through the burst, then the same number of recalls once every written
fragment has its vector and its evaluation and the outbox is empty. Each phase asks other questions of the same
generator (a repeated question would find its vector cached). The backlog (fragments without a vector, events not
yet relayed) is read at the start and end of the first phase, so the table shows the reads really ran beside it.

    python -m bench.digest --n 10000 --burst 700 --reads 150
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import time

import asyncpg

from bench.load import load
from bench.report import percentiles, replace_readme_block, save
from bench.run import WORKSPACE, System, Workload, direct, through_gateway, wait_for_l1

TARGET = 1.2  # p95 while digesting at most 20 % over its idle p95


async def backlog(system: System, run: str) -> dict:
    """The burst's fragments not yet embedded or evaluated, and events not yet relayed."""
    conn = await asyncpg.connect(system.owner_url())
    try:
        row = await conn.fetchrow(
            "SELECT count(*) FILTER (WHERE NOT EXISTS (SELECT 1 FROM agent_memory.fragment_embeddings e"
            "  WHERE e.fragment_id = f.id)) AS unembedded,"
            " count(*) FILTER (WHERE f.quality_score IS NULL) AS unevaluated,"
            " (SELECT count(*) FROM agent_memory.outbox WHERE published_at IS NULL) AS unrelayed"
            " FROM agent_memory.fragments f WHERE f.workspace = $1 AND f.content LIKE $2",
            WORKSPACE,
            f"bench note {run}-%",
        )
        return dict(row)
    finally:
        await conn.close()


async def updates(system: System) -> dict:
    """Rows of fragments updated so far, and how many of those in place (heap-only: no index entry written)."""
    conn = await asyncpg.connect(system.owner_url())
    try:
        await conn.execute("SELECT pg_stat_force_next_flush()")
        row = await conn.fetchrow(
            "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relid = 'agent_memory.fragments'::regclass"
        )
        return {"updated": row["n_tup_upd"], "in_place": row["n_tup_hot_upd"]}
    finally:
        await conn.close()


async def until_idle(system: System, run: str, timeout: float = 900) -> float:
    """Seconds until the burst is digested: every fragment embedded and evaluated, the outbox empty."""
    started = time.perf_counter()
    while time.perf_counter() - started < timeout:
        if not any((await backlog(system, run)).values()):
            return time.perf_counter() - started
        await asyncio.sleep(0.5)
    raise SystemExit(f"bench: the burst was not digested within {timeout:.0f} s")


async def main_async(args: argparse.Namespace) -> dict:
    system = System(args)
    system.start()
    try:
        results: dict = {
            "n": args.n,
            "burst": args.burst,
            "reads": args.reads,
            "machine": f"{platform.machine()}, {os.cpu_count()} cores",
            "command": "python -m bench.digest " + " ".join(sys.argv[1:]),
        }
        print(f"bench: bulk-loading {args.n} fragments ...", flush=True)
        loaded = await load(system.owner_url(), system.service_url("embedder"), args.n, WORKSPACE)
        await wait_for_l1(system)
        workload = Workload(loaded["ids"])
        warm = Workload(loaded["ids"], seed=12, query_seed=3, query_tag="w")
        await direct(system, warm, "recall_text", 1, args.warmup)
        before = await updates(system)
        started = time.perf_counter()
        await through_gateway(system, workload, "remember", 8, args.burst)
        results["burst_s"] = round(time.perf_counter() - started, 1)
        results["backlog_before"] = await backlog(system, workload.run)
        digesting = await through_gateway(system, workload, "recall_text", 1, args.reads)
        results["backlog_after"] = await backlog(system, workload.run)
        results["digest_s"] = round(time.perf_counter() - started + await until_idle(system, workload.run), 1)
        after = await updates(system)
        results["row_updates"] = {k: after[k] - before[k] for k in after}
        idle = await through_gateway(system, workload, "recall_text", 1, args.reads)
        results["digesting"] = percentiles(digesting)
        results["idle"] = percentiles(idle)
        results["ratio_p95"] = round(results["digesting"]["p95_ms"] / results["idle"]["p95_ms"], 2)
        results["ratio_p50"] = round(results["digesting"]["p50_ms"] / results["idle"]["p50_ms"], 2)
        return results
    finally:
        system.stop()


def markdown(results: dict) -> str:
    before, after = results["backlog_before"], results["backlog_after"]
    digesting, idle = results["digesting"], results["idle"]
    verdict = "✓" if results["ratio_p95"] <= TARGET else "✗"
    return "\n".join(
        [
            f"Latest: {results['n']:,} fragments, a burst of {results['burst']} `remember` (8 clients, "
            f"{results['burst_s']} s), then {results['reads']} recalls by text through the gateway while the workers "
            f"digest it (backlog at the start: {before['unembedded']} without a vector, {before['unevaluated']} not "
            f"evaluated, {before['unrelayed']} events not relayed; at the end: {after['unembedded']}, "
            f"{after['unevaluated']}, {after['unrelayed']}; all digested {results['digest_s']} s after the burst "
            f"began; {results['row_updates']['updated']} fragment rows updated meanwhile, "
            f"{results['row_updates']['in_place']} of them in place), then as many once idle. {results['machine']}. "
            f"Produced by `{results['command']}` "
            f"(`bench/results/{results['file']}`).",
            "",
            "| recall by text | p50 ms | p95 ms | p99 ms |",
            "|---|---|---|---|",
            f"| while digesting | {digesting['p50_ms']} | {digesting['p95_ms']} | {digesting['p99_ms']} |",
            f"| idle | {idle['p50_ms']} | {idle['p95_ms']} | {idle['p99_ms']} |",
            f"| ratio | {results['ratio_p50']} | {results['ratio_p95']} (target ≤ {TARGET} {verdict}) | |",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10_000, help="fragments to bulk-load")
    parser.add_argument("--burst", type=int, default=700, help="remember calls in the burst")
    parser.add_argument("--reads", type=int, default=150, help="recalls by text in each phase")
    parser.add_argument("--warmup", type=int, default=50, help="unmeasured recalls first (other questions)")
    parser.add_argument("--data-dir", help="data dir for the started system (default: a fresh temporary one)")
    parser.add_argument("--port", type=int, default=56452, help="gateway port of the started system")
    parser.add_argument("--no-readme", action="store_true", help="do not refresh its block in docs/benchmarks.md")
    parser.set_defaults(url=None, key=None)
    args = parser.parse_args()
    results = asyncio.run(main_async(args))
    save(results, f"digest-{args.n}")
    print(json.dumps({k: results[k] for k in ("digesting", "idle", "ratio_p50", "ratio_p95")}, indent=1))
    print(markdown(results))
    if not args.no_readme:
        replace_readme_block(f"digest-{args.n}", markdown(results))


if __name__ == "__main__":
    main()

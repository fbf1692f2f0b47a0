"""The soak (issue 31 item 5): the mixed load at a fixed rate for N minutes against a fresh system; every
component's memory sampled, p95 per minute, errors counted.

    python -m bench.soak --minutes 30 --rate 10

The store is filled first (`--prefill` fragments through the gateway, then the workers left to embed and evaluate
them) and then held at that size while the clock runs: a write that would create one fragment more forgets the
oldest of the load's own instead (bench.mixed_load, `keep`). The services then hold the same amount of data from the
first minute to the last, so growth of any process is the process's own, not the data's.

Pass, chosen before the run and applied to every component, Postgres and Valkey included: no component's memory
grows by more than 5 % between minute 5 and the end of the run (the mean of the samples in minute 5 against the mean
of the samples in the last minute), the p95 of the last 5 minutes within 20 % of the first 5 minutes' (either way),
and zero errors. A component's memory is its private pages (USS) summed over its processes; Postgres's is PSS, since
its backends share the buffers. RSS, also recorded, counts shared pages (libraries, the embedder's model) as each
process first touches them. The data's own size (rows, database size, Valkey's used_memory and keys) is recorded
every minute beside it.

Writes JSON to bench/results/soak-<timestamp>.json and prints a table.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

from bench.cluster import COMPONENTS, Cluster
from bench.mixed_load import LoadState, LoadThread, MixedLoad
from bench.report import percentiles, save

WORKSPACE = "soak"
GROWTH_LIMIT = 0.05
P95_DRIFT_LIMIT = 0.20
BASELINE_MINUTE = 5  # memory is compared from the end of this minute on (warm-up: imports, pools, caches filling)


def judged(component: str) -> str:
    """The memory figure a component is held to: its private pages (USS) summed over its processes, where a leak
    shows; RSS also counts shared pages (libraries, the embedder's model mapped by its processes) as they are first
    touched. Postgres: PSS (its backends share the buffers, and a backend's private pages come and go with the
    pool's connections)."""
    return "pss" if component == "postgres" else "uss"


def memory_growth(samples: list[dict], minutes: int) -> dict:
    """Per component, every measure's mean over minute BASELINE_MINUTE against its mean over the last minute.
    `samples`: {"minute": m, <component>: {"rss", "pss", "uss"}} as the results' `memory_samples`."""
    base_minute = min(BASELINE_MINUTE, max(1, minutes - 1))
    base = [s for s in samples if base_minute - 1 <= s["minute"] < base_minute]
    end = [s for s in samples if s["minute"] >= minutes - 1]
    growth = {}
    for component in COMPONENTS:
        if not base or not end:
            continue
        entry: dict = {"judged_on": judged(component)}
        for measure in ("uss", "pss", "rss"):
            before = sum(s[component][measure] for s in base) / len(base)
            after = sum(s[component][measure] for s in end) / len(end)
            entry[measure] = {
                f"minute_{base_minute}_mb": round(before, 1),
                "last_minute_mb": round(after, 1),
                "growth": round((after - before) / before, 4) if before else None,
            }
        entry["growth"] = entry[judged(component)]["growth"]
        growth[component] = entry
    return growth


def memory_checks(growth: dict) -> dict:
    worst = max((g["growth"] for g in growth.values() if g["growth"] is not None), default=0.0)
    return {"memory_growth_max": worst, "memory_within_5pct": worst <= GROWTH_LIMIT}


async def store_sizes(cluster: Cluster) -> dict:
    import asyncpg
    from redis.asyncio import from_url

    conn = await asyncpg.connect(cluster.owner_url())
    redis = from_url(cluster.redis_url)
    try:
        fragments = await conn.fetchval("SELECT count(*) FROM agent_memory.fragments WHERE workspace = $1", WORKSPACE)
        db_mb = await conn.fetchval("SELECT pg_database_size(current_database()) / 1048576.0")
        info = await redis.info("memory")
        keys = await redis.dbsize()
    finally:
        await conn.close()
        await redis.aclose()
    return {
        "fragments": fragments,
        "database_mb": round(float(db_mb), 1),
        "valkey_used_mb": round(info["used_memory"] / 2**20, 2),
        "valkey_keys": keys,
    }


def summarise(samples: list[dict], calls: list, started: float, minutes: int) -> dict:
    per_minute = []
    for minute in range(minutes):
        lo, hi = started + 60 * minute, started + 60 * (minute + 1)
        these = [c for c in calls if lo <= c.started < hi]
        per_minute.append(
            {
                "minute": minute + 1,
                "calls": len(these),
                "errors": sum(1 for c in these if c.error),
                **percentiles([c.seconds for c in these if not c.error]),
            }
        )
    window = min(5, max(1, minutes // 2))
    first = percentiles([c.seconds for c in calls if not c.error and c.started < started + 60 * window])
    last = percentiles([c.seconds for c in calls if not c.error and c.started >= started + 60 * (minutes - window)])
    drift = (last["p95_ms"] - first["p95_ms"]) / first["p95_ms"] if first and last else None

    relative = [{"minute": (x["t"] - started) / 60, **x["memory"]} for x in samples]
    growth = memory_growth(relative, minutes)
    errors: dict[str, int] = {}
    for call in calls:
        if call.error:
            errors[call.error] = errors.get(call.error, 0) + 1
    checks = {
        **memory_checks(growth),
        "p95_first_window_ms": first.get("p95_ms"),
        "p95_last_window_ms": last.get("p95_ms"),
        "p95_window_minutes": window,
        "p95_drift": None if drift is None else round(drift, 4),
        "p95_within_20pct": drift is not None and abs(drift) <= P95_DRIFT_LIMIT,
        "errors": sum(errors.values()),
        "zero_errors": not errors,
    }
    checks["pass"] = checks["memory_within_5pct"] and checks["p95_within_20pct"] and checks["zero_errors"]
    return {"checks": checks, "per_minute": per_minute, "memory_growth": growth, "errors": errors}


def prefill(cluster: Cluster, n: int, timeout: float = 600.0) -> dict:
    """`n` fragments remembered through the gateways (8 clients, as fast as they are answered), then the workers
    left until every one is embedded and evaluated; the load's state (its acknowledged writes) goes on to the soak."""
    started = time.monotonic()
    load = MixedLoad(cluster.mcp_urls, cluster.access_key, WORKSPACE, rate=200, clients=8, mix=(("remember", 1),))
    thread = LoadThread(load).start()
    try:
        while len(load.state.writes) < n and time.monotonic() - started < timeout:
            time.sleep(0.5)
    finally:
        thread.stop()
    stored = time.monotonic()
    if len(load.state.writes) < n:
        raise RuntimeError(f"prefill: {len(load.state.writes)} of {n} fragments stored in {timeout:.0f} s")
    for write in list(load.state.writes.values())[n:]:  # the clients' last calls may overshoot
        del load.state.writes[write.id]
    settled = asyncio.run(wait_settled(cluster, timeout))
    print(f"soak: prefilled {n} fragments in {stored - started:.0f} s, settled in {settled:.0f} s", flush=True)
    return {
        "fragments": len(load.state.writes),
        "errors": sum(1 for c in load.state.calls if c.error),
        "store_s": round(stored - started, 1),
        "settle_s": round(settled, 1),
        "state": LoadState(writes=load.state.writes),  # the soak's own calls and errors start from none
    }


async def wait_settled(cluster: Cluster, timeout: float) -> float:
    """Seconds until every fragment of the workspace is embedded for its content and evaluated, and the outbox holds
    nothing unpublished."""
    import asyncpg

    started = time.monotonic()
    conn = await asyncpg.connect(cluster.owner_url())
    try:
        while time.monotonic() - started < timeout:
            pending = await conn.fetchval(
                "SELECT (SELECT count(*) FROM agent_memory.fragments f WHERE f.workspace = $1 AND (f.quality_score IS"
                " NULL OR f.verified_at < f.updated_at OR NOT EXISTS (SELECT 1 FROM agent_memory.fragment_embeddings e"
                " WHERE e.fragment_id = f.id AND e.content_hash = f.content_hash)))"
                " + (SELECT count(*) FROM agent_memory.outbox WHERE published_at IS NULL)",
                WORKSPACE,
            )
            if pending == 0:
                return time.monotonic() - started
            await asyncio.sleep(1.0)
    finally:
        await conn.close()
    raise RuntimeError(f"prefill: the workers did not settle within {timeout:.0f} s")


def run(args: argparse.Namespace) -> dict:
    data_dir = Path(args.data_dir or tempfile.mkdtemp(prefix="memento-soak-")) / "data"
    samples: list[dict] = []
    sizes: list[dict] = []
    with Cluster(data_dir) as cluster:
        prefilled = prefill(cluster, args.prefill)
        load = MixedLoad(
            cluster.mcp_urls,
            cluster.access_key,
            WORKSPACE,
            args.rate,
            clients=args.clients,
            keep=args.prefill,
            state=prefilled.pop("state"),
        )
        thread = LoadThread(load).start()
        started = time.monotonic()
        end = started + 60 * args.minutes
        next_size = started
        try:
            while (now := time.monotonic()) < end:
                samples.append({"t": now, "memory": cluster.memory()})
                if now >= next_size:
                    sizes.append({"minute": round((now - started) / 60, 1), **asyncio.run(store_sizes(cluster))})
                    next_size += 60
                    done = len(load.state.calls)
                    failed = sum(1 for c in load.state.calls if c.error)
                    print(f"soak: minute {sizes[-1]['minute']:>4}: {done} calls, {failed} errors", flush=True)
                time.sleep(max(0.0, min(args.sample_seconds, end - time.monotonic())))
        finally:
            thread.stop()
        sizes.append({"minute": round((time.monotonic() - started) / 60, 1), **asyncio.run(store_sizes(cluster))})
    with load.state.lock:
        calls = list(load.state.calls)
    summary = summarise(samples, calls, started, args.minutes)
    return {
        "command": "python -m bench.soak " + " ".join(sys.argv[1:]),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "minutes": args.minutes,
        "rate_per_s": args.rate,
        "clients": args.clients,
        # allocator settings inherited by every process of the system, when set (they change what RSS measures)
        "environment": {k: os.environ[k] for k in ("MALLOC_ARENA_MAX", "MALLOC_TRIM_THRESHOLD_") if k in os.environ},
        "prefill": prefilled,
        "calls": len(calls),
        "achieved_rate_per_s": round(len(calls) / (60 * args.minutes), 2),
        "live_writes_at_end": len(load.state.writes),
        "forgotten": load.state.forgotten,
        **summary,
        "store_sizes": sizes,
        "memory_samples": [{"minute": round((s["t"] - started) / 60, 2), **s["memory"]} for s in samples],
    }


def print_table(results: dict) -> None:
    checks = results["checks"]
    print(
        f"\nsoak: {results['minutes']} min at {results['rate_per_s']}/s ({results['achieved_rate_per_s']}/s achieved),"
        f" {results['calls']} calls, {checks['errors']} errors"
    )
    print(f"{'component':14} {'judged':6} {'from MB':>9} {'to MB':>9} {'growth':>8}   (rss growth)")
    for name, g in results["memory_growth"].items():
        own = g[g["judged_on"]]
        base = next(v for k, v in own.items() if k.startswith("minute_"))
        rss = g["rss"]["growth"]
        print(f"{name:14} {g['judged_on']:6} {base:>9} {own['last_minute_mb']:>9} {g['growth']:>8.2%}   ({rss:.2%})")
    print(
        f"p95 first {checks['p95_window_minutes']} min {checks['p95_first_window_ms']} ms, last"
        f" {checks['p95_window_minutes']} min {checks['p95_last_window_ms']} ms (drift {checks['p95_drift']:.1%})"
    )
    verdict = "PASS" if checks["pass"] else "FAIL"
    print(
        f"{verdict}: memory growth max {checks['memory_growth_max']:.2%} (limit 5 %), p95 drift"
        f" {checks['p95_drift']:.1%} (limit 20 %), errors {checks['errors']} (limit 0)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=int, default=30)
    parser.add_argument("--rate", type=float, default=10.0, help="calls per second, all clients together")
    parser.add_argument("--clients", type=int, default=4, help="virtual MCP clients sharing the rate")
    parser.add_argument("--sample-seconds", type=float, default=10.0, help="memory sampling interval")
    parser.add_argument("--data-dir", help="where the system keeps its data (default: a fresh temporary folder)")
    parser.add_argument("--prefill", type=int, default=3000, help="fragments stored before the clock starts")
    args = parser.parse_args()
    if args.minutes < 2 or args.rate <= 0:
        parser.error("--minutes must be at least 2 and --rate positive")
    results = run(args)
    print_table(results)
    save(results, "soak")


if __name__ == "__main__":
    main()

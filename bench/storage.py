"""Bytes per fragment, measured: `python -m bench.storage --n 10000` (`--data-dir DIR` to measure a kept store).

Starts the system like `make run` in a fresh data dir, bulk-loads N fragments the way `make bench` does (bench.load:
COPY, one 384-dimension vector each, the HNSW index built), lets memory-api rebuild L1 from them, then reads the
sizes PostgreSQL and Valkey report: each table's heap (with its TOAST), its B-tree/GIN indexes, the HNSW index apart,
and the memory of L1's keyword sets. Divided by N they are what bench.capacity sizes a fleet with; written to
bench/results/storage-<n>-<time>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys

import asyncpg
from redis.asyncio import from_url

from bench.load import load
from bench.report import save
from bench.run import System, wait_for_l1
from memento_devtools.embedded import free_port
from memento_shared import keys

WORKSPACE = "bench"
TABLES = ("fragments", "fragment_embeddings", "fragment_links", "fragment_versions", "outbox")
SIZES = """
SELECT c.relname AS name,
       pg_relation_size(c.oid) + COALESCE(pg_total_relation_size(NULLIF(c.reltoastrelid, 0)), 0) AS heap,
       COALESCE((SELECT sum(pg_relation_size(i.indexrelid)) FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid
                 JOIN pg_am am ON am.oid = ic.relam WHERE i.indrelid = c.oid AND am.amname <> 'hnsw'), 0) AS indexes,
       COALESCE((SELECT sum(pg_relation_size(i.indexrelid)) FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid
                 JOIN pg_am am ON am.oid = ic.relam WHERE i.indrelid = c.oid AND am.amname = 'hnsw'), 0) AS hnsw
FROM pg_class c WHERE c.relnamespace = 'agent_memory'::regnamespace AND c.relname = ANY($1::text[])
"""


async def l1_bytes(redis_url: str) -> tuple[int, int]:
    """(keys, bytes) of L1's keyword sets: MEMORY USAGE summed over every set."""
    redis = from_url(redis_url)
    try:
        count = total = 0
        async for key in redis.scan_iter(match=keys.L1_SETS, count=1000):
            count += 1
            total += int(await redis.memory_usage(key, samples=0) or 0)
        return count, total
    finally:
        await redis.aclose()


async def measure(args: argparse.Namespace) -> dict:
    system = System(args)
    system.start()
    try:
        loaded = await load(system.owner_url(), system.service_url("embedder"), args.n, WORKSPACE)
        loaded.pop("ids", None)
        await wait_for_l1(system)
        conn = await asyncpg.connect(system.owner_url())
        try:
            await conn.execute("VACUUM ANALYZE agent_memory.fragments, agent_memory.fragment_embeddings")
            fragments = await conn.fetchval("SELECT count(*) FROM agent_memory.fragments")
            rows = {r["name"]: dict(r) for r in await conn.fetch(SIZES, list(TABLES))}
        finally:
            await conn.close()
        sets, l1_total = await l1_bytes(system.info["redis_url"])
    finally:
        system.stop()
    tables = {name: {k: int(v) for k, v in row.items() if k != "name"} for name, row in sorted(rows.items())}
    per = {
        "rows": sum(t["heap"] for t in tables.values()) / fragments,
        "indexes": sum(t["indexes"] for t in tables.values()) / fragments,
        "hnsw": sum(t["hnsw"] for t in tables.values()) / fragments,
        "l1_redis": l1_total / fragments,
    }
    return {
        "n": args.n,
        "fragments": fragments,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "command": "python -m bench.storage " + " ".join(sys.argv[1:]),
        "embedding_dimension": 384,
        "load": loaded,
        "tables_bytes": tables,
        "l1": {"sets": sets, "bytes": l1_total},
        "bytes_per_fragment": {k: round(v, 1) for k, v in per.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10_000, help="fragments to bulk-load")
    parser.add_argument("--data-dir", default=None, help="a kept data dir (one per size) instead of a fresh one")
    parser.add_argument("--port", type=int, default=free_port())
    args = parser.parse_args()
    args.url, args.key = None, None
    results = asyncio.run(measure(args))
    for name, value in results["bytes_per_fragment"].items():
        print(f"  {name:10} {value:10.1f} bytes per fragment")
    save(results, f"storage-{args.n}")


if __name__ == "__main__":
    main()

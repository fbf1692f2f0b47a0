"""Consolidation time at N fragments (100k by default; `--n 1000000` for 1M) on the whole system started like
`make run`: bulk-load a store as bench.run does, give the lifecycle work to do, then time the consolidator's
on-demand job (the one `memory_consolidate` awaits) twice — the first run does the work, the second is the steady
state of a store consolidated recently — and print each stage next to SPEC.md's target (1M in <= 60 s).

    python -m bench.worker_consolidation --n 100000

The work given: 80% of the fragments used in the last 20 days (the rest idle since creation, up to 90 days
ago, so tiers move and old cold ones expire), 0.5% near-copies of another fragment (dedup), 0.05% `contradicts`
links, 0.1% linked_to entries naming deleted fragments, 0.1% without their vector (backfill).
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
from bench.report import RESULTS, ROOT
from bench.run import System
from memento_shared.consolidation import JOB_NAME, STAGES
from memento_shared.events import queue_key
from memento_shared.settings import QueueSettings
from memento_shared.worker import create_queue_pool

WORKSPACE = "bench"
SPEC_1M_S = 60.0

SHAPE = [
    # used in the last 20 days: 80%, each with the utility_score recall's access bookkeeping wrote at that use (no
    # recency decay yet: stage 8 applies the weeks since)
    "UPDATE agent_memory.fragments f SET accessed_at = u.at, access_count = u.n, utility_score = CASE WHEN"
    " f.is_anchor THEN f.utility_score ELSE agent_memory.utility_score(f.quality_score, f.importance, u.n, now(), 30)"
    " END FROM (SELECT id, now() - random() * interval '20 days' AS at, 1 + (random() * 20)::int AS n"
    " FROM agent_memory.fragments WHERE workspace = $1 AND random() < 0.8) u WHERE f.id = u.id",
    # near-copies: same words, other case and punctuation, so another content hash
    "UPDATE agent_memory.fragments c SET content = upper(o.content) || '!', content_hash = substr(md5(upper(o.content)"
    " || '!'), 1, 16) FROM (SELECT id, content, lead(id) OVER (ORDER BY id) AS next_id FROM agent_memory.fragments"
    " WHERE workspace = $1) o WHERE c.id = o.next_id AND c.workspace = $1 AND hashtext(o.id) % 200 = 0"
    # a store shaped before may hold that near-copy already (under another id, after deletions shift `lead`)
    " AND NOT EXISTS (SELECT 1 FROM agent_memory.fragments x WHERE x.tenant_id = c.tenant_id"
    " AND x.workspace = c.workspace AND x.agent_id = c.agent_id"
    " AND x.content_hash = substr(md5(upper(o.content) || '!'), 1, 16))",
    "INSERT INTO agent_memory.fragment_links (tenant_id, workspace, from_id, to_id, relation_type)"
    " SELECT tenant_id, workspace, id, next_id, 'contradicts' FROM (SELECT tenant_id, workspace, id,"
    " lead(id) OVER (ORDER BY id) AS next_id FROM agent_memory.fragments WHERE workspace = $1) s"
    " WHERE next_id IS NOT NULL AND hashtext(id) % 2000 = 1 ON CONFLICT DO NOTHING",
    "UPDATE agent_memory.fragments SET linked_to = ARRAY['frag-deleted-' || substr(id, 6)]"
    " WHERE workspace = $1 AND hashtext(id) % 1000 = 2",
    "DELETE FROM agent_memory.fragment_embeddings WHERE workspace = $1 AND hashtext(fragment_id) % 1000 = 3",
    "ANALYZE agent_memory.fragments",
]


async def shape(owner_url: str) -> float:
    started = time.perf_counter()
    conn = await asyncpg.connect(owner_url)
    try:
        for sql in SHAPE:
            await conn.execute(sql, WORKSPACE) if "$1" in sql else await conn.execute(sql)
    finally:
        await conn.close()
    return time.perf_counter() - started


async def row_changes(owner_url: str, settle_s: float = 0) -> dict[str, int]:
    """Cumulative row updates (and how many were HOT: no index entry written) and deletes of the fragments table.
    A row update that is not HOT writes an entry into every one of the table's 18 indexes, so the share tells
    whether index upkeep is what a pass pays for (at 1M it was not: 94-97 % HOT). Backends report these figures
    at most every second and idle ones after ten, so `settle_s` waits for the consolidator's connections to report
    first."""
    await asyncio.sleep(settle_s)
    conn = await asyncpg.connect(owner_url)
    try:
        row = await conn.fetchrow(
            "SELECT n_tup_upd AS updated, n_tup_hot_upd AS hot, n_tup_del AS deleted FROM pg_stat_user_tables"
            " WHERE relid = 'agent_memory.fragments'::regclass"
        )
        return dict(row)
    finally:
        await conn.close()


async def main_async(args: argparse.Namespace) -> dict:
    os.environ.setdefault("WORKER_JOB_TIMEOUT_SECONDS", "7200")  # the consolidator's job limit for this run
    system = System(args)
    system.start()
    try:
        print(f"bench: bulk-loading {args.n} fragments ...", flush=True)
        loaded = await load(system.owner_url(), system.service_url("embedder"), args.n, WORKSPACE)
        loaded.pop("ids")
        print(f"bench: loaded in {sum(loaded['seconds'].values()):.0f} s; shaping the store ...", flush=True)
        shaped = await shape(system.owner_url())
        queue = await create_queue_pool(QueueSettings(REDIS_URL=system.info["redis_url"]))
        runs = []
        try:
            for label in ("first", "second"):
                before = await row_changes(system.owner_url())
                started = time.perf_counter()
                job = await queue.enqueue_job(JOB_NAME, "default", WORKSPACE, _queue_name=queue_key("consolidator"))
                result = await job.result(timeout=7200)
                wall = time.perf_counter() - started
                result.pop("contradictions")
                changes = {k: v - before[k] for k, v in (await row_changes(system.owner_url(), settle_s=11)).items()}
                runs.append({"run": label, "wall_s": round(wall, 2), **result, "fragment_rows": changes})
                print(f"bench: {label} run {wall:.1f} s; fragment rows {changes}", flush=True)
        finally:
            await queue.aclose()
        return {
            "command": "python -m bench.worker_consolidation " + " ".join(sys.argv[1:]),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores",
            "n": args.n,
            "load": loaded,
            "shape_s": round(shaped, 1),
            "runs": runs,
        }
    finally:
        system.stop()


def report(r: dict) -> None:
    first, second = r["runs"]
    print(f"\nConsolidation of {r['n']:,} fragments, {r['machine']}, every service on this machine")
    print(f"{'stage':26} {'first: count':>13} {'ms':>8} {'second: count':>14} {'ms':>8}")
    for stage in STAGES:
        print(
            f"{stage:26} {first['stages'][stage]:>13} {first['stage_ms'][stage]:>8}"
            f" {second['stages'][stage]:>14} {second['stage_ms'][stage]:>8}"
        )
    scaled = SPEC_1M_S * r["n"] / 1_000_000
    for run in (first, second):
        rows = run["fragment_rows"]
        print(
            f"{run['run']} run: {run['wall_s']} s wall ({run['duration_ms']} ms in the job);"
            f" SPEC: 1M in <= {SPEC_1M_S:g} s, i.e. {scaled:g} s at this size if linear;"
            f" fragment rows updated {rows['updated']} ({rows['hot']} HOT), deleted {rows['deleted']}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--data-dir")
    parser.add_argument("--port", type=int, default=56462)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--key", help=argparse.SUPPRESS)
    args = parser.parse_args()
    results = asyncio.run(main_async(args))
    report(results)
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"consolidation-{args.n}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(results, indent=2, default=str) + "\n")
    print(f"\nbench: results written to {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()

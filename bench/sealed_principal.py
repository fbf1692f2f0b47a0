"""What the sealed principal (migration 0021) costs: microseconds per transaction under the service role, before
(the principal set with set_config, migrations up to 0020) and after (agent_memory.enter(), every migration).

One embedded PostgreSQL, two databases migrated each way with the same fragments in them. Each transaction opens as
the hot path does (BEGIN and the principal in one simple-protocol round trip), runs Q point reads of a fragment by id
under the tenant's policy, and commits; Q = 0 shows the per-transaction cost (enter() gives the transaction an id and
computes the seal), and the slope between Q = 1 and Q = 10 the per-query cost (the policy's accessors each check the
seal once per query). Before and after alternate in short rounds and the median round counts, so load from anything
else on the machine falls on both alike.

    python -m bench.sealed_principal                 # 2,000 transactions per round, 7 rounds
    python -m bench.sealed_principal --transactions 500 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import secrets
import statistics
import tempfile
import time
from pathlib import Path

import asyncpg

from bench.report import RESULTS
from memento_devtools.embedded import start_postgres
from memento_shared.db.migrate import ensure_service_role, migration_files
from memento_shared.db.rls import literal

SEALED_FROM = 21  # the migration that brings agent_memory.enter()
ROLE = "memento_app"
TENANTS = 3
FRAGMENTS = 10_000
QUERIES = (0, 1, 10)
POINT_READ = "SELECT id, content FROM agent_memory.fragments WHERE id = $1"
FILL = (
    "INSERT INTO agent_memory.fragments (id, tenant_id, workspace, agent_id, content, topic, type, importance,"
    " content_hash, ttl_tier) SELECT 'f' || i, 't' || (i % $1), 'default', 'default', 'content ' || i, 't', 'fact',"
    " 0.5, 'h' || i, 'warm' FROM generate_series(1, $2) i"
)


def begin_before(tenant: str) -> str:
    """How rls.begin_sql opened a transaction until 0021."""
    names = ("memento.tenant_id", "memento.workspace", "memento.agent_id", "memento.access")
    values = (tenant, "default", "default", "agent")
    calls = ", ".join(f"set_config('{n}', {literal(v)}, true)" for n, v in zip(names, values, strict=True))
    return f"BEGIN; SELECT {calls}"


def begin_after(tenant: str) -> str:
    return f"BEGIN; SELECT agent_memory.enter({literal(tenant)}, 'default', 'default', 'agent')"


async def prepare(owner_url: str, password: str, sealed: bool) -> None:
    """Migrate (without 0021 and later for "before"), grant the service role, fill the fragments."""
    conn = await asyncpg.connect(owner_url)
    try:
        await conn.execute("CREATE TABLE public.memento_schema_migrations (version integer PRIMARY KEY, name text)")
        for version, name, sql in migration_files():
            if sealed or version < SEALED_FROM:
                async with conn.transaction():
                    await conn.execute(sql)
                    await conn.execute("INSERT INTO public.memento_schema_migrations VALUES ($1, $2)", version, name)
        await ensure_service_role(conn, ROLE, password)
        await conn.execute(FILL, TENANTS, FRAGMENTS)
        await conn.execute("VACUUM ANALYZE agent_memory.fragments")
    finally:
        await conn.close()


async def one_round(conn: asyncpg.Connection, begin, queries: int, transactions: int) -> float:
    """Microseconds per transaction over `transactions` transactions, each acting for one of the tenants in turn."""
    started = time.perf_counter()
    for n in range(transactions):
        tenant_no = n % TENANTS
        await conn.execute(begin(f"t{tenant_no}"))
        for q in range(queries):
            # a fragment of this tenant (f<i> with i % TENANTS == tenant_no), so the policy lets it through
            i = (1 + (n * 7 + q * 13) % (FRAGMENTS // TENANTS - 1)) * TENANTS + tenant_no
            row = await conn.fetchrow(POINT_READ, f"f{i}")
            if row is None:
                raise SystemExit(f"sealed_principal: fragment f{i} not visible to t{tenant_no}: the setup is wrong")
        await conn.execute("COMMIT")
    return (time.perf_counter() - started) / transactions * 1e6


async def measure(urls: dict[str, str], transactions: int, rounds: int) -> dict:
    conns = {name: await asyncpg.connect(url) for name, url in urls.items()}
    begins = {"before": begin_before, "after": begin_after}
    try:
        for name, conn in conns.items():  # warm up: plans cached, functions compiled, pages in memory
            await one_round(conn, begins[name], 10, 200)
        samples: dict[int, dict[str, list[float]]] = {q: {"before": [], "after": []} for q in QUERIES}
        for _ in range(rounds):
            for q in QUERIES:
                for name in ("before", "after"):
                    samples[q][name].append(await one_round(conns[name], begins[name], q, transactions))
    finally:
        for conn in conns.values():
            await conn.close()
    result = {}
    for q in QUERIES:
        before, after = (statistics.median(samples[q][k]) for k in ("before", "after"))
        result[q] = {"before_us": round(before, 1), "after_us": round(after, 1), "added_us": round(after - before, 1)}
    return result


def per_query(result: dict) -> dict:
    slope = {k: (result[10][k] - result[1][k]) / 9 for k in ("before_us", "after_us")}
    return {k: round(v, 1) for k, v in slope.items()} | {"added_us": round(slope["after_us"] - slope["before_us"], 1)}


async def run(transactions: int, rounds: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="memento-sealed-") as root:
        pg = start_postgres(Path(root) / "pg", owner_password=secrets.token_urlsafe(16))
        try:
            password = secrets.token_urlsafe(16)
            urls = {}
            for name, sealed in (("before", False), ("after", True)):
                pg.create_database(f"sealed_{name}")
                await prepare(pg.url(database=f"sealed_{name}"), password, sealed)
                urls[name] = pg.url(ROLE, password, f"sealed_{name}")
            return await measure(urls, transactions, rounds)
        finally:
            pg.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--transactions", type=int, default=2000, help="transactions per round and setting")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--save", action="store_true", help="also write the figures to bench/results/")
    args = parser.parse_args()
    result = asyncio.run(run(args.transactions, args.rounds))
    print(f"sealed principal: us per transaction (median of {args.rounds} rounds of {args.transactions})")
    slope = per_query(result)
    lines = [(str(q), row) for q, row in result.items()] + [("per query (slope 1 -> 10)", slope)]
    print(f"{'point reads per transaction':<28} {'before':>9} {'after':>9} {'added':>9}")
    for label, row in lines:
        print(f"{label:<28} {row['before_us']:>9.1f} {row['after_us']:>9.1f} {row['added_us']:>+9.1f}")
    if args.save:
        out = RESULTS / f"sealed-principal-{time.strftime('%Y%m%d-%H%M%S')}.json"
        report = {"transactions": args.transactions, "rounds": args.rounds, "per_transaction": result}
        out.write_text(json.dumps(report | {"per_query": slope}, indent=2) + "\n")
        print(f"written to {out}")


if __name__ == "__main__":
    main()

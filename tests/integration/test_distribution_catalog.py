"""The schema stays distributable by tenant (docs/scaling.md, Citus), checked from the catalog for every table there is,
so a future migration that breaks the rule fails here:

- every table is either a tenant table (it has `tenant_id`) or named below as a reference or local table, with why;
- a tenant table's primary key and every unique constraint or unique index include `tenant_id` (a distributed
  database checks each inside one shard);
- every foreign key between tenant tables carries `tenant_id` on both sides, matched to each other (a row can only
  point at a row of its own tenant, which also colocates them); a tenant table may point at a reference table, and
  a reference table at no tenant table.

What this proves: the constraints a distributed PostgreSQL needs are in place, and every edge between tenant tables
stays inside one tenant. What it does not: that the statements the services send name the tenant explicitly
(test_distribution_plans.py looks at those), or anything about Citus itself, which is not run here.
"""

from __future__ import annotations

# system-wide tables: replicated whole to every node (Citus reference tables), or kept on the coordinator alone
REFERENCE_TABLES = {
    "agent_memory.embedding_profiles": "the embedding profiles, one list for every tenant; read by every search",
    "memento_seal.hmac_key": "the key that seals the row-level-security principal; every node's policies read it",
}
LOCAL_TABLES = {
    "public.memento_schema_migrations": "memento-migrate's bookkeeping: which migrations ran (the coordinator's)",
}

TABLES = """
SELECT c.oid, n.nspname || '.' || c.relname AS name,
       EXISTS (SELECT 1 FROM pg_attribute a
               WHERE a.attrelid = c.oid AND a.attname = 'tenant_id' AND a.attnum > 0 AND NOT a.attisdropped) AS tenant
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition
  AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%'
"""

# each unique index (those behind primary keys and unique constraints included) with the column names it covers
UNIQUE_INDEXES = """
SELECT i.indrelid AS table_oid, c.relname AS index_name, pg_get_indexdef(i.indexrelid) AS definition,
       ARRAY(SELECT a.attname FROM unnest(i.indkey) k JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k)
           AS columns
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
WHERE i.indisunique
"""

FOREIGN_KEYS = """
SELECT con.conname, con.conrelid AS table_oid, con.confrelid AS target_oid,
       ARRAY(SELECT a.attname FROM unnest(con.conkey) WITH ORDINALITY k(n, o)
             JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.n ORDER BY k.o) AS columns,
       ARRAY(SELECT a.attname FROM unnest(con.confkey) WITH ORDINALITY k(n, o)
             JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.n ORDER BY k.o) AS target_columns
FROM pg_constraint con WHERE con.contype = 'f'
"""


async def catalog(owner_pool) -> tuple[dict[int, tuple[str, bool]], list, list]:
    tables = {r["oid"]: (r["name"], r["tenant"]) for r in await owner_pool.fetch(TABLES)}
    return tables, await owner_pool.fetch(UNIQUE_INDEXES), await owner_pool.fetch(FOREIGN_KEYS)


async def test_every_table_is_a_tenant_table_or_named_as_reference_or_local(owner_pool):
    tables, _, _ = await catalog(owner_pool)
    tenant = {name for name, has in tables.values() if has}
    system = {name for name, has in tables.values() if not has}
    assert system == set(REFERENCE_TABLES) | set(LOCAL_TABLES), "a table without tenant_id that is not named here"
    assert "agent_memory.fragments" in tenant and len(tenant) >= 27


async def test_tenant_tables_keys_and_unique_indexes_include_the_tenant(owner_pool):
    tables, uniques, _ = await catalog(owner_pool)
    broken = [
        row["definition"]
        for row in uniques
        if row["table_oid"] in tables and tables[row["table_oid"]][1] and "tenant_id" not in row["columns"]
    ]
    assert broken == [], "a primary key, unique constraint or unique index of a tenant table without tenant_id"


async def test_foreign_keys_between_tenant_tables_carry_the_tenant_on_both_sides(owner_pool):
    tables, _, foreign = await catalog(owner_pool)
    checked = 0
    for fk in foreign:
        if fk["table_oid"] not in tables:
            continue
        (source, source_tenant), (target, target_tenant) = tables[fk["table_oid"]], tables[fk["target_oid"]]
        if not source_tenant:
            assert not target_tenant, f"{fk['conname']}: the system table {source} points at tenant rows"
            continue
        if not target_tenant:
            assert target in REFERENCE_TABLES, f"{fk['conname']}: {source} points at {target}, not a reference table"
            continue
        pairs = dict(zip(fk["columns"], fk["target_columns"], strict=True))
        assert pairs.get("tenant_id") == "tenant_id", f"{fk['conname']} ({source} -> {target}) does not carry tenant_id"
        checked += 1
    assert checked >= 7, "the foreign keys between tenant tables were found"


async def test_the_check_catches_a_table_that_breaks_the_rule(owner_pool):
    """The checks above would see a new table keyed by id alone: made in a transaction that is rolled back."""
    async with owner_pool.acquire() as conn:
        tr = conn.transaction()
        await tr.start()
        try:
            await conn.execute("CREATE TABLE agent_memory.broken (id text PRIMARY KEY, tenant_id text NOT NULL)")
            await conn.execute(
                "CREATE TABLE agent_memory.broken_child (id text, tenant_id text,"
                " parent text REFERENCES agent_memory.broken (id), PRIMARY KEY (id, tenant_id))"
            )
            tables = {r["oid"]: (r["name"], r["tenant"]) for r in await conn.fetch(TABLES)}
            keyed = [
                r
                for r in await conn.fetch(UNIQUE_INDEXES)
                if tables.get(r["table_oid"], ("", 0))[0] == "agent_memory.broken"
            ]
            fks = [
                r
                for r in await conn.fetch(FOREIGN_KEYS)
                if tables.get(r["table_oid"], ("", 0))[0] == "agent_memory.broken_child"
            ]
            assert [r["columns"] for r in keyed] == [["id"]]
            assert [dict(zip(r["columns"], r["target_columns"], strict=True)) for r in fks] == [{"parent": "id"}]
        finally:
            await tr.rollback()

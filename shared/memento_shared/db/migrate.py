"""Apply the numbered SQL migrations, then make sure the service role exists and owns nothing.

`memento-migrate` (and the Kubernetes Job) connects as the schema owner (MIGRATION_DATABASE_URL). The services
log in as the role named in DATABASE_URL; this command creates it with that password and grants it data access
only, so PostgreSQL's row-level security applies to every query the services make.
"""

from __future__ import annotations

import asyncio
import re
import sys
from importlib import resources
from urllib.parse import unquote, urlsplit

import asyncpg

from memento_shared.settings import DatabaseSettings, redact_dsn

MIGRATION_LOCK = 0x4D454D454E544F  # advisory lock id ("MEMENTO"): concurrent migrate runs queue up
_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")
_ROLE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
# A migration that rewrites a table says so on a line of its own: "-- memento:vacuum agent_memory.fragments"
_VACUUM = re.compile(r"^-- memento:vacuum ([a-z_][a-z0-9_]*\.[a-z_][a-z0-9_]*)$", re.MULTILINE)


def migration_files() -> list[tuple[int, str, str]]:
    """(version, name, sql) in order."""
    folder = resources.files("memento_shared.db.migrations")
    found = []
    for entry in folder.iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append((int(match.group(1)), entry.name, entry.read_text(encoding="utf-8")))
    return sorted(found)


async def apply_migrations(conn: asyncpg.Connection) -> list[str]:
    await conn.execute("SELECT pg_advisory_lock($1)", MIGRATION_LOCK)
    try:
        await conn.execute(
            """CREATE TABLE IF NOT EXISTS public.memento_schema_migrations (
                   version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"""
        )
        done = {r["version"] for r in await conn.fetch("SELECT version FROM public.memento_schema_migrations")}
        applied = []
        for version, name, sql in migration_files():
            if version in done:
                continue
            async with conn.transaction():
                await conn.execute(sql)
                await conn.execute(
                    "INSERT INTO public.memento_schema_migrations (version, name) VALUES ($1, $2)", version, name
                )
            applied.append(name)
            for table in _VACUUM.findall(sql):
                # A rewritten table starts with an empty visibility map: every index-only scan reads the heap too
                # until a vacuum, and autovacuum waits for dead rows a rewrite leaves none of (the 1M bench store
                # after 0008: relallvisible 0 of 101,900 pages). Right after the commit, outside the migration's
                # transaction (VACUUM cannot run in one), so a later migration failing does not skip it.
                await conn.execute(f"VACUUM (ANALYZE) {table}")
        return applied
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", MIGRATION_LOCK)


async def ensure_service_role(conn: asyncpg.Connection, role: str, password: str | None) -> None:
    """Create or update the login role the services use and grant it data access, never ownership."""
    if not _ROLE.match(role):
        raise ValueError(f"service role name {role!r} is not a plain lower-case identifier")
    owner = await conn.fetchval("SELECT current_user")
    if role == owner:
        raise ValueError(
            f"DATABASE_URL logs in as {role!r}, the schema owner: row-level security would not apply. "
            "Give the services their own role (MIGRATION_DATABASE_URL is the owner's)."
        )
    exists = await conn.fetchval("SELECT 1 FROM pg_roles WHERE rolname = $1", role)
    verb = "ALTER" if exists else "CREATE"
    pw = " PASSWORD " + _literal(password) if password else ""
    await conn.execute(f'{verb} ROLE "{role}" LOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE{pw}')
    db = await conn.fetchval("SELECT current_database()")
    await conn.execute(f'GRANT CONNECT ON DATABASE "{db}" TO "{role}"')
    await conn.execute(f'GRANT USAGE ON SCHEMA agent_memory TO "{role}"')
    await conn.execute(f'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA agent_memory TO "{role}"')
    await conn.execute(f'GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA agent_memory TO "{role}"')
    await conn.execute(f'GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA agent_memory TO "{role}"')
    await conn.execute(f'GRANT SELECT ON public.memento_schema_migrations TO "{role}"')


# Row-level security only lets an index evaluate a query's condition ahead of the policy when the operator's
# function is LEAKPROOF (it can reveal nothing about rows through errors or side effects). None of the operators
# that recall's GIN indexes serve are marked so, which turns keyword (L2), full-text and trigram search into
# sequential scans under RLS. These functions raise no data-dependent errors, so we vouch for them.
LEAKPROOF_FUNCTIONS = (
    "pg_catalog.arrayoverlap(anyarray, anyarray)",  # keywords && ARRAY[...]      (L2, GIN)
    "pg_catalog.ts_match_vq(tsvector, tsquery)",  # tsv @@ query                (full text, GIN)
    "public.word_similarity_op(text, text)",  # query <% content            (pg_trgm, GIN)
    "public.similarity_op(text, text)",  # query % content              (pg_trgm, GIN)
)


async def ensure_leakproof_operators(conn: asyncpg.Connection) -> bool:
    """Mark the index operators LEAKPROOF (needs a superuser). Re-applied on every run: a flag on a built-in does
    not survive pg_upgrade or a restore. Returns False (and recall still works, with scans) without the right."""
    if not await conn.fetchval("SELECT rolsuper FROM pg_roles WHERE rolname = current_user"):
        return False
    for function in LEAKPROOF_FUNCTIONS:
        await conn.execute(f"ALTER FUNCTION {function} LEAKPROOF")
    return True


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


async def migrate(settings: DatabaseSettings) -> list[str]:
    conn = await asyncpg.connect(settings.migration_database_url)
    try:
        applied = await apply_migrations(conn)
        if not await ensure_leakproof_operators(conn):
            print(
                "memento-migrate: warning: not a superuser, so keyword and full-text search cannot use their indexes"
                " under row-level security (see docs/operations.md)",
                file=sys.stderr,
            )
        service = urlsplit(settings.database_url)
        if settings.migration_database_url != settings.database_url and service.username:
            await ensure_service_role(conn, unquote(service.username), unquote(service.password or "") or None)
        return applied
    finally:
        await conn.close()


def main() -> None:
    settings = DatabaseSettings()
    try:
        applied = asyncio.run(migrate(settings))
    except (OSError, asyncpg.PostgresError, ValueError) as exc:
        print(
            f"memento-migrate: {type(exc).__name__}: {exc} ({redact_dsn(settings.migration_database_url)})",
            file=sys.stderr,
        )
        raise SystemExit(1) from None
    print(f"memento-migrate: applied {len(applied)} migration(s): {', '.join(applied) or 'none pending'}")


if __name__ == "__main__":
    main()

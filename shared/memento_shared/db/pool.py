"""asyncpg pool with the pgvector and jsonb codecs, named per service in pg_stat_activity."""

from __future__ import annotations

import json

import asyncpg
from pgvector.asyncpg import register_vector

from memento_shared.settings import DatabaseSettings


async def _init_connection(conn: asyncpg.Connection) -> None:
    await register_vector(conn)
    await conn.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")


async def _keep_session(conn: asyncpg.Connection) -> None:
    """Release without asyncpg's reset query (RESET ALL, UNLISTEN *, ...): one round trip saved per call."""


async def create_pool(
    settings: DatabaseSettings,
    service: str,
    *,
    min_size: int = 1,
    max_size: int | None = None,
    transaction_state_only: bool = False,
) -> asyncpg.Pool:
    """A pool of service-role connections. `transaction_state_only` is for code that keeps no session state
    (every setting SET LOCAL or set_config(..., true), no LISTEN, no session advisory locks): its connections
    skip the reset query on release. asyncpg still rolls back a transaction left open."""
    return await asyncpg.create_pool(
        settings.database_url,
        min_size=min_size,
        max_size=max_size or settings.db_max_connections,
        max_inactive_connection_lifetime=settings.db_idle_timeout_ms / 1000,
        timeout=settings.db_conn_timeout_ms / 1000,
        command_timeout=settings.db_query_timeout_ms / 1000,
        init=_init_connection,
        reset=_keep_session if transaction_state_only else None,
        server_settings={
            "application_name": f"memento.{service}",
            "search_path": "agent_memory,public",
            # A capped scan ("the first N matches") must meet the same rows on every call: with synchronised
            # sequential scans, a large table's scan starts where the last one was, and recall by text at a million
            # fragments returned a different candidate set (so different answers) for the same question each time.
            "synchronize_seqscans": "off",
        },
    )


async def assert_not_privileged(pool: asyncpg.Pool) -> None:
    """Refuse to run as a role that bypasses row-level security: isolation would silently vanish."""
    row = await pool.fetchrow("SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user")
    if row and (row["rolsuper"] or row["rolbypassrls"]):
        raise RuntimeError("DATABASE_URL logs in as a superuser or BYPASSRLS role; use the service role")

"""SQL for per-tenant API keys. Keys are `mk_<id>_<secret>`; only sha256(key) is stored, looked up by id."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import datetime

import asyncpg

PREFIX = "mk_"
ACTIVE = "revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())"
BINDING = ("id", "tenant_id", "workspaces", "agents", "scopes", "profiles")  # what the gateway needs
COLUMNS = "id, tenant_id, name, workspaces, agents, scopes, profiles, created_at, expires_at, revoked_at, last_used_at"


@dataclass(frozen=True)
class NewKey:
    id: str
    key: str  # shown once; never stored


def mint() -> NewKey:
    key_id = secrets.token_hex(8)
    return NewKey(key_id, f"{PREFIX}{key_id}_{secrets.token_urlsafe(32)}")


def digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


def key_id_of(key: str) -> str | None:
    if not key.startswith(PREFIX):
        return None
    key_id, sep, _ = key[len(PREFIX) :].partition("_")
    return key_id if sep and key_id.isalnum() and len(key_id) <= 32 else None


async def insert(
    conn: asyncpg.Connection,
    *,
    tenant_id: str,
    name: str,
    workspaces: list[str],
    agents: list[str],
    scopes: list[str],
    profiles: list[str],
    expires_at: datetime | None,
) -> NewKey:
    new = mint()
    await conn.execute(
        """INSERT INTO agent_memory.api_keys (id, tenant_id, name, key_hash, workspaces, agents, scopes, profiles,
                                              expires_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)""",
        new.id, tenant_id, name, digest(new.key), workspaces, agents, scopes, profiles, expires_at,
    )  # fmt: skip
    return new


async def verify(conn: asyncpg.Connection, key: str) -> asyncpg.Record | None:
    """The active key's row if `key` is exactly it; the comparison takes the same time either way."""
    key_id = key_id_of(key)
    if key_id is None:
        return None
    query = f"SELECT {COLUMNS}, key_hash FROM agent_memory.api_keys WHERE id = $1 AND {ACTIVE}"
    row = await conn.fetchrow(query, key_id)
    if row is None or not hmac.compare_digest(bytes(row["key_hash"]), digest(key)):
        return None
    await conn.execute("UPDATE agent_memory.api_keys SET last_used_at = now() WHERE id = $1", key_id)
    return row


async def get_active(conn: asyncpg.Connection, key_id: str) -> asyncpg.Record | None:
    return await conn.fetchrow(f"SELECT {COLUMNS} FROM agent_memory.api_keys WHERE id = $1 AND {ACTIVE}", key_id)


async def list_keys(conn: asyncpg.Connection, tenant_id: str | None, include_revoked: bool) -> list[asyncpg.Record]:
    return await conn.fetch(
        f"""SELECT {COLUMNS} FROM agent_memory.api_keys
            WHERE ($1::text IS NULL OR tenant_id = $1) AND ($2 OR revoked_at IS NULL)
            ORDER BY tenant_id, created_at""",
        tenant_id,
        include_revoked,
    )


async def revoke(conn: asyncpg.Connection, key_id: str) -> bool:
    done = await conn.execute(
        "UPDATE agent_memory.api_keys SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL", key_id
    )
    return done.endswith(" 1")

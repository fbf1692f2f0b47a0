"""SQL for seed 003's workspace tables: working-memory sections and items, the skip list, identity snapshots. Every
query runs under the caller's RLS principal; like the fragments module, searches also name the tenant and workspace so
the planner can use the scope indexes."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg

from memento_memory_api.uow import Scope

SECTION_HEADINGS = {
    "active_work": "Active Work",
    "standing_decisions": "Standing Decisions",
    "skip_list": "Skip List",
    "activity_log": "Activity Log",
    "session_notes": "Session Notes",
}
ITEM_COLUMNS = "id, category, title, content, status, priority, tags, next_action, created_at, updated_at"


async def ensure_sections(conn: asyncpg.Connection, scope: Scope) -> int:
    """Create the five sections a workspace starts with, where missing; returns how many were created."""
    created = await conn.fetch(
        "INSERT INTO agent_memory.wm_sections (tenant_id, workspace, section_key, heading)"
        " SELECT $1, $2, k, h FROM unnest($3::text[], $4::text[]) AS s(k, h)"
        " ON CONFLICT (tenant_id, workspace, section_key) DO NOTHING RETURNING section_key",
        scope.tenant_id,
        scope.workspace,
        list(SECTION_HEADINGS),
        list(SECTION_HEADINGS.values()),
    )
    return len(created)


async def sections(conn: asyncpg.Connection, scope: Scope, key: str | None = None) -> list[asyncpg.Record]:
    rows = await conn.fetch(
        "SELECT section_key, heading, content, updated_at FROM agent_memory.wm_sections"
        " WHERE tenant_id = $1 AND workspace = $2 AND ($3::text IS NULL OR section_key = $3)",
        scope.tenant_id,
        scope.workspace,
        key,
    )
    order = list(SECTION_HEADINGS)
    return sorted(rows, key=lambda r: order.index(r["section_key"]) if r["section_key"] in order else len(order))


async def replace_section(conn: asyncpg.Connection, scope: Scope, key: str, content: str) -> None:
    await conn.execute(
        "UPDATE agent_memory.wm_sections SET content = $4, updated_at = now()"
        " WHERE tenant_id = $1 AND workspace = $2 AND section_key = $3",
        scope.tenant_id,
        scope.workspace,
        key,
        content,
    )


async def insert_item(conn: asyncpg.Connection, scope: Scope, item: dict[str, Any]) -> asyncpg.Record:
    return await conn.fetchrow(
        "INSERT INTO agent_memory.wm_items (id, tenant_id, workspace, category, title, content, status, priority, tags,"
        f" next_action) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING {ITEM_COLUMNS}",
        item["id"],
        scope.tenant_id,
        scope.workspace,
        item["category"],
        item["title"],
        item["content"],
        item["status"],
        item["priority"],
        item["tags"],
        item["next_action"],
    )


ITEM_FIELDS = ("title", "content", "category", "status", "priority", "tags", "next_action")


async def update_item(conn: asyncpg.Connection, item_id: str, changes: dict[str, Any]) -> asyncpg.Record | None:
    """Set only the fields in `changes` (names from ITEM_FIELDS); None when the item is not visible."""
    if set(changes) - set(ITEM_FIELDS):
        raise ValueError(f"bad item fields: {sorted(set(changes) - set(ITEM_FIELDS))}")
    columns = list(changes)
    assignments = "".join(f", {c} = ${i + 2}" for i, c in enumerate(columns))
    return await conn.fetchrow(
        f"UPDATE agent_memory.wm_items SET updated_at = now(){assignments} WHERE id = $1 RETURNING {ITEM_COLUMNS}",
        item_id,
        *[changes[c] for c in columns],
    )


async def delete_item(conn: asyncpg.Connection, item_id: str) -> bool:
    return await conn.fetchval("DELETE FROM agent_memory.wm_items WHERE id = $1 RETURNING true", item_id) is not None


async def items(
    conn: asyncpg.Connection,
    scope: Scope,
    category: str | None,
    statuses: list[str],
    query: str | None,
    limit: int = 100,
) -> list[asyncpg.Record]:
    """Items of these statuses (and category, and holding `query` in title or content), by priority then newest."""
    return await conn.fetch(
        f"SELECT {ITEM_COLUMNS} FROM agent_memory.wm_items WHERE tenant_id = $1 AND workspace = $2"
        " AND status = ANY($3::text[]) AND ($4::text IS NULL OR category = $4)"
        " AND ($5::text IS NULL OR strpos(lower(title || ' ' || content), lower($5)) > 0)"
        " ORDER BY priority DESC, created_at DESC LIMIT $6",
        scope.tenant_id,
        scope.workspace,
        statuses,
        category,
        query,
        limit,
    )


async def item_titles(conn: asyncpg.Connection, ids: list[str]) -> dict[str, str]:
    rows = await conn.fetch("SELECT id, title FROM agent_memory.wm_items WHERE id = ANY($1::text[])", ids)
    return {r["id"]: r["title"] for r in rows}


SKIP_COLUMNS = "id, item, reason, expires_at, created_at, profile_id, embedding"


async def purge_expired_skips(conn: asyncpg.Connection, scope: Scope) -> int:
    """Expired skip entries are deleted before every skip answer (seed 003): they never match again."""
    status = await conn.execute(
        "DELETE FROM agent_memory.skip_entries WHERE tenant_id = $1 AND workspace = $2 AND expires_at <= now()",
        scope.tenant_id,
        scope.workspace,
    )
    return int(status.split()[-1])


async def add_skip(
    conn: asyncpg.Connection,
    scope: Scope,
    entry_id: str,
    item: str,
    reason: str,
    expires_at: datetime,
    profile_id: str | None = None,
    vector: Any = None,
) -> asyncpg.Record:
    return await conn.fetchrow(
        "INSERT INTO agent_memory.skip_entries (id, tenant_id, workspace, item, reason, expires_at, profile_id,"
        f" embedding) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING {SKIP_COLUMNS}",
        entry_id,
        scope.tenant_id,
        scope.workspace,
        item,
        reason,
        expires_at,
        profile_id if vector is not None else None,
        vector,
    )


async def set_skip_vectors(conn: asyncpg.Connection, profile_id: str, vectors: dict[str, Any]) -> None:
    """Keep skip entries' vectors (entry id -> vector in `profile_id`), in one pipelined statement."""
    await conn.executemany(
        "UPDATE agent_memory.skip_entries SET profile_id = $2, embedding = $3 WHERE id = $1",
        [(entry_id, profile_id, vector) for entry_id, vector in vectors.items()],
    )


async def skips(conn: asyncpg.Connection, scope: Scope) -> list[asyncpg.Record]:
    """The workspace's current skip entries, newest first."""
    return await conn.fetch(
        f"SELECT {SKIP_COLUMNS} FROM agent_memory.skip_entries WHERE tenant_id = $1 AND workspace = $2"
        " AND expires_at > now() ORDER BY created_at DESC, id",
        scope.tenant_id,
        scope.workspace,
    )


async def remove_skip(conn: asyncpg.Connection, entry_id: str) -> bool:
    found = await conn.fetchval("DELETE FROM agent_memory.skip_entries WHERE id = $1 RETURNING true", entry_id)
    return found is not None


async def add_identity(conn: asyncpg.Connection, scope: Scope, snapshot_id: str, crystal: str, sources: int) -> Any:
    return await conn.fetchrow(
        "INSERT INTO agent_memory.identity_snapshots (id, tenant_id, workspace, crystal, source_count)"
        " VALUES ($1, $2, $3, $4, $5) RETURNING id, crystal, created_at",
        snapshot_id,
        scope.tenant_id,
        scope.workspace,
        crystal,
        sources,
    )


async def latest_identity(conn: asyncpg.Connection, scope: Scope) -> asyncpg.Record | None:
    return await conn.fetchrow(
        "SELECT id, crystal, created_at FROM agent_memory.identity_snapshots WHERE tenant_id = $1 AND workspace = $2"
        " ORDER BY created_at DESC, id DESC LIMIT 1",
        scope.tenant_id,
        scope.workspace,
    )


async def health(conn: asyncpg.Connection, scope: Scope, agents: list[str] | None) -> dict[str, Any]:
    """memento_health's counts, in one statement."""
    row = await conn.fetchrow(
        "SELECT"
        " (SELECT count(*) FROM agent_memory.wm_sections WHERE tenant_id = $1 AND workspace = $2) AS sections,"
        " (SELECT max(updated_at) FROM agent_memory.wm_sections WHERE tenant_id = $1 AND workspace = $2)"
        "   AS sections_updated_at,"
        " (SELECT jsonb_build_object('total', count(*),"
        "   'expired', count(*) FILTER (WHERE expires_at <= now()),"
        "   'consolidated', count(*) FILTER (WHERE superseded_by IS NOT NULL"
        "     AND (expires_at IS NULL OR expires_at > now())),"
        "   'accesses', coalesce(sum(access_count), 0), 'last_stored_at', max(created_at))"
        "   FROM agent_memory.fragments WHERE tenant_id = $1 AND workspace = $2"
        "   AND ($3::text[] IS NULL OR agent_id = ANY($3))) AS memories,"
        " (SELECT coalesce(jsonb_object_agg(status, n), '{}') FROM (SELECT status, count(*) AS n"
        "   FROM agent_memory.wm_items WHERE tenant_id = $1 AND workspace = $2 GROUP BY status) s) AS items,"
        " (SELECT jsonb_build_object('total', count(*), 'expired', count(*) FILTER (WHERE expires_at <= now()))"
        "   FROM agent_memory.skip_entries WHERE tenant_id = $1 AND workspace = $2) AS skips,"
        " (SELECT count(*) FROM agent_memory.identity_snapshots WHERE tenant_id = $1 AND workspace = $2) AS identities,"
        " (SELECT max(decayed_at) FROM agent_memory.protocol_decay WHERE tenant_id = $1 AND workspace = $2)"
        "   AS last_decay",
        scope.tenant_id,
        scope.workspace,
        agents,
    )
    return dict(row)

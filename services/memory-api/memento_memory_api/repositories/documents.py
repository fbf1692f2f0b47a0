"""SQL for seed 001's documents: items, versions, chunks and the idempotency keys of writes. Every query runs under
the caller's RLS principal and names the tenant and workspace."""

from __future__ import annotations

from typing import Any

import asyncpg

from memento_memory_api.uow import Scope

ITEM_COLUMNS = "id, kind, title, canonical_key, doc_class, is_canonical, status, pinned, tags, created_at, updated_at"


async def answered(conn: asyncpg.Connection, scope: Scope, key: str) -> asyncpg.Record | None:
    """A write's earlier answer under this idempotency key (the key's row locked for the rest of the transaction)."""
    return await conn.fetchrow(
        "SELECT tool, request_hash, answer FROM agent_memory.doc_commits WHERE tenant_id = $1 AND workspace = $2"
        " AND idempotency_key = $3 FOR UPDATE",
        scope.tenant_id,
        scope.workspace,
        key,
    )


async def claim_key(conn: asyncpg.Connection, scope: Scope, key: str, tool: str, request_hash: str) -> bool:
    """Take the key for this request (False: a concurrent call holds it; its answer is read after it commits)."""
    return bool(
        await conn.fetchval(
            "INSERT INTO agent_memory.doc_commits (tenant_id, workspace, idempotency_key, tool, request_hash, answer)"
            " VALUES ($1, $2, $3, $4, $5, 'null'::jsonb) ON CONFLICT DO NOTHING RETURNING true",
            scope.tenant_id,
            scope.workspace,
            key,
            tool,
            request_hash,
        )
    )


async def keep_answer(conn: asyncpg.Connection, scope: Scope, key: str, answer: dict[str, Any]) -> None:
    await conn.execute(
        "UPDATE agent_memory.doc_commits SET answer = $4 WHERE tenant_id = $1 AND workspace = $2"
        " AND idempotency_key = $3",
        scope.tenant_id,
        scope.workspace,
        key,
        answer,  # the pool's jsonb codec encodes it
    )


async def canonical(conn: asyncpg.Connection, scope: Scope, key: str, *, lock: bool = False) -> asyncpg.Record | None:
    return await conn.fetchrow(
        f"SELECT {ITEM_COLUMNS} FROM agent_memory.doc_items WHERE tenant_id = $1 AND workspace = $2"
        f" AND canonical_key = $3{' FOR UPDATE' if lock else ''}",
        scope.tenant_id,
        scope.workspace,
        key,
    )


async def insert_item(conn: asyncpg.Connection, scope: Scope, item: dict[str, Any]) -> asyncpg.Record:
    return await conn.fetchrow(
        "INSERT INTO agent_memory.doc_items (id, tenant_id, workspace, kind, title, canonical_key, doc_class,"
        f" is_canonical, tags) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING {ITEM_COLUMNS}",
        item["id"],
        scope.tenant_id,
        scope.workspace,
        item["kind"],
        item["title"],
        item["canonical_key"],
        item["doc_class"],
        item["is_canonical"],
        item["tags"],
    )


async def update_item(conn: asyncpg.Connection, item_id: str, title: str, doc_class: str, tags: list[str]) -> None:
    await conn.execute(
        "UPDATE agent_memory.doc_items SET title = $2, doc_class = $3, tags = $4, updated_at = now() WHERE id = $1",
        item_id,
        title,
        doc_class,
        tags,
    )


async def version(conn: asyncpg.Connection, item_id: str, num: int | None = None) -> asyncpg.Record | None:
    """A version of the item (the latest when `num` is None)."""
    return await conn.fetchrow(
        "SELECT version_num, content, content_hash, created_at FROM agent_memory.doc_versions WHERE item_id = $1"
        " AND ($2::int IS NULL OR version_num = $2) ORDER BY version_num DESC LIMIT 1",
        item_id,
        num,
    )


async def add_version(
    conn: asyncpg.Connection,
    scope: Scope,
    item_id: str,
    num: int,
    content: str,
    content_hash: str,
    chunks: list,
    commit_id: str | None = None,
) -> None:
    """The version and its chunks (their full-text vectors are generated columns), in the caller's transaction."""
    await conn.execute(
        "INSERT INTO agent_memory.doc_versions (tenant_id, workspace, item_id, version_num, content, content_hash,"
        " commit_id) VALUES ($1, $2, $3, $4, $5, $6, $7)",
        scope.tenant_id,
        scope.workspace,
        item_id,
        num,
        content,
        content_hash,
        commit_id,
    )
    await conn.executemany(
        "INSERT INTO agent_memory.doc_chunks (tenant_id, workspace, item_id, version_num, chunk_index, text,"
        " heading_path, anchor, start_char, end_char, token_estimate) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9,"
        " $10, $11)",
        [
            (
                scope.tenant_id,
                scope.workspace,
                item_id,
                num,
                c.index,
                c.text,
                c.heading_path,
                c.anchor,
                c.start,
                c.end,
                c.token_estimate,
            )
            for c in chunks
        ],
    )


async def page(conn: asyncpg.Connection, scope: Scope, after: tuple | None, limit: int) -> list[asyncpg.Record]:
    """Active items, pinned first, then newest (then id), from after the (pinned, updated_at, id) `after`."""
    pinned, updated, item_id = after if after else (None, None, None)
    return await conn.fetch(
        "SELECT id, title, kind, canonical_key, pinned, updated_at FROM agent_memory.doc_items"
        " WHERE tenant_id = $1 AND workspace = $2 AND status = 'active'"
        " AND ($3::boolean IS NULL OR (pinned, updated_at, id) < ($3::boolean, $4::timestamptz, $5::text))"
        " ORDER BY pinned DESC, updated_at DESC, id DESC LIMIT $6",
        scope.tenant_id,
        scope.workspace,
        pinned,
        updated,
        item_id,
        limit,
    )


async def item(conn: asyncpg.Connection, item_id: str) -> asyncpg.Record | None:
    return await conn.fetchrow(f"SELECT {ITEM_COLUMNS} FROM agent_memory.doc_items WHERE id = $1", item_id)


async def latest_items(
    conn: asyncpg.Connection, scope: Scope, kinds: list[str] | None, limit: int
) -> list[asyncpg.Record]:
    """Active items with their latest version, newest first (then id, for a stable order)."""
    return await conn.fetch(
        "SELECT i.id, i.kind, i.title, i.canonical_key, i.is_canonical, i.pinned, i.updated_at, v.version_num,"
        " v.content FROM agent_memory.doc_items i JOIN LATERAL (SELECT version_num, content FROM"
        " agent_memory.doc_versions WHERE item_id = i.id ORDER BY version_num DESC LIMIT 1) v ON true"
        " WHERE i.tenant_id = $1 AND i.workspace = $2 AND i.status = 'active'"
        " AND ($3::text[] IS NULL OR i.kind = ANY($3)) ORDER BY i.updated_at DESC, i.id LIMIT $4",
        scope.tenant_id,
        scope.workspace,
        kinds,
        limit,
    )

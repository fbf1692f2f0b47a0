"""Every tool refuses bad input with INVALID_PARAMETER naming the field, and writes nothing (SPEC "Errors")."""

from __future__ import annotations

import pytest

A, B = "frag-{a}", "frag-{b}"  # replaced by the ids of two stored fragments

CASES = [
    ("remember", {"content": "c", "topic": "x", "type": "fact", "keywords": ["  "]}, "keywords"),
    ("remember", {"content": "c", "topic": " ", "type": "fact"}, "topic"),
    ("remember", {"content": "c", "topic": "x", "type": "fact", "scope": "forever"}, "scope"),
    ("remember", {"content": "c", "topic": "x", "type": "fact", "agentId": "bad agent"}, "agentId"),
    ("recall", {"keywords": ["\t"]}, "keywords"),
    ("recall", {"text": "   "}, "text"),
    ("recall", {"text": "q", "tokenBudget": 0}, "tokenBudget"),
    ("recall", {"text": "q", "threshold": 1.5}, "threshold"),
    ("recall", {"text": "q", "linkRelationType": "likes"}, "linkRelationType"),
    ("recall", {"keywords": "redis"}, "keywords"),
    ("recall", {"keywords": ["k"] * 21}, "keywords"),
    ("forget", {"id": A, "force": "yes"}, "force"),
    ("link", {"fromId": A, "toId": B, "relationType": "likes"}, "relationType"),
    ("link", {"fromId": A}, "toId"),
    ("amend", {"id": A, "keywords": [" "]}, "keywords"),
    ("amend", {"id": A, "importance": -0.1}, "importance"),
    ("amend", {"id": A, "content": ""}, "content"),
    ("reflect", {"summary": " "}, "summary"),
    ("reflect", {"summary": "s", "sessionId": "  "}, "sessionId"),
    ("reflect", {"summary": "s", "task_effectiveness": {"overall_success": "mostly"}}, "task_effectiveness"),
    ("context", {"tokenBudget": -1}, "tokenBudget"),
    ("context", {"types": ["opinion"]}, "types"),
    ("context", {"sessionId": " "}, "sessionId"),
    ("tool_feedback", {"tool_name": " ", "relevant": True, "sufficient": True}, "tool_name"),
    ("tool_feedback", {"tool_name": "recall", "relevant": "yes", "sufficient": True}, "relevant"),
    ("tool_feedback", {"tool_name": "t", "relevant": True, "sufficient": True, "trigger_type": "x"}, "trigger_type"),
    ("memory_stats", {"verbose": True}, "verbose"),
    ("memory_consolidate", {"now": True}, "now"),
    ("graph_explore", {}, "startId"),
    ("graph_explore", {"startId": 7}, "startId"),
]
TABLES = ("fragments", "outbox", "fragment_links", "fragment_versions", "task_feedback", "tool_feedback")


async def snapshot(owner_pool, tenant: str) -> dict[str, int]:
    return {
        table: await owner_pool.fetchval(f"SELECT count(*) FROM agent_memory.{table} WHERE tenant_id = $1", tenant)
        for table in TABLES
    }


def with_ids(value, ids: dict[str, str]):
    if isinstance(value, dict):
        return {k: with_ids(v, ids) for k, v in value.items()}
    if isinstance(value, str):
        return value.format(**ids) if value.startswith("frag-{") else value
    return value


@pytest.mark.parametrize(("tool", "arguments", "field"), CASES, ids=[f"{c[0]}-{c[2]}" for c in CASES])
async def test_bad_input_names_the_field_and_changes_nothing(memory_api, tenant, owner_pool, tool, arguments, field):
    ids = {}
    for name, content in (("a", "deploys need a ticket"), ("b", "tickets live in the tracker")):
        stored = await memory_api.call("remember", {"content": content, "topic": "t", "type": "fact"}, tenant=tenant)
        ids[name] = stored["result"]["id"].removeprefix("frag-")
    before = await snapshot(owner_pool, tenant)
    answer = await memory_api.call(tool, with_ids(arguments, ids), tenant=tenant, session_id="s-1")
    assert answer["error"]["code"] == "INVALID_PARAMETER", answer
    named = answer["error"]["field"]  # the path to the value, e.g. keywords.0
    assert named.split(".")[0] == field and answer["error"]["message"].startswith(named)
    assert await snapshot(owner_pool, tenant) == before


async def test_memory_consolidate_needs_an_admin_credential(memory_api, tenant):
    """It merges and deletes across every agent of the workspace and returns their contradiction pairs: refused before
    anything is enqueued (the check precedes the handler)."""
    denied = await memory_api.call("memory_consolidate", {}, tenant=tenant, agents=("bob",), scopes=("read", "write"))
    assert denied["error"]["code"] == "FORBIDDEN" and "admin" in denied["error"]["message"]

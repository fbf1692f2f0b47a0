"""Row-level security is enforced by Postgres, not by application filters."""

from __future__ import annotations

import pytest

from memento_shared.db.rls import set_principal

TABLES = [
    "fragments",
    "fragment_embeddings",
    "fragment_links",
    "fragment_versions",
    "tool_feedback",
    "task_feedback",
    "outbox",
    "dead_letters",
    "embedding_profiles",
]


async def test_every_table_forces_rls_and_the_service_role_owns_nothing(owner_pool):
    rows = await owner_pool.fetch(
        "SELECT c.relname, c.relrowsecurity, c.relforcerowsecurity, pg_get_userbyid(c.relowner) AS owner"
        " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'agent_memory'"
        " AND c.relkind = 'r'"
    )
    assert set(TABLES) <= {r["relname"] for r in rows}
    for row in rows:  # every table, including ones later migrations add
        assert row["relrowsecurity"] and row["relforcerowsecurity"], row["relname"]
        assert row["owner"] != "memento_app"
    role = await owner_pool.fetchrow("SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = 'memento_app'")
    assert role is not None and not role["rolsuper"] and not role["rolbypassrls"]


async def test_other_tenant_sees_nothing_through_the_tools(memory_api, tenant):
    stored = await memory_api.call(
        "remember",
        {"content": "tenant A secret plan", "topic": "plans", "type": "decision", "keywords": ["plan"]},
        tenant=tenant,
    )
    assert stored["result"]["created"]
    other = tenant + "-b"
    for args in ({"keywords": ["plan"]}, {"text": "secret plan"}, {"topic": "plans"}, {}):
        answer = await memory_api.call("recall", args, tenant=other)
        assert answer["result"]["fragments"] == [], args
    # the same content in tenant B is a new fragment, not "created: false" (that would leak existence)
    again = await memory_api.call(
        "remember", {"content": "tenant A secret plan", "topic": "plans", "type": "decision"}, tenant=other
    )
    assert again["result"]["created"] is True and again["result"]["id"] != stored["result"]["id"]


async def test_other_tenant_sees_nothing_through_raw_sql(memory_api, tenant, app_pool):
    await memory_api.call("remember", {"content": "only for tenant A", "topic": "t", "type": "fact"}, tenant=tenant)
    async with app_pool.acquire() as conn, conn.transaction():
        await set_principal(conn, tenant_id=tenant + "-b", workspace="default", agent_id="default")
        for table in TABLES[:-1]:
            assert await conn.fetchval(f"SELECT count(*) FROM agent_memory.{table} WHERE tenant_id = $1", tenant) == 0
        # writing into another tenant is refused by the policy's WITH CHECK
        with pytest.raises(Exception, match="row-level security"):
            await conn.execute(
                "INSERT INTO agent_memory.fragments (id, tenant_id, workspace, content, topic, type, importance,"
                " content_hash, ttl_tier) VALUES ('frag-x', $1, 'default', 'c', 't', 'fact', 0.5, 'h', 'warm')",
                tenant,
            )
    async with app_pool.acquire() as conn, conn.transaction():
        # no principal at all: nothing is visible
        assert await conn.fetchval("SELECT count(*) FROM agent_memory.fragments") == 0
    async with app_pool.acquire() as conn, conn.transaction():
        await set_principal(conn, tenant_id=tenant, workspace="default", agent_id="default")
        assert await conn.fetchval("SELECT count(*) FROM agent_memory.fragments") == 1


async def test_agents_see_their_own_and_default_but_not_each_other(memory_api, tenant):
    await memory_api.call(
        "remember",
        {"content": "alice private note", "topic": "n", "type": "fact", "keywords": ["note"], "agentId": "alice"},
        tenant=tenant,
    )
    await memory_api.call(
        "remember", {"content": "shared team note", "topic": "n", "type": "fact", "keywords": ["note"]}, tenant=tenant
    )
    bob = await memory_api.call("recall", {"keywords": ["note"], "agentId": "bob"}, tenant=tenant)
    assert [f["content"] for f in bob["result"]["fragments"]] == ["shared team note"]
    alice = await memory_api.call("recall", {"keywords": ["note"], "agentId": "alice"}, tenant=tenant)
    assert sorted(f["content"] for f in alice["result"]["fragments"]) == ["alice private note", "shared team note"]
    # a credential bound to bob cannot ask for alice
    denied = await memory_api.call("recall", {"keywords": ["note"], "agentId": "alice"}, tenant=tenant, agents=("bob",))
    assert denied["error"]["code"] == "FORBIDDEN"
    admin = await memory_api.call("recall", {"keywords": ["note"], "agentId": "admin"}, tenant=tenant)
    assert admin["result"]["count"] == 2


async def test_principal_must_be_signed(memory_api):
    response = await memory_api.client.post(
        "/v1/tools/recall", json={"arguments": {}}, headers={"X-Memento-Principal": "e30.deadbeef"}
    )
    assert response.status_code == 401
    response = await memory_api.client.post("/v1/tools/recall", json={"arguments": {}})
    assert response.status_code == 401


async def test_another_agent_sees_none_of_alices_rows_in_any_table(memory_api, tenant, app_pool):
    async def call(tool, args):
        # a credential bound to agent alice: tools without agentId (tool_feedback) act as alice too
        answer = await memory_api.call(tool, args, tenant=tenant, agents=("alice",))
        assert "result" in answer, answer
        return answer["result"]

    first = await call("remember", {"content": "alice one", "topic": "t", "type": "fact"})
    second = await call("remember", {"content": "alice two", "topic": "t", "type": "fact"})
    await call("link", {"fromId": first["id"], "toId": second["id"]})
    await call("amend", {"id": first["id"], "content": "alice one, amended"})
    await call("tool_feedback", {"tool_name": "recall", "relevant": True, "sufficient": True})
    await call(
        "reflect", {"summary": "alice's session", "sessionId": "s", "task_effectiveness": {"overall_success": True}}
    )
    agent_tables = ["fragments", "fragment_links", "fragment_versions", "tool_feedback", "task_feedback"]
    for agent, expected in (("bob", 0), ("alice", None)):
        async with app_pool.acquire() as conn, conn.transaction():
            await set_principal(conn, tenant_id=tenant, workspace="default", agent_id=agent)
            for table in agent_tables:
                count = await conn.fetchval(f"SELECT count(*) FROM agent_memory.{table} WHERE tenant_id = $1", tenant)
                assert count == expected if expected is not None else count > 0, (agent, table, count)
    # and through the tools: bob's recall, graph and stats show nothing of alice's
    bob = {"agentId": "bob"}
    assert (await memory_api.call("recall", {"topic": "t", **bob}, tenant=tenant))["result"]["fragments"] == []
    assert (await memory_api.call("memory_stats", {}, tenant=tenant))["result"]["totalFragments"] == 0
    explore = await memory_api.call("graph_explore", {"startId": first["id"], **bob}, tenant=tenant)
    assert explore["error"]["code"] == "MEMORY_NOT_FOUND"
    amend = await memory_api.call("amend", {"id": first["id"], "topic": "stolen", **bob}, tenant=tenant)
    assert amend["error"]["code"] == "MEMORY_NOT_FOUND"

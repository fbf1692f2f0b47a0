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
    assert {r["relname"] for r in rows} == set(TABLES)
    for row in rows:
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

"""The isolation sweep (issue 31 item 3), generated from the catalog: every table of the schema has row-level security
enabled and forced (test_isolation), and here, every table with a tenant column that the tools fill is filled for
tenant A through every dialect's writing tools, then read, updated and deleted through raw SQL under the service
role as tenant B, as another workspace of A, and (for tables with an agent column) as another agent: nothing is seen
and nothing changes. A new table the tools fill is swept without a change here; one they do not fill must be named
in UNFILLED with the reason, or the test fails. The service role cannot switch RLS off, alter, drop or truncate.
SQL- and path-looking text is stored and returned literally."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from memento_shared.db.rls import set_principal

# tables with a tenant column that no tool call below fills, and why
UNFILLED = {
    "fragment_embeddings": "written by the embedder (not running here); swept in tests/workers",
    "chunk_embeddings": "written by the embedder (not running here)",
    "dead_letters": "written by the relay when a job fails for good",
    "consolidation_runs": "written by the consolidator",
    "protocol_decay": "written by the consolidator's decay job",
    "api_keys": "written by memento-admin; read through a SECURITY DEFINER function",
    "session_archives": "written when maintenance compacts a long session's events (hundreds of turns)",
    "console_audit": "written by the web console's actions (memory-api routes/console.py), not by a tool",
}


def user(text: str) -> dict:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def assistant(text: str) -> dict:
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}


async def fill(memory_api, tenant: str) -> None:
    """Tenant A's rows in every table the tools write, as agent alice where a tool takes an agent."""

    async def ok(tool: str, args: dict) -> dict:
        answer = await memory_api.call(tool, args, tenant=tenant, agents=("alice",))
        assert "result" in answer, (tool, answer)
        return answer["result"]

    first = await ok("remember", {"content": "alice one", "topic": "t", "type": "fact"})
    second = await ok("remember", {"content": "alice two", "topic": "t", "type": "fact"})
    await ok("link", {"fromId": first["id"], "toId": second["id"]})
    await ok("amend", {"id": first["id"], "content": "alice one, amended"})
    await ok("tool_feedback", {"tool_name": "recall", "relevant": True, "sufficient": True})
    await ok("reflect", {"summary": "a session", "sessionId": "s", "task_effectiveness": {"overall_success": True}})
    await ok("memento_update", {"section": "active_work", "content": "Fixing the cache"})
    await ok("memento_item_create", {"category": "active_work", "title": "Tune alerting"})
    future = (datetime.now(UTC) + timedelta(days=2)).isoformat()
    await ok("memento_skip_add", {"item": "aurora alerts", "reason": "Kp too low", "expires": future})
    await ok("memento_identity_update", {"crystal": "I am careful."})
    before = await ok("memory_before_turn", {"session_id": "s1", "current_input": [user("The api runs on 8080.")]})
    after = {"session_id": "s1", "turn_id": before["turn_id"], "input_items": before["input_items"],
             "output_items": [assistant("Noted: port 8080.")]}  # fmt: skip
    await ok("memory_after_turn", after)
    await ok("memory_run_maintenance", {"session_id": "s1"})
    entry = {"kind": "note", "title": "Ops", "content": "# Ops\n\n## Errors\n\nERR_QUEUE_STALLED when Redis is away.\n"}
    await ok("memory.commit", {"idempotencyKey": str(uuid.uuid4()), "entries": [entry]})


async def tenant_tables(owner_pool) -> dict[str, set[str]]:
    rows = await owner_pool.fetch(
        "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'agent_memory'"
    )
    tables: dict[str, set[str]] = {}
    for r in rows:
        tables.setdefault(r["table_name"], set()).add(r["column_name"])
    return {t: cols for t, cols in tables.items() if "tenant_id" in cols}


async def test_every_tenant_table_the_tools_fill_is_sealed_from_other_tenants_workspaces_and_agents(
    memory_api, tenant, owner_pool, app_pool
):
    await fill(memory_api, tenant)
    tables = await tenant_tables(owner_pool)
    filled = {t for t in tables if await owner_pool.fetchval(
        f"SELECT count(*) FROM agent_memory.{t} WHERE tenant_id = $1", tenant)}  # fmt: skip
    assert set(tables) - filled == set(UNFILLED), "a table neither filled here nor explained in UNFILLED"
    outsiders = [(tenant + "-b", "default", "alice"), (tenant, "elsewhere", "alice")]
    for who in outsiders:
        async with app_pool.acquire() as conn, conn.transaction():
            await set_principal(conn, tenant_id=who[0], workspace=who[1], agent_id=who[2])
            for table in sorted(filled):
                where = f"FROM agent_memory.{table} WHERE tenant_id = $1"
                assert await conn.fetchval(f"SELECT count(*) {where}", tenant) == 0, (who, table)
                assert await conn.execute(f"UPDATE agent_memory.{table} SET tenant_id = tenant_id WHERE tenant_id = $1",
                                          tenant) == "UPDATE 0", (who, table)  # fmt: skip
                assert await conn.execute(f"DELETE {where}", tenant) == "DELETE 0", (who, table)
    agent_tables = sorted(t for t in filled if "agent_id" in tables[t])
    assert {"fragments", "fragment_links", "fragment_versions"} <= set(agent_tables)
    async with app_pool.acquire() as conn, conn.transaction():
        await set_principal(conn, tenant_id=tenant, workspace="default", agent_id="bob")
        for table in agent_tables:
            alice = f"FROM agent_memory.{table} WHERE tenant_id = $1 AND agent_id = 'alice'"
            assert await conn.fetchval(f"SELECT count(*) {alice}", tenant) == 0, table
            assert await conn.execute(f"DELETE {alice}", tenant) == "DELETE 0", table
    for table in filled:  # all of it still there
        assert await owner_pool.fetchval(f"SELECT count(*) FROM agent_memory.{table} WHERE tenant_id = $1", tenant)


@pytest.mark.parametrize(
    "statement",
    [
        "ALTER TABLE agent_memory.fragments DISABLE ROW LEVEL SECURITY",
        "ALTER TABLE agent_memory.fragments NO FORCE ROW LEVEL SECURITY",
        "ALTER TABLE agent_memory.fragments ADD COLUMN x int",
        "DROP TABLE agent_memory.wm_items",
        "TRUNCATE agent_memory.fragments",
        "DROP POLICY fragments_isolation ON agent_memory.fragments",
        "SET ROLE postgres",
        "CREATE TABLE agent_memory.sneaky (id int)",
    ],
)
async def test_the_service_role_cannot_undo_isolation(app_pool, statement):
    async with app_pool.acquire() as conn:
        with pytest.raises(asyncpg.PostgresError):
            await conn.execute(statement)


INJECTIONS = [
    "'; DROP TABLE agent_memory.fragments; --",
    "' OR '1'='1",
    "x'); DELETE FROM agent_memory.fragments WHERE ('1'='1",
    "$$; SELECT pg_sleep(5); $$",
    "../../../../etc/passwd",
    "..\\..\\windows\\system32",
    "%2e%2e%2f%2e%2e%2f",
    "{{7*7}} ${7*7} <% 7*7 %>",
]


@pytest.mark.parametrize("text", INJECTIONS)
async def test_sql_and_path_strings_are_stored_and_returned_literally(memory_api, tenant, text):
    content = f"literal: {text}"
    stored = await memory_api.call(
        "remember", {"content": content, "topic": text[:50], "type": "fact", "keywords": ["literal"]}, tenant=tenant
    )
    found = await memory_api.call("recall", {"keywords": ["literal"], "includeLinks": False}, tenant=tenant)
    fragments = found["result"]["fragments"]
    assert [(f["id"], f["content"], f["topic"]) for f in fragments] == [(stored["result"]["id"], content, text[:50])]
    history = await memory_api.call("fragment_history", {"id": stored["result"]["id"]}, tenant=tenant)
    assert history["result"]["current"]["content"] == content

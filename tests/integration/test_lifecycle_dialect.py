"""The `lifecycle` dialect (seed 004, docs/dialects.md "lifecycle") through memory-api's tool route on real Postgres and
Valkey: a client's two calls a turn, the turn guard and session lock under concurrency, maintenance, limits, errors in
seed 004's codes, and isolation."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime

import asyncpg
import pytest

from memento_memory_api.uow import Scope
from memento_shared import sessions as shared_sessions
from memento_shared.db.rls import set_principal
from memento_shared.domain.fragments import content_hash
from memento_shared.text.tokenizer import count_tokens
from tests.fixtures.apps import memory_api_on
from tests.fixtures.loopback.server import Loopback
from tests.fixtures.waiting import eventually
from tests.integration.test_protocol_dialect import answer


def user(text: str) -> dict:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def assistant(text: str) -> dict:
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}


def text(item: dict) -> str:
    return "\n".join(p["text"] for p in item["content"])


async def ok(api, tool: str, arguments: dict, tenant: str, **where) -> dict:
    body = await answer(api, tool, arguments, tenant, **where)
    assert "result" in body, body
    return body["result"]


async def error(api, tool: str, arguments: dict, tenant: str, **where) -> dict:
    body = await answer(api, tool, arguments, tenant, **where)
    assert "error" in body, body
    return body["error"]


async def turn(api, tenant: str, said: str, reply: str, session: str = "s1", turn_id: str | None = None, **extra):
    """One turn as a client runs it: before, the model (`reply`), after."""
    before = await ok(
        api, "memory_before_turn", {"session_id": session, "current_input": [user(said)], **extra}, tenant
    )
    committed = await ok(
        api,
        "memory_after_turn",
        {
            "session_id": session,
            "turn_id": turn_id or before["turn_id"],
            "input_items": before["input_items"],
            "output_items": [assistant(reply)],
            **{k: v for k, v in extra.items() if k == "project"},
        },
        tenant,
    )
    assert committed["ok"] is True
    return before


async def count(owner_pool, table: str, tenant: str) -> int:
    return await owner_pool.fetchval(f"SELECT count(*) FROM agent_memory.{table} WHERE tenant_id = $1", tenant)


async def test_a_fact_said_in_turn_one_comes_back_in_turn_three(memory_api, tenant):
    await turn(memory_api, tenant, "Our billing service runs on Postgres 18 in eu-west-1.", "Noted.")
    await turn(memory_api, tenant, "Can you draft the release notes?", "Here is a draft.")
    third = await ok(
        memory_api,
        "memory_before_turn",
        {"session_id": "s1", "current_input_text": "Which database does billing use?"},
        tenant,
    )
    recall, *current = third["input_items"]
    assert recall["role"] == "developer" and text(recall).startswith("Memory recall:")
    assert "Our billing service runs on Postgres 18 in eu-west-1." in text(recall)
    assert third["recall_fact_ids"]
    assert current == [user("Which database does billing use?")]  # last, and unchanged
    assert third["context_token_count"] == sum(count_tokens(text(i)) for i in third["input_items"])


async def test_replayed_input_does_not_nest_recall_blocks_nor_grow_the_session(memory_api, tenant, owner_pool):
    first = await turn(memory_api, tenant, "The deploy window is Tuesday 10:00 UTC.", "OK.")
    events = await count(owner_pool, "session_events", tenant)
    # a client that replays its whole previous input, recall block included, as this turn's input
    replay = [*first["input_items"], user("Remind me of the deploy window.")]
    second = await ok(memory_api, "memory_before_turn", {"session_id": "s1", "current_input": replay}, tenant)
    blocks = [i for i in second["input_items"] if i["role"] == "developer"]
    assert len(blocks) == 1 and text(blocks[0]).count("Memory recall:") == 1
    await ok(
        memory_api,
        "memory_after_turn",
        {
            "session_id": "s1",
            "turn_id": "t2",
            "input_items": second["input_items"],
            "output_items": [assistant("Tue.")],
        },
        tenant,
    )
    # only the new user message and the reply were stored: the replayed items were events already
    assert await count(owner_pool, "session_events", tenant) == events + 2


async def test_a_long_session_stays_within_a_small_window(memory_api, tenant):
    for n in range(12):
        said = f"Step {n}: " + "we reviewed the migration plan and the rollback checklist in detail " * 6
        await turn(memory_api, tenant, said, "Understood, continuing. " * 10)
    question = "What did we decide about the rollback?"
    result = await ok(
        memory_api,
        "memory_before_turn",
        {"session_id": "s1", "current_input_text": question, "max_input_tok": 400},
        tenant,
    )
    assert result["context_token_count"] <= 400 * 0.8
    assert result["input_items"][-1] == user(question)
    assert "left out to fit the input window" in text(result["input_items"][0])


async def test_the_same_turn_replayed_writes_once(memory_api, tenant, owner_pool):
    args = {
        "session_id": "s1",
        "turn_id": "t-1",
        "input_items": [user("Ship on Friday.")],
        "output_items": [assistant("Ok")],
    }
    answers = [await ok(memory_api, "memory_after_turn", args, tenant) for _ in range(3)]
    # a replay stored nothing and says only ok
    assert set(answers[0]) == {"ok", "indexed"} and answers[1:] == [{"ok": True}, {"ok": True}]
    assert await count(owner_pool, "session_events", tenant) == 2
    meta = await owner_pool.fetchrow("SELECT turns FROM agent_memory.session_meta WHERE tenant_id = $1", tenant)
    assert meta["turns"] == 1


async def test_concurrent_commits_of_one_turn_and_of_different_turns(memory_api, tenant, owner_pool):
    same = {"session_id": "s1", "turn_id": "t-x", "input_items": [user("A fact.")], "output_items": [assistant("B.")]}
    answers = await asyncio.gather(*(answer(memory_api, "memory_after_turn", same, tenant) for _ in range(2)))
    outcomes = sorted("ok" if "result" in a else a["error"]["code"] for a in answers)
    assert outcomes in (["ok", "ok"], ["RESOURCE_BUSY", "ok"])
    for a in answers:
        if "error" in a:
            assert a["error"]["retryable"] is True
    assert await count(owner_pool, "session_events", tenant) == 2
    turns_counted = await owner_pool.fetchval(
        "SELECT turns FROM agent_memory.session_meta WHERE tenant_id = $1 AND session_id = 's1'", tenant
    )
    assert turns_counted == 1  # committed once, however the two calls interleaved

    many = [
        {
            "session_id": "s2",
            "turn_id": f"t-{n}",
            "input_items": [user(f"message {n}")],
            "output_items": [assistant(f"reply {n}")],
        }
        for n in range(6)
    ]
    results = await asyncio.gather(*(answer(memory_api, "memory_after_turn", a, tenant) for a in many))
    assert all("result" in r for r in results), results
    stored = await owner_pool.fetch(
        "SELECT turn_id, count(*) AS n FROM agent_memory.session_events WHERE tenant_id = $1 AND session_id = 's2'"
        " GROUP BY turn_id",
        tenant,
    )
    assert {r["turn_id"]: r["n"] for r in stored} == {f"t-{n}": 2 for n in range(6)}


async def test_a_stale_processing_claim_is_taken_over(servers, tenant, owner_pool):
    async with memory_api_on(servers.settings(MEMORY_TURN_STALE_SECONDS="1")) as api:
        await owner_pool.execute(
            "INSERT INTO agent_memory.turn_guards (tenant_id, workspace, session_id, turn_id, status, claim,"
            " updated_at) VALUES ($1, 'default', 's1', 't-dead', 'processing', 'a-call-that-died',"
            " now() - interval '5 seconds')",
            tenant,
        )
        args = {"session_id": "s1", "turn_id": "t-dead", "input_items": [user("x y z w")], "output_items": []}
        assert (await ok(api, "memory_after_turn", args, tenant))["ok"] is True
        fresh = {**args, "turn_id": "t-live"}
        await owner_pool.execute(
            "INSERT INTO agent_memory.turn_guards (tenant_id, workspace, session_id, turn_id, status, claim)"
            " VALUES ($1, 'default', 's1', 't-live', 'processing', 'a-call-in-progress')",
            tenant,
        )
        refused = await error(api, "memory_after_turn", fresh, tenant)
    assert refused["code"] == "RESOURCE_BUSY" and refused["retryable"] is True


async def test_maintenance_compacts_old_events_expires_facts_and_survives_an_interruption(
    memory_api, tenant, owner_pool
):
    for n in range(3):
        await turn(memory_api, tenant, f"Note {n} says the cache TTL is {n + 1} minutes.", "ok")
    # events from three UTC days, all older than compaction_min_age_hours (24 h)
    await owner_pool.execute(
        "UPDATE agent_memory.session_events SET created_at = now() - make_interval(days => 2 + (id % 3)::int)"
        " WHERE tenant_id = $1",
        tenant,
    )
    await owner_pool.execute(
        "UPDATE agent_memory.fragments SET expires_at = now() - interval '1 minute' WHERE tenant_id = $1"
        " AND source = 'lifecycle:l1' AND content LIKE 'Note 0 %'",
        tenant,
    )
    events = await count(owner_pool, "session_events", tenant)
    # a run that died after its first day: that day is archived and its events gone, the rest untouched
    async with memory_api.app.state.uow(Scope(tenant, "default", "default")) as uow:
        first_day = await shared_sessions.compact_day(uow.conn, uow.scope, "s1", datetime.now(UTC))
    result = await ok(memory_api, "memory_run_maintenance", {"session_id": "s1"}, tenant)
    assert result["ok"] is True and result["expired_facts"] == 1
    assert first_day + result["compacted_events"] == events
    assert await count(owner_pool, "session_events", tenant) == 0
    archived = await owner_pool.fetchval(
        "SELECT sum(events) FROM agent_memory.session_archives WHERE tenant_id = $1", tenant
    )
    items = await owner_pool.fetchval(
        "SELECT sum(jsonb_array_length(items)) FROM agent_memory.session_archives WHERE tenant_id = $1", tenant
    )
    assert archived == items == events  # every event archived exactly once
    again = await ok(memory_api, "memory_run_maintenance", {"session_id": "s1"}, tenant)
    assert again["compacted_events"] == 0 and again["expired_facts"] == 0 and again["summaries_refreshed"] == 0
    listed = await ok(memory_api, "memory_list_dir_with_abstract", {"session_id": "s1"}, tenant)
    paths = [s["path"] for s in listed["summaries"]]
    assert paths[0] == "/memory/s1" and "/memory/s1/meta" in paths and "/memory/s1/memory_tiers/l1" in paths
    assert sum(p.startswith("/memory/s1/events/archive/") for p in paths) == 3
    assert listed["summaries"][0]["has_overview"] is True and "3 turns" in listed["summaries"][0]["abstract"]
    shallow = await ok(
        memory_api, "memory_list_dir_with_abstract", {"session_id": "s1", "path": "/memory/s1", "depth": 1}, tenant
    )
    assert not any(s["path"].count("/") > 3 for s in shallow["summaries"])


async def test_facts_move_up_a_tier_when_said_again_and_are_found_by_other_dialects(memory_api, tenant, owner_pool):
    await turn(memory_api, tenant, "The on-call phone number rotates every Monday.", "ok")
    await turn(memory_api, tenant, "The on-call phone number rotates every Monday.", "ok", turn_id="t-again")
    row = await owner_pool.fetchrow(
        "SELECT id, source, expires_at - now() AS left FROM agent_memory.fragments WHERE tenant_id = $1"
        " AND content = 'The on-call phone number rotates every Monday.'",
        tenant,
    )
    assert row["source"] == "lifecycle:l2" and row["left"].days >= 6
    recalled = await memory_api.call("recall", {"text": "on-call phone rotation", "includeLinks": False}, tenant=tenant)
    assert row["id"] in [f["id"] for f in recalled["result"]["fragments"]]
    searched = await memory_api.call("search_memories", {"query": "on-call phone"}, tenant=tenant)
    assert row["id"] in [m["id"] for m in searched["result"]["memories"]]


@pytest.mark.parametrize(
    ("tool", "arguments", "field"),
    [
        ("memory_before_turn", {}, "current_input"),
        ("memory_before_turn", {"current_input": [], "current_input_text": "x"}, "current_input"),
        ("memory_before_turn", {"conversation_items": [user("a")]}, "current_input_start"),
        (
            "memory_before_turn",
            {"conversation_items": [user("a")], "current_input_start": 0, "current_input_count": 2},
            "current_input_count",
        ),
        (
            "memory_before_turn",
            {"current_input": [{"type": "message", "role": "robot", "content": "x"}]},
            "current_input.0.role",
        ),
        ("memory_before_turn", {"current_input": [user("x" * 100_001)]}, "current_input.0.content.0.text"),
        ("memory_before_turn", {"current_input": [user("x")] * 257}, "current_input"),
        ("memory_before_turn", {"current_input_text": "x", "max_input_tok": 10}, "max_input_tok"),
        ("memory_before_turn", {"current_input_text": "x", "session_id": "has space"}, "session_id"),
        ("memory_after_turn", {"turn_id": "t", "output_items": []}, "input_items"),
        (
            "memory_after_turn",
            {"conversation_items": [user("a")], "current_input_start": 0, "current_input_count": 2},
            "current_input_count",
        ),
        ("memory_after_turn", {"turn_id": "t", "input_items": "text", "output_items": []}, "input_items"),
        ("memory_after_turn", {"turn_id": "t", "input_items": [], "output_items": [user("y")] * 257}, "output_items"),
        ("memory_run_maintenance", {"session_id": ""}, "session_id"),
        ("memory_list_dir_with_abstract", {"depth": 0}, "depth"),
    ],
)
async def test_bad_payloads_are_invalid_arguments_naming_the_field(
    memory_api, tenant, owner_pool, tool, arguments, field
):
    found = await error(memory_api, tool, arguments, tenant)
    assert (found["code"], found["field"], found["retryable"]) == ("INVALID_ARGUMENT", field, False), found
    for table in ("session_events", "turn_guards", "session_meta", "fragments"):
        assert await count(owner_pool, table, tenant) == 0


async def test_another_tenant_and_a_disallowed_project_reach_nothing(memory_api, tenant, app_pool):
    await turn(memory_api, tenant, "Our secret launch codename is Nightjar.", "ok")
    other = await ok(
        memory_api, "memory_before_turn", {"session_id": "s1", "current_input_text": "codename?"}, tenant + "-b"
    )
    assert other["recall_fact_ids"] == [] and "Nightjar" not in text(other["input_items"][0])
    refused = await error(
        memory_api,
        "memory_before_turn",
        {"project": "secret", "current_input_text": "codename?"},
        tenant,
        workspaces=("default",),
    )
    assert refused["code"] == "PERMISSION_DENIED"
    async with app_pool.acquire() as conn, conn.transaction():
        await set_principal(conn, tenant_id=tenant + "-b", workspace="default", agent_id="default")
        for table in ("session_events", "turn_guards", "session_meta", "session_archives"):
            assert await conn.fetchval(f"SELECT count(*) FROM agent_memory.{table} WHERE tenant_id = $1", tenant) == 0


async def test_the_project_argument_names_the_workspace(memory_api, tenant, owner_pool):
    await turn(memory_api, tenant, "The staging bucket is called vault-7.", "ok", project="infra")
    workspaces = await owner_pool.fetch(
        "SELECT DISTINCT workspace FROM agent_memory.session_events WHERE tenant_id = $1", tenant
    )
    assert [w["workspace"] for w in workspaces] == ["infra"]


def responses_server(reply: str) -> Loopback:
    """POST /v1/responses as the OpenAI Responses API answers it."""

    async def answer_(_request, body: dict) -> dict:
        return {
            "id": "resp_loopback",
            "object": "response",
            "created_at": int(time.time()),
            "model": body["model"],
            "status": "completed",
            "output": [
                {
                    "type": "message",
                    "id": "msg_1",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": reply, "annotations": []}],
                }
            ],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
        }

    return Loopback([("/v1/responses", answer_)], lambda status: {"error": {"message": str(status), "type": "x"}})


@pytest.mark.parametrize("base", ["", "/v1", "/v1/responses"])
async def test_heuristic_fact_extraction_through_the_responses_api_and_its_fallback(servers, tenant, owner_pool, base):
    reply = '[{"content": "Billing moved to Postgres 18", "type": "fact"}]'
    with responses_server(reply) as server:
        settings = servers.settings(
            MEMORY_HEURISTIC_ENABLED="true", MEMORY_HEURISTIC_BASE_URL=server.url + base, MEMORY_HEURISTIC_MODEL="m1"
        )
        async with memory_api_on(settings) as api:
            await turn(api, tenant, "so, billing is on the new database now", "great", session="h")
            await api.app.state.after_ack.idle()  # the model reads the turn after the answer
            server.fail_always(500)
            await turn(api, tenant, "We decided to freeze deploys on Fridays.", "ok", session="h", turn_id="t-2")
    facts = {
        r["content"]
        for r in await owner_pool.fetch("SELECT content FROM agent_memory.fragments WHERE tenant_id = $1", tenant)
    }
    # the model's fact replaced the first turn's offline one; the second turn's model failed: its offline fact stays
    assert facts == {"Billing moved to Postgres 18", "We decided to freeze deploys on Fridays."}
    assert server.requests[0].path == "/v1/responses" and server.requests[0].body["model"] == "m1"


async def test_after_turn_answers_before_the_heuristics_model_and_its_facts_replace_the_offline_ones(
    servers, tenant, owner_pool
):
    reply = '[{"content": "The flamingo proxy listens on port 8443", "type": "fact"}]'
    with responses_server(reply) as server:
        server.delay_s = 1.5  # a remote model's time: the turn's answer must not include it
        settings = servers.settings(
            MEMORY_HEURISTIC_ENABLED="true", MEMORY_HEURISTIC_BASE_URL=server.url, MEMORY_HEURISTIC_MODEL="m1"
        )
        async with memory_api_on(settings) as api:
            started = time.perf_counter()
            await turn(api, tenant, "The flamingo proxy listens on 8443 these days.", "noted", session="d")
            answered = time.perf_counter() - started
            # acknowledged with the offline fact, found at once by the next turn
            found = await ok(api, "recall", {"keywords": ["flamingo"]}, tenant)
            assert [f["content"] for f in found["fragments"]] == ["The flamingo proxy listens on 8443 these days."]
            await api.app.state.after_ack.idle()
            later = await ok(api, "recall", {"keywords": ["flamingo"]}, tenant)
    assert answered < server.delay_s, answered
    assert len(server.requests) == 1
    assert [f["content"] for f in later["fragments"]] == ["The flamingo proxy listens on port 8443"]
    rows = await owner_pool.fetch("SELECT content, source FROM agent_memory.fragments WHERE tenant_id = $1", tenant)
    assert [(r["content"], r["source"]) for r in rows] == [
        ("The flamingo proxy listens on port 8443", shared_sessions.FACT_TIERS[0])
    ]


async def test_a_model_fact_in_the_words_of_the_turns_own_offline_fact_stays_daily(servers, tenant, owner_pool):
    """The model read the turn after the answer: a fact it states word for word as the turn's offline extractor did is
    the same fact, not one said again (that would move it to the weekly tier)."""
    reply = (
        '[{"content": "The flamingo proxy listens on 8443.", "type": "fact"},'
        ' {"content": "Deploys freeze on Fridays", "type": "decision"}]'
    )
    with responses_server(reply) as server:
        settings = servers.settings(
            MEMORY_HEURISTIC_ENABLED="true", MEMORY_HEURISTIC_BASE_URL=server.url, MEMORY_HEURISTIC_MODEL="m1"
        )
        async with memory_api_on(settings) as api:
            await turn(api, tenant, "The flamingo proxy listens on 8443.", "noted", session="w")
            await api.app.state.after_ack.idle()
    rows = await owner_pool.fetch(
        "SELECT content, source FROM agent_memory.fragments WHERE tenant_id = $1 ORDER BY content", tenant
    )
    daily = shared_sessions.FACT_TIERS[0]
    assert [(r["content"], r["source"]) for r in rows] == [
        ("Deploys freeze on Fridays", daily),
        ("The flamingo proxy listens on 8443.", daily),
    ]


async def test_older_items_that_match_the_question_come_back_beyond_the_recent_window(servers, tenant):
    async with memory_api_on(servers.settings(MEMORY_RECENT_CONTEXT_ITEMS="4", MEMORY_RECALL_FACTS_LIMIT="0")) as api:
        await turn(api, tenant, "what port does the flamingo proxy listen on", "The flamingo proxy listens on 8443.")
        for n in range(5):
            await turn(api, tenant, f"unrelated question number {n}", f"unrelated answer {n}")
        result = await ok(
            api, "memory_before_turn", {"session_id": "s1", "current_input_text": "remind me: flamingo?"}, tenant
        )
    recall = text(result["input_items"][0])
    assert "The flamingo proxy listens on 8443." in recall  # beyond the 4 recent items, found by its words
    assert "unrelated answer 0" not in recall and "unrelated answer 4" in recall


async def test_history_sent_back_is_stored_once_but_a_repeated_answer_is_a_new_event(memory_api, tenant, owner_pool):
    await turn(memory_api, tenant, "Shall we deploy?", "Yes, after the tests.")
    first_events = await count(owner_pool, "session_events", tenant)
    history = [user("Shall we deploy?"), assistant("Yes, after the tests."), user("Shall we deploy?")]
    await ok(
        memory_api,
        "memory_after_turn",
        {"session_id": "s1", "turn_id": "t-2", "input_items": history, "output_items": [assistant("Yes.")]},
        tenant,
    )
    # the two items it held were left out; the question asked again and the answer are this turn's
    assert await count(owner_pool, "session_events", tenant) == first_events + 2


async def test_every_text_of_an_item_is_masked_and_bounded(memory_api, tenant, owner_pool):
    call = {
        "type": "function_call",
        "name": "send_mail",
        "call_id": "c1",
        "arguments": '{"to": "jane.doe@example.com"}',
    }
    args = {"session_id": "s1", "turn_id": "t-1", "input_items": [user("mail jane")], "output_items": [call]}
    await ok(memory_api, "memory_after_turn", args, tenant)
    stored = await owner_pool.fetchval(
        "SELECT item::text FROM agent_memory.session_events WHERE tenant_id = $1 AND item->>'type' = 'function_call'",
        tenant,
    )
    assert "jane.doe@example.com" not in stored
    big = {**call, "arguments": "x" * 100_001}
    refused = await error(memory_api, "memory_after_turn", {**args, "turn_id": "t-2", "output_items": [big]}, tenant)
    assert (refused["code"], refused["field"]) == ("INVALID_ARGUMENT", "output_items.0.arguments")


async def test_turns_stating_the_same_facts_in_other_orders_wait_for_each_other(memory_api, tenant, servers):
    # facts are written in content-hash order whatever order a turn said them in: another session's turn holding
    # the first one's uncommitted insert must make this turn wait holding none of the others (each inserting the
    # other's words first deadlocked, and Postgres aborted one of the two turns)
    rex, lisbon = "My dog is called Rex.", "I live in Lisbon near the river."
    assert content_hash(rex) < content_hash(lisbon)
    insert = (
        "INSERT INTO agent_memory.fragments (id, tenant_id, workspace, agent_id, content, topic, type, importance,"
        " content_hash, ttl_tier) VALUES ($1, $2, 'default', 'default', $3, 'facts', 'fact', 0.5, $4, 'permanent')"
    )
    other = await asyncpg.connect(servers.owner_url)  # the other session's turn, its transaction still open
    try:
        async with other.transaction():
            await other.execute(insert, "frag-0000000000000001", tenant, rex, content_hash(rex))
            args = {"session_id": "s9", "turn_id": "t-1", "input_items": [user(f"{lisbon} {rex}")], "output_items": []}
            committing = asyncio.create_task(answer(memory_api, "memory_after_turn", args, tenant))
            await asyncio.sleep(0.5)  # the turn now waits for the other's insert of `rex`
            async with asyncio.timeout(5):
                await other.execute(insert, "frag-0000000000000002", tenant, lisbon, content_hash(lisbon))
        async with asyncio.timeout(5):
            body = await committing
    finally:
        await other.close()
    assert body.get("result", {}).get("ok") is True, body


async def waiting_for_a_lock(conn: asyncpg.Connection) -> bool:
    """Whether another backend waits for a lock (the turn, blocked by `conn`'s): read from pg_locks, since a new
    connection's pg_stat_activity row may still say `starting` while its first transaction waits."""
    return bool(await conn.fetchval("SELECT count(*) FROM pg_locks WHERE NOT granted AND pid <> pg_backend_pid()"))


async def test_facts_said_again_move_in_id_order_holding_none_while_they_wait(memory_api, tenant, servers):
    # a turn restating daily facts moves them to the weekly tier in id order, after its inserts: moved in their words'
    # order, it held one row while waiting for another that the access flush held, and the flush held that one
    # waiting for the first (a deadlock; Postgres aborted the turn)
    rex, lisbon = "My dog is called Rex.", "I live in Lisbon near the river."
    assert content_hash(rex) < content_hash(lisbon)  # the words' order puts `rex` first; the ids put it last
    insert = (
        "INSERT INTO agent_memory.fragments (id, tenant_id, workspace, agent_id, content, topic, type, importance,"
        " content_hash, ttl_tier, source) VALUES ($1, $2, 'default', 'default', $3, 'lifecycle', 'fact', 0.5, $4,"
        " 'permanent', 'lifecycle:l1')"
    )
    first, last = f"frag-{tenant[2:]}0001", f"frag-{tenant[2:]}0002"  # the tenant's hex: no other test's ids
    other = await asyncpg.connect(servers.owner_url)  # a flush holding the first row
    await other.execute(insert, first, tenant, lisbon, content_hash(lisbon))
    await other.execute(insert, last, tenant, rex, content_hash(rex))
    # the flush's lock (repositories.fragments.touch), taken before its UPDATE: a lock alone, no new row version, so
    # the turn's inserts of the same words do not wait for it, and only the moves can
    bump = "SELECT 1 FROM agent_memory.fragments WHERE id = $1 FOR NO KEY UPDATE"
    try:
        async with other.transaction():
            await other.execute(bump, first)
            args = {"session_id": "s8", "turn_id": "t-1", "input_items": [user(f"{rex} {lisbon}")], "output_items": []}
            committing = asyncio.create_task(answer(memory_api, "memory_after_turn", args, tenant))
            await eventually(lambda: waiting_for_a_lock(other), 10, "the turn to wait for the first row")
            async with asyncio.timeout(5):
                await other.execute(bump, last)  # it must not hold the last one meanwhile
        async with asyncio.timeout(5):
            body = await committing
        tiers = dict(
            await other.fetch("SELECT id, source FROM agent_memory.fragments WHERE id = ANY($1)", [first, last])
        )
    finally:
        await other.close()
    assert body.get("result", {}).get("ok") is True, body
    assert tiers == {first: "lifecycle:l2", last: "lifecycle:l2"}

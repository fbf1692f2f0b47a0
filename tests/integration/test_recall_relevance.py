"""Issue 28 through `recall` on real Postgres and Valkey: what a write records of a memory's place and time, a reply
found by the question asked just before it in its conversation, and a "when" question preferring the memory that
names a time. No embedder answers here, so recall by text is lexical: the steps under test are the only other order."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import asyncpg

from memento_memory_api.recall import relevance
from memento_memory_api.recall.filters import Filters
from memento_memory_api.repositories import fragments as repo
from memento_memory_api.uow import Scope
from memento_shared.db.rls import transaction_as
from tests.fixtures.apps import memory_api_on
from tests.integration.test_recall_filters import QUERY as QUERY_WORDS
from tests.integration.test_recall_filters import Store, memory_api_with

SAID = "(1:56 pm on 8 May, 2023)"
QUESTION = "When did Caroline join the support group at the community centre?"


async def remember(api, tenant: str, content: str, source: str) -> str:
    body = await api.call(
        "remember", {"content": content, "topic": "chat", "type": "fact", "source": source}, tenant=tenant
    )
    return body["result"]["id"]


async def recall(api, tenant: str, text: str) -> list[str]:
    body = await api.call("recall", {"text": text, "includeLinks": False}, tenant=tenant)
    return [f["id"] for f in body["result"]["fragments"]]


async def test_a_write_records_its_place_its_time_and_its_names(memory_api, tenant, owner_pool):
    fragment = await remember(memory_api, tenant, f"Caroline {SAID}: I went to the support group yesterday", "D1:3")
    row = await owner_pool.fetchrow(
        "SELECT thread, seq, event_from, event_to, event_said, expansion FROM agent_memory.fragments WHERE id = $1",
        fragment,
    )
    assert (row["thread"], row["seq"]) == ("D1", 3)
    assert row["event_said"] == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)  # the text's own header, not the write time
    assert (row["event_from"], row["event_to"]) == (datetime(2023, 5, 7, tzinfo=UTC), datetime(2023, 5, 8, tzinfo=UTC))
    assert "caroline" in row["expansion"].split()

    await memory_api.call(
        "amend", {"id": fragment, "content": f"Caroline {SAID}: I went there last week"}, tenant=tenant
    )
    row = await owner_pool.fetchrow(
        "SELECT thread, seq, event_from FROM agent_memory.fragments WHERE id = $1", fragment
    )
    assert (row["thread"], row["seq"]) == ("D1", 3)  # an amend keeps the place and reads the time again
    assert row["event_from"] == datetime(2023, 5, 1, tzinfo=UTC)  # the week before Monday 8 May 2023


async def test_a_reply_is_found_by_the_question_asked_before_it(memory_api, tenant):
    asked = await remember(memory_api, tenant, f"Melanie {SAID}: Did you finish the pottery workshop?", "D2:1")
    reply = await remember(memory_api, tenant, f"Caroline {SAID}: Yes! I made a blue bowl there", "D2:2")
    for n, text in enumerate(["The weather turned cold", "Rex chased the neighbour's cat", "We painted the fence"]):
        await remember(memory_api, tenant, f"Caroline {SAID}: {text}", f"D5:{n + 1}")  # another session

    found = await recall(memory_api, tenant, "What did Caroline make at the pottery workshop?")
    # the reply, which holds none of "pottery workshop", joins beside the turn that holds them; that turn asks a
    # question, so its answer comes first (issue 53: the answer lift and the question discount)
    assert found[:2] == [reply, asked]


async def test_a_when_question_prefers_the_memory_that_names_a_time(settings, tenant):
    async with memory_api_on(settings) as api:
        dated = await remember(api, tenant, f"Caroline {SAID}: I joined the support group yesterday", "D3:1")
        undated = await remember(api, tenant, f"Caroline {SAID}: the support group at the community centre", "D4:1")
        assert (await recall(api, tenant, QUESTION))[0] == dated
    async with memory_api_on(settings.model_copy(update={"recall_time_boost": 0.0})) as api:
        # without the boost the memory holding more of the question's words comes first: the boost ordered them
        assert (await recall(api, tenant, QUESTION))[0] == undated


async def test_neighbours_are_read_nearest_first_on_both_sides(memory_api, tenant, servers):
    ids = [await remember(memory_api, tenant, f"Caroline {SAID}: turn {n} of the garden", f"D7:{n}") for n in range(8)]
    scope = Scope(tenant, "default", "default")
    conn = await asyncpg.connect(servers.owner_url)
    try:
        async with transaction_as(conn, tenant_id=tenant, workspace="default", agent_id="default"):
            rows = {r["id"]: r for r in await repo.fetch_by_ids(conn, ids)}
            near, near_rows = await relevance.read_neighbours(
                conn, scope, None, [rows[ids[6]], rows[ids[3]]], 2, Filters()
            )
    finally:
        await conn.close()
    nearest = near[ids[3]]  # nearest first, both sides (ties by id)
    assert (set(nearest[:2]), set(nearest[2:])) == ({ids[2], ids[4]}, {ids[1], ids[5]})
    assert set(near[ids[6]][:2]) == {ids[5], ids[7]}  # its nearest, one a side
    assert set(near[ids[6]]) == {ids[4], ids[5], ids[7]}  # the thread ends after ids[7]
    assert set(near_rows) == {ids[1], ids[2], ids[4], ids[5], ids[7]}  # each row once


async def test_a_question_asked_again_is_ordered_the_same(servers, owner_pool, tenant):
    # neighbours are read for the lexical list's candidates while the model embeds; a candidate only the vector list
    # found gets none (reading them would wait for the vector). The first asking waits for the model, the second
    # finds the query's vector cached: it must still read the same neighbours, not those of every candidate
    async with memory_api_with(servers, delay_s=0.3) as api:
        store = Store(api, owner_pool, tenant)
        by_words = await store.remember(
            f"Caroline {SAID}: the {QUERY_WORDS} is back", "chat", cosine=0.5, source="D8:1"
        )
        its_reply = await store.remember(f"Melanie {SAID}: I will call the electrician", "chat", source="D8:2")
        by_meaning = await store.remember(
            f"Melanie {SAID}: did the hallway light break?", "chat", cosine=0.95, source="D9:1"
        )
        other_reply = await store.remember(f"Caroline {SAID}: yes, it needs a new bulb", "chat", source="D9:2")
        first = [f["id"] for f in await store.recall()]
        again = [f["id"] for f in await store.recall()]
    assert first == again
    assert {by_words, by_meaning, its_reply} <= set(first)  # the lexical hit's reply joins (context list, lift)
    assert other_reply not in first


async def test_neighbours_pass_the_searchs_own_filters(memory_api, tenant, servers, owner_pool):
    # the statement is written per set of filters given (neighbours_sql): each one must still hold for neighbours
    ids = [await remember(memory_api, tenant, f"Caroline {SAID}: turn {n} of the porch", f"D9:{n}") for n in range(9)]
    await owner_pool.execute("UPDATE agent_memory.fragments SET importance = 0.5 WHERE id = ANY($1)", ids)
    for n, change in {
        1: "importance = 0.95",
        2: "agent_id = 'someone-else'",
        3: "topic = 'other'",
        5: f"superseded_by = '{ids[8]}'",
        6: "type = 'decision'",
        7: "keywords = keywords || '{trellis}'",
    }.items():
        await owner_pool.execute(f"UPDATE agent_memory.fragments SET {change} WHERE id = $1", ids[n])
    scope = Scope(tenant, "default", "default", access="admin")
    conn = await asyncpg.connect(servers.owner_url)
    await conn.set_type_codec("jsonb", encoder=json.dumps, decoder=json.loads, schema="pg_catalog")  # as pools do
    try:
        async with transaction_as(conn, tenant_id=tenant, workspace="default", agent_id="default", access="admin"):
            middle = (await repo.fetch_by_ids(conn, [ids[4]]))[0]

            async def near(agents=None, **filters) -> set[int]:
                found = (await relevance.read_neighbours(conn, scope, agents, [middle], 2, Filters(**filters)))[0]
                return {ids.index(i) for i in found.get(ids[4], [])}

            assert await near() == {2, 3, 6, 7}  # the superseded turn 5 is skipped: the next live one stands in
            assert await near(superseded=True) == {2, 3, 5, 6}
            assert await near(topic="chat") == {1, 2, 6, 7}
            assert await near(type="fact") == {2, 3, 7, 8}
            assert await near(agents=["default"]) == {1, 3, 6, 7}
            assert await near(tags=["trellis"]) == {7}
            assert await near(narrow={"min_importance": 0.9}) == {1}
            assert await near(["default"], topic="chat", type="fact") == {0, 1, 7, 8}
    finally:
        await conn.close()

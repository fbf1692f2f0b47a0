"""The second hop (issue 53; recall.hops) on real Postgres with pgvector, through `recall`: a question asking for a list
of things about someone finds the memories naming them that share neither its words nor its meaning, never moves the
best rows before it, and reads only rows the search may return (its filters, the caller's tenant)."""

from __future__ import annotations

import secrets

import asyncpg
import pytest
from pgvector.asyncpg import register_vector

from memento_memory_api.recall import hops
from memento_memory_api.recall.filters import Filters
from memento_memory_api.uow import Scope
from memento_shared.db.rls import transaction_as
from memento_shared.text.links import asked
from tests.integration.test_recall_filters import DIM, PROFILE, Q, Store, memory_api_with

SAID = "(1:56 pm on 8 May, 2023)"
QUESTION = "Which cities has John been to?"


@pytest.fixture
def other_tenant() -> str:
    return "t-" + secrets.token_hex(6)


async def _conversation(store: Store) -> dict[str, str]:
    """John's turns: one says what cities he likes (close to the question), two name where he went in words the
    question does not use (far from it), a dozen say other things nearer to it; Maria went somewhere too."""
    ids = {
        "direct": await store.remember(
            f"John {SAID}: The cities I love most are the ones by the sea", "chat", cosine=0.9, source="D1:1"
        ),
        "chicago": await store.remember(
            f"John {SAID}: I was in Chicago last month, the locals were friendly", "chat", cosine=0.05, source="D3:2"
        ),
        "rome": await store.remember(
            f"John {SAID}: Took a short trip to Rome to clear my mind", "chat", cosine=0.05, source="D7:4"
        ),
        "maria": await store.remember(f"Maria {SAID}: I was in Paris once", "chat", cosine=0.05, source="D3:3"),
    }
    for n in range(12):
        ids[f"other{n}"] = await store.remember(
            f"John {SAID}: practice {n} went well, the coach was happy", "chat", cosine=0.3 + n / 40, source=f"D9:{n}"
        )
    return ids


ASKING = {"text": QUESTION, "includeLinks": False, "tokenBudget": 100_000}


async def _ranked(servers, owner_pool, tenant: str, hop: str | None) -> tuple[list[str], dict[str, str]]:
    """The conversation stored and the question asked, with the hop at weight `hop` (None: the default)."""
    env = {"RECALL_HOP": hop} if hop is not None else {}
    async with memory_api_with(servers, query=QUESTION, **env) as api:
        ids = await _conversation(Store(api, owner_pool, tenant))
        body = await api.call("recall", ASKING, tenant=tenant)
    return [f["id"] for f in body["result"]["fragments"]], ids


async def test_a_list_question_finds_the_places_its_person_named(servers, owner_pool, tenant):
    found, ids = await _ranked(servers, owner_pool, tenant, None)
    assert found[0] == ids["direct"]
    # by the person and the kind of thing asked for, right after the three best rows before the hop, which it keeps
    assert set(found[3:5]) == {ids["chicago"], ids["rome"]}
    assert found.index(ids["maria"]) > 5  # a place, but not John's


async def test_without_the_hop_they_stay_below_the_rows_nearer_the_question(servers, owner_pool, tenant):
    found, ids = await _ranked(servers, owner_pool, tenant, "0")
    assert found.index(ids["chicago"]) > 10 and found.index(ids["rome"]) > 10


ACTIVITIES = "What activities has Melanie done with her family?"


async def _activities(servers, owner_pool, tenant: str, **env: str) -> tuple[list[str], dict[str, str]]:
    """Melanie's turns: one close to the question, two that name what she did with her kids in words it does not use
    and far from its meaning, a dozen nearer that name no activity; Caroline went hiking."""
    async with memory_api_with(servers, query=ACTIVITIES, **env) as api:
        store = Store(api, owner_pool, tenant)
        ids = {
            "direct": await store.remember(f"Melanie {SAID}: Family time is what I love most", "chat", cosine=0.9),
            "swim": await store.remember(f"Melanie {SAID}: I'm off to go swimming with the kids", "chat", cosine=0.05),
            "camp": await store.remember(f"Melanie {SAID}: We camped by the lake last weekend", "chat", cosine=0.05),
            "caroline": await store.remember(f"Caroline {SAID}: I went hiking on Sunday", "chat", cosine=0.05),
        }
        for n in range(12):
            ids[f"other{n}"] = await store.remember(
                f"Melanie {SAID}: day {n} was busy, the house was loud", "chat", cosine=0.3 + n / 40
            )
        body = await api.call("recall", {**ASKING, "text": ACTIVITIES}, tenant=tenant)
    return [f["id"] for f in body["result"]["fragments"]], ids


async def test_a_list_question_finds_the_activities_its_person_did(servers, owner_pool, tenant):
    found, ids = await _activities(servers, owner_pool, tenant)
    assert found[0] == ids["direct"]
    assert set(found[3:5]) == {ids["swim"], ids["camp"]}  # marked =activity on write: swimming, camped
    assert found.index(ids["caroline"]) > 5  # an activity, but not Melanie's


async def test_without_the_word_kinds_the_activities_stay_far_down(servers, owner_pool, tenant):
    found, ids = await _activities(servers, owner_pool, tenant, RECALL_HOP_WORD_KINDS="false")
    assert found.index(ids["swim"]) > 10 and found.index(ids["camp"]) > 10


async def test_the_hop_never_moves_the_best_rows_before_it(servers, owner_pool, tenant):
    plain, _ = await _ranked(servers, owner_pool, tenant, "0")
    async with memory_api_with(servers, query=QUESTION, RECALL_HOP="16", RECALL_HOP_KEEP="5") as api:
        body = await api.call("recall", ASKING, tenant=tenant)  # the same memories, the hop at its heaviest
    heaviest = [f["id"] for f in body["result"]["fragments"]]
    assert heaviest[:5] == plain[:5] and heaviest != plain


async def test_the_hop_reads_only_rows_the_search_may_return(servers, owner_pool, tenant, other_tenant):
    async with memory_api_with(servers) as api:
        mine = Store(api, owner_pool, tenant)
        theirs = Store(api, owner_pool, other_tenant)
        chicago = await mine.remember(f"John {SAID}: I was in Chicago last month", "chat", cosine=0.1)
        boston = await mine.remember(f"John {SAID}: We drove to Boston", "work", cosine=0.1)
        await theirs.remember(f"John {SAID}: I was in Denver last month", "chat", cosine=0.1)
    ask = asked(QUESTION)
    assert ask is not None
    conn = await asyncpg.connect(servers.owner_url)
    await register_vector(conn)
    try:
        async with transaction_as(conn, tenant_id=tenant, workspace="default", agent_id="default"):
            scope = Scope(tenant, "default", "default")
            every = await hops.read(conn, scope, None, PROFILE, DIM, ask, [], Filters())
            chat = await hops.read(conn, scope, None, PROFILE, DIM, ask, [], Filters(topic="chat"))
            newest = await hops.read(conn, scope, None, PROFILE, DIM, ask, [], Filters(), limit=1)
    finally:
        await conn.close()
    assert {r["id"] for r in every} == {chicago, boston}  # never the other tenant's Denver
    assert [r["id"] for r in chat] == [chicago]
    assert [r["id"] for r in newest] == [boston]  # RECALL_HOP_ROWS: the newest rows, at most that many
    ranked = hops.rank(every, ask, [], frozenset({"citi", "john"}), Q)
    assert set(ranked) == {chicago, boston}


async def test_row_level_security_still_bounds_the_hops_statement(servers, owner_pool, app_pool, tenant, other_tenant):
    """Under the services' role (RLS forced): the statement gives the principal's rows, never another tenant's, even
    when it is asked for that tenant's scope."""
    async with memory_api_with(servers) as api:
        mine = await Store(api, owner_pool, tenant).remember(f"John {SAID}: I was in Chicago last month", "chat")
        await Store(api, owner_pool, other_tenant).remember(f"John {SAID}: I was in Denver last month", "chat")
    ask = asked(QUESTION)
    assert ask is not None
    async with app_pool.acquire() as conn:
        await register_vector(conn)
        for scope in (Scope(tenant, "default", "default"), Scope(other_tenant, "default", "default")):
            async with transaction_as(conn, tenant_id=tenant, workspace="default", agent_id="default"):
                rows = await hops.read(conn, scope, ["default"], PROFILE, DIM, ask, [], Filters())
            assert [r["id"] for r in rows] == ([mine] if scope.tenant_id == tenant else [])

"""Rounds (issue 53, item 3) on real Postgres with pgvector: the server scores each vector hit and the rows beside it
by their round's vector (the row twice and its nearest neighbour on each side), as numpy does; a reply whose own
vector is far from the question's comes ahead of a lone turn nearer to it when the turn before it is close; and a
neighbour the search's filters leave out joins no round."""

from __future__ import annotations

import asyncpg
import numpy as np
from pgvector.asyncpg import register_vector

from memento_memory_api.recall import rounds
from memento_memory_api.recall.filters import Filters
from memento_memory_api.repositories import fragments as repo
from memento_memory_api.uow import Scope
from memento_shared.db.rls import transaction_as
from tests.integration.test_recall_filters import DIM, PROFILE, Q, Store, at_cosine, memory_api_with

SAID = "(1:56 pm on 8 May, 2023)"


async def _vectors(owner_pool, ids: list[str]) -> dict[str, np.ndarray]:
    async with owner_pool.acquire() as conn:
        await register_vector(conn)
        found = await conn.fetch(
            "SELECT fragment_id, embedding::real[] AS embedding FROM agent_memory.fragment_embeddings"
            " WHERE fragment_id = ANY($1)",
            ids,
        )
    return {r["fragment_id"]: np.asarray(r["embedding"], dtype=np.float64) for r in found}


def _cosine(v: np.ndarray) -> float:
    return float(v @ Q / np.linalg.norm(v))


async def test_rounds_are_scored_as_numpy_scores_them_and_pass_the_filters(servers, owner_pool, tenant):
    async with memory_api_with(servers) as api:
        store = Store(api, owner_pool, tenant)
        turns = [
            await store.remember(f"Caroline {SAID}: turn {n}", "chat", cosine=c, source=f"D1:{n}")
            for n, c in enumerate([0.1, 0.2, 0.9, 0.3, 0.0, 0.4])
        ]
        lone = await store.remember("a note with no thread", "chat", cosine=0.5)
    await owner_pool.execute("UPDATE agent_memory.fragments SET topic = 'other' WHERE id = $1", turns[3])
    vectors = await _vectors(owner_pool, [*turns, lone])
    scope = Scope(tenant, "default", "default")
    conn = await asyncpg.connect(servers.owner_url)
    await register_vector(conn)
    try:
        async with transaction_as(conn, tenant_id=tenant, workspace="default", agent_id="default"):
            hits = await repo.fetch_by_ids(conn, [turns[2], lone])

            async def scored(**filters) -> dict[str, float]:
                ranked, rows = await rounds.read(conn, scope, None, PROFILE, DIM, hits, Q, Filters(**filters))
                assert ranked == sorted(rows, key=lambda i: -rows[i]["round_similarity"])
                return {i: rows[i]["round_similarity"] for i in ranked}

            every = await scored()
            of_chat = await scored(topic="chat")
    finally:
        await conn.close()
    v = [vectors[t] for t in turns]
    # the hit and the row on each side of it, each with its own nearest neighbours; the lone note alone
    assert set(every) == {turns[1], turns[2], turns[3], lone}
    assert abs(every[turns[2]] - _cosine(2 * v[2] + v[1] + v[3])) < 1e-4
    assert abs(every[turns[1]] - _cosine(2 * v[1] + v[0] + v[2])) < 1e-4
    assert abs(every[turns[3]] - _cosine(2 * v[3] + v[2] + v[4])) < 1e-4
    assert abs(every[lone] - _cosine(vectors[lone])) < 1e-4
    # a filter holds for the rows beside a hit too: turn 3 is of another topic, so with topic "chat" the hit's next
    # row is turn 4, and the rounds are made of what the search may return
    assert set(of_chat) == {turns[1], turns[2], turns[4], lone}
    assert abs(of_chat[turns[2]] - _cosine(2 * v[2] + v[1] + v[4])) < 1e-4
    assert abs(of_chat[turns[4]] - _cosine(2 * v[4] + v[2] + v[5])) < 1e-4


async def test_a_reply_comes_ahead_of_a_nearer_lone_turn_by_its_round(servers, owner_pool, tenant):
    # the other steps off, and the rounds list at weight 2 (at 1, the reply's and the lone turn's ranks in the two
    # vector lists mirror each other and they tie; the default weight is chosen on LoCoMo)
    env = {"RECALL_LIFT": "0", "RECALL_ANSWER_LIFT": "0", "RECALL_QUESTION_DISCOUNT": "0", "RECALL_CONTEXT_WEIGHT": "0"}
    for weight, reply_first in (("2", True), ("0", False)):
        async with memory_api_with(servers, RECALL_ROUNDS=weight, **env) as api:
            store = Store(api, owner_pool, tenant)
            if weight == "2":
                await store.remember(f"Melanie {SAID}: how is the new lamp doing?", "chat", cosine=0.9, source="D2:1")
                reply = await store.remember(
                    f"Caroline {SAID}: it stopped, all good", "chat", cosine=0.2, source="D2:2"
                )
                lone = await store.remember(f"Caroline {SAID}: the shed roof leaks", "chat", cosine=0.35, source="D3:1")
                for n in range(2, 6):  # the lone turn's session goes on about other things
                    await store.remember(f"Caroline {SAID}: garden {n}", "chat", cosine=-0.3, source=f"D3:{n}")
            found = [f["id"] for f in await store.recall()]
            assert (found.index(reply) < found.index(lone)) is reply_first, weight


def test_a_fragment_vector_at_a_cosine_is_at_that_cosine():
    # the fixture the tests above build on
    assert abs(float(at_cosine(0.3) @ Q) - 0.3) < 1e-5

"""What each read asks the model for (issue 46): the question of its text, once per call, whichever dialect asks.

The embedder is a loopback server speaking /v1/embeddings that notes every text it is sent, so the test sees exactly
what memory-api asked the model to read."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from memento_memory_api.recall.question import question
from tests.integration.test_simple_dialect import Embedder, simple_api

ASKED = "Can you look at the retry logic in orders-api and tell me whether it backs off correctly?"


def turn(asked: str = ASKED) -> str:
    """A paragraph around one question, longer than any bound's whole text."""
    return (
        "I deployed orders-api this morning and the Kafka dashboards looked normal for the first hour. "
        "After that the error rate climbed and the logs started showing ECONNRESET every few minutes. "
        f"{asked} Please keep the fix small, since we are close to the end of the sprint."
    )


def asked_of(text: str) -> str:
    """What a read of turn(text) embeds: the question with the sentence before it, never the whole paragraph."""
    embedded = question(turn(text), 32)
    assert embedded.endswith(text) and len(embedded) < len(turn(text)) / 2
    return embedded


class NotingEmbedder(Embedder):
    def __init__(self) -> None:
        super().__init__()
        self.asked: list[tuple[str, str]] = []  # (input_type, text), in the order asked
        self.delay_s = 0.0

    async def answer(self, request, body: dict) -> dict:
        self.asked += [(body.get("input_type", "query"), t) for t in body["input"]]
        await asyncio.sleep(self.delay_s)
        return await super().answer(request, body)

    def take(self) -> list[tuple[str, str]]:
        asked, self.asked = self.asked, []
        return asked


def user(text: str) -> dict:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


async def result(api, tool: str, arguments: dict, tenant: str) -> dict:
    answer = await api.call(tool, arguments, tenant=tenant)
    assert "result" in answer, answer
    return answer["result"]


async def test_every_read_embeds_its_question_once(servers, tenant):
    assert question(turn(), 32) == ASKED
    embedder = NotingEmbedder()
    future = (datetime.now(UTC) + timedelta(days=3)).isoformat()
    async with simple_api(servers, embedder) as api:
        await result(api, "memento_skip_add", {"item": "ledger restarts", "reason": "close", "expires": future}, tenant)
        await result(api, "memento_store", {"content": "orders-api retries three times with backoff"}, tenant)
        embedder.take()

        # the context's memories and its skip list's meaning match share one model call of the message's question,
        # though both wait for it at once (a model call as slow as a long one here)
        embedder.delay_s = 0.3
        await result(api, "memento_context", {"message": turn()}, tenant)
        # and the memory just stored, which has no vector yet (no worker here): embedded once as a passage beside
        # the question (recall.fresh), then kept (written back, and cached meanwhile): no read below asks for it again
        assert sorted(embedder.take()) == [
            ("document", "orders-api retries three times with backoff"),
            ("query", ASKED),
        ]
        embedder.delay_s = 0.0

        # a turn: the question of its last user message, though the whole turn is searched by its words
        earlier = "Yesterday we talked about the billing worker."
        await result(
            api,
            "memory_before_turn",
            {"session_id": "s1", "turn_id": "t1", "current_input": [user(earlier), user(turn("Is the turn asked?"))]},
            tenant,
        )
        assert embedder.take() == [("query", asked_of("Is the turn asked?"))]

        for tool, text in (
            ("recall", "Does recall ask?"),
            ("search_memories", "Does search_memories ask?"),
            ("memento_recall", "Does memento_recall ask?"),
            ("memory.search", "Does memory.search ask?"),
        ):
            argument = "text" if tool == "recall" else "query"
            await result(api, tool, {argument: turn(text)}, tenant)
            assert embedder.take() == [("query", asked_of(text))], tool
            # asked again: the vector is reused, no model call at all
            await result(api, tool, {argument: turn(text)}, tenant)
            assert embedder.take() == [], tool

        # a short question is read whole
        await result(api, "recall", {"text": "which queue library did we pick?"}, tenant)
        assert embedder.take() == [("query", "which queue library did we pick?")]


async def test_store_memory_embeds_its_text_once_and_searches_with_that_vector(servers, tenant, owner_pool):
    embedder = NotingEmbedder()
    async with simple_api(servers, embedder) as api:
        stored = await result(api, "store_memory", {"content": "The staging cluster runs Postgres 17"}, tenant)
    assert embedder.take() == [("document", "The staging cluster runs Postgres 17")]
    embedded = await owner_pool.fetchval(
        "SELECT count(*) FROM agent_memory.fragment_embeddings WHERE fragment_id = $1", stored["created"]["id"]
    )
    assert embedded == 1


async def test_a_turn_does_not_embed_fresh_facts_its_own_session_hands_back(servers, tenant):
    """A turn's facts, written moments ago and not embedded yet, go back to the model word for word in the next
    turn's recall block (the session's recent items): memory_before_turn scores none of them by meaning, while another
    session's turn and search_memories do (issue 47's fresh rows), each sharing one model call for them."""
    embedder = NotingEmbedder()
    fact = "The billing worker retries failed charges four times."
    async with simple_api(servers, embedder) as api:
        committed = await result(
            api,
            "memory_after_turn",
            {"session_id": "s1", "turn_id": "t1", "input_items": [user(fact)], "output_items": []},
            tenant,
        )
        assert committed["indexed"] is False  # no worker runs here: the fact waits for its vector
        embedder.take()
        asked = {"session_id": "s1", "turn_id": "t2", "current_input": [user("How often are charges retried?")]}
        await result(api, "memory_before_turn", asked, tenant)
        assert embedder.take() == [("query", "How often are charges retried?")]
        other = {**asked, "session_id": "s2", "current_input": [user("Are failed charges retried?")]}
        await result(api, "memory_before_turn", other, tenant)
        assert sorted(embedder.take()) == [("document", fact), ("query", "Are failed charges retried?")]

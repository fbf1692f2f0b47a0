"""Facts an LLM draws from a stored memory (issue 28), written by the evaluator through the real `openai` and
`google-genai` clients against loopback servers speaking their wire formats: the facts land in fragments.facts and
recall finds the memory by a word only they hold; a model answering garbage, or failing for good, leaves facts NULL
and the evaluation done; 500s then success; an amend while the model answers keeps the stale facts out, and an amend
of the content clears them. Nothing of the memory or its facts reaches a log line."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
from collections.abc import AsyncIterator

import pytest

from memento_evaluator import service
from memento_evaluator.handlers import evaluate_fragment
from memento_shared.text import facts as text_facts
from memento_shared.worker import Runtime, close_runtime, open_runtime
from tests.integration.test_protocol_llm import gemini, openai_chat

CONTENT = "Gina: I finally opened my studio downtown last week, after losing my job at Door Dash in January 2023!"
FACTS = [
    "Gina opened her dance studio downtown last week",
    "Gina lost her job at Door Dash in January 2023",
]
ONLY_IN_FACTS = "dance"  # a word the content does not hold
IN_FACTS_BY_STEM = "dancing"  # the same word in another form: found through the facts' stems (issue 53)
AMENDED = "Gina: the studio moved to the riverside warehouse in March."
AMENDED_FACTS = ["Gina's studio moved to a riverside warehouse in March"]


def answer_with(facts: list[str]):
    return lambda body: "Here are the facts:\n```json\n" + json.dumps(facts) + "\n```\nLet me know if you need more."


@contextlib.asynccontextmanager
async def evaluator(servers, server, provider: str, **env: str) -> AsyncIterator[Runtime]:
    """The evaluator's runtime as its process composes it (service.setup), with the model at the loopback server."""
    base = server.url + "/v1" if provider == "openai" else server.url
    settings = servers.settings(
        LLM_PROVIDER=provider, LLM_MODEL="test-model", LLM_BASE_URL=base, LLM_API_KEY="sk-loopback", **env
    )
    rt = await open_runtime("evaluator", settings, 4)
    try:
        await service.setup(rt)
        try:
            yield rt
        finally:
            await service.teardown(rt)
    finally:
        await close_runtime(rt)


def event(fragment_id: str, kind: str = "fragment.stored") -> dict:
    return {"payload": {"fragment_id": fragment_id}, "event_type": kind}


async def remember(memory_api, tenant: str, content: str = CONTENT) -> str:
    stored = await memory_api.call("remember", {"content": content, "topic": "gina", "type": "fact"}, tenant=tenant)
    return stored["result"]["id"]


async def row_of(owner_pool, fragment_id: str) -> dict:
    row = await owner_pool.fetchrow(
        "SELECT facts, quality_score, verified_at >= updated_at AS judged FROM agent_memory.fragments WHERE id = $1",
        fragment_id,
    )
    return dict(row)


async def recalled(memory_api, tenant: str, text: str) -> list[str]:
    found = await memory_api.call("recall", {"text": text, "includeLinks": False}, tenant=tenant)
    return [f["id"] for f in found["result"]["fragments"]]


@pytest.fixture
def logs(caplog):
    caplog.set_level(logging.DEBUG)
    yield caplog
    said = [CONTENT, AMENDED, *FACTS, *AMENDED_FACTS, "studio", "Door Dash"]
    for record in caplog.get_records("setup") + caplog.get_records("call"):  # this test's, whole
        line = record.getMessage() + " " + " ".join(str(v) for v in record.__dict__.values())
        leaked = [text for text in said if text.lower() in line.lower()]
        assert not leaked, f"{record.name} logged memory text: {record.getMessage()}"


async def test_facts_from_openai_are_written_and_found_by_recall(servers, memory_api, tenant, owner_pool, logs):
    with openai_chat(answer_with(FACTS)) as server:
        frag_id = await remember(memory_api, tenant)
        assert frag_id not in await recalled(memory_api, tenant, ONLY_IN_FACTS), "no fact yet: nothing holds the word"
        assert frag_id not in await recalled(memory_api, tenant, IN_FACTS_BY_STEM)
        async with evaluator(servers, server, "openai") as rt:
            await evaluate_fragment(event(frag_id), rt)
            await evaluate_fragment(event(frag_id), rt)  # a re-delivered event: judged, facts present, no call
    row = await row_of(owner_pool, frag_id)
    assert row["facts"] == "\n".join(FACTS) and row["quality_score"] is not None and row["judged"]
    assert frag_id in await recalled(memory_api, tenant, ONLY_IN_FACTS)
    assert frag_id in await recalled(memory_api, tenant, IN_FACTS_BY_STEM)  # "dancing" meets the fact's "dance"
    expansion = (
        await owner_pool.fetchval("SELECT expansion FROM agent_memory.fragments WHERE id = $1", frag_id)
    ).split()
    assert "danc" in expansion and "gina" in expansion  # the facts' stems after the write's own expansion
    [request] = server.requests
    system, user = request.body["messages"]
    assert request.body["model"] == "test-model" and request.headers["authorization"] == "Bearer sk-loopback"
    assert system == {"role": "system", "content": text_facts.SYSTEM}
    assert CONTENT in user["content"] and "gina" in user["content"]


async def test_the_names_the_facts_give_join_the_memorys_entities(servers, memory_api, tenant, owner_pool, logs):
    # issue 53 item 4: what the model reads in a memory feeds the links recall's second hop follows
    with openai_chat(answer_with([*FACTS, "Gina danced in Austin with Jon in May 2023"])) as server:
        frag_id = await remember(memory_api, tenant)
        written = await owner_pool.fetchval("SELECT entities FROM agent_memory.fragments WHERE id = $1", frag_id)
        async with evaluator(servers, server, "openai") as rt:
            await evaluate_fragment(event(frag_id), rt)
    entities = await owner_pool.fetchval("SELECT entities FROM agent_memory.fragments WHERE id = $1", frag_id)
    assert "s:gina" in written and "p:austin" not in written
    assert set(written) < set(entities)  # the write's own stay
    assert {"p:austin", "n:jon", "=place"} <= set(entities) and "n:gina" not in entities  # Gina is its speaker


async def test_a_memory_written_before_its_entities_gets_its_own_beside_the_facts(
    servers, memory_api, tenant, owner_pool, logs
):
    # a row written before migration 0025 (entities NULL): the facts' names join the content's own, not alone, so
    # the second hop still finds it by its speaker
    with openai_chat(answer_with(["Gina danced in Austin with Jon in May 2023"])) as server:
        frag_id = await remember(memory_api, tenant)
        await owner_pool.execute("UPDATE agent_memory.fragments SET entities = NULL WHERE id = $1", frag_id)
        async with evaluator(servers, server, "openai") as rt:
            await evaluate_fragment(event(frag_id), rt)
    entities = await owner_pool.fetchval("SELECT entities FROM agent_memory.fragments WHERE id = $1", frag_id)
    assert "s:gina" in entities and {"p:austin", "n:jon"} <= set(entities)


async def test_facts_from_gemini_through_google_genai(servers, memory_api, tenant, owner_pool, logs):
    with gemini(answer_with(FACTS[:1])) as server:
        frag_id = await remember(memory_api, tenant)
        async with evaluator(servers, server, "gemini") as rt:
            await evaluate_fragment(event(frag_id), rt)
    assert (await row_of(owner_pool, frag_id))["facts"] == FACTS[0]
    [request] = server.requests
    assert request.path.endswith("/models/test-model:generateContent")
    assert CONTENT in json.dumps(request.body) and "JSON array of strings" in json.dumps(request.body)


@pytest.mark.parametrize(
    "answer",
    ["I cannot list facts for this text.", '{"facts": "Gina opened a dance studio"}', '[1, {"fact": 2}, null, "  "]'],
    ids=["prose", "an-object", "no-strings"],
)
async def test_a_model_answering_garbage_leaves_no_facts_and_the_evaluation_done(
    servers, memory_api, tenant, owner_pool, logs, answer
):
    with openai_chat(lambda body: answer) as server:
        frag_id = await remember(memory_api, tenant)
        async with evaluator(servers, server, "openai") as rt:
            await evaluate_fragment(event(frag_id), rt)
    row = await row_of(owner_pool, frag_id)
    assert row["facts"] is None and row["quality_score"] is not None and row["judged"]
    assert len(server.requests) == 1, "a clear answer is not asked again"


async def test_500s_then_success_writes_the_facts(servers, memory_api, tenant, owner_pool, logs):
    with openai_chat(answer_with(FACTS)) as server:
        server.fail_next(500, times=2)
        frag_id = await remember(memory_api, tenant)
        async with evaluator(servers, server, "openai", LLM_MAX_ATTEMPTS="3") as rt:
            await evaluate_fragment(event(frag_id), rt)
    assert (await row_of(owner_pool, frag_id))["facts"] == "\n".join(FACTS)
    assert len(server.requests) == 3


async def test_a_model_failing_for_good_leaves_no_facts_and_does_not_fail_the_evaluation(
    servers, memory_api, tenant, owner_pool, logs
):
    with openai_chat(answer_with(FACTS)) as server:
        server.fail_always(500)
        frag_id = await remember(memory_api, tenant)
        async with evaluator(servers, server, "openai", LLM_MAX_ATTEMPTS="2") as rt:
            await evaluate_fragment(event(frag_id), rt)  # does not raise: nothing to retry or dead-letter
            row = await row_of(owner_pool, frag_id)
            assert row["facts"] is None and row["quality_score"] is not None and row["judged"]
            assert len(server.requests) == 2
            # a re-delivered event of a judged fragment without facts asks again (a crash may have cut them short)
            server.recover()
            await evaluate_fragment(event(frag_id), rt)
    assert (await row_of(owner_pool, frag_id))["facts"] == "\n".join(FACTS)
    failures = [r for r in logs.records if r.getMessage() == "llm.failed"]
    assert [r.error_type for r in failures] == ["answered 500", "answered 500"] and failures[-1].giving_up


async def test_an_amend_while_the_model_answers_keeps_the_stale_facts_out(
    servers, memory_api, tenant, owner_pool, logs
):
    asked, amended = threading.Event(), threading.Event()

    def reply(body: dict) -> str:
        if CONTENT in body["messages"][1]["content"]:
            asked.set()
            amended.wait(30)  # the loopback server's own thread: holds this answer until the amend is committed
            return answer_with(FACTS)(body)
        return answer_with(AMENDED_FACTS)(body)

    with openai_chat(reply) as server:
        frag_id = await remember(memory_api, tenant)
        # a long per-attempt timeout: the held answer must not be retried however slow the amend is under load
        async with evaluator(servers, server, "openai", LLM_TIMEOUT_SECONDS="120") as rt:
            running = asyncio.create_task(evaluate_fragment(event(frag_id), rt))
            try:
                assert await asyncio.to_thread(asked.wait, 30), "the model was asked"
                await memory_api.call("amend", {"id": frag_id, "content": AMENDED}, tenant=tenant)
            finally:
                amended.set()
            await running
            assert (await row_of(owner_pool, frag_id))["facts"] is None, "facts of the old content were written"
            await evaluate_fragment(event(frag_id, "fragment.amended"), rt)  # the amend's own event
    row = await row_of(owner_pool, frag_id)
    assert row["facts"] == AMENDED_FACTS[0] and row["judged"]
    assert [AMENDED in r.body["messages"][1]["content"] for r in server.requests] == [False, True]


async def test_an_amend_of_the_content_clears_the_facts_and_other_amends_keep_them(
    servers, memory_api, tenant, owner_pool, logs
):
    with openai_chat(answer_with(FACTS)) as server:
        frag_id = await remember(memory_api, tenant)
        async with evaluator(servers, server, "openai") as rt:
            await evaluate_fragment(event(frag_id), rt)
    assert (await row_of(owner_pool, frag_id))["facts"] == "\n".join(FACTS)
    await memory_api.call("amend", {"id": frag_id, "importance": 0.9}, tenant=tenant)
    assert (await row_of(owner_pool, frag_id))["facts"] == "\n".join(FACTS), "the content is the same"
    await memory_api.call("amend", {"id": frag_id, "content": AMENDED}, tenant=tenant)
    assert (await row_of(owner_pool, frag_id))["facts"] is None
    assert frag_id not in await recalled(memory_api, tenant, ONLY_IN_FACTS)


async def test_without_a_model_there_are_no_facts_and_no_calls(servers, memory_api, tenant, owner_pool, logs):
    rt = await open_runtime("evaluator", servers.settings(), 4)
    try:
        await service.setup(rt)
        assert rt.state["facts"] is None
        frag_id = await remember(memory_api, tenant)
        await evaluate_fragment(event(frag_id), rt)
        await service.teardown(rt)
    finally:
        await close_runtime(rt)
    row = await row_of(owner_pool, frag_id)
    assert row["facts"] is None and row["quality_score"] is not None

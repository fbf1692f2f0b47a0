"""Seed 003's LLM paths (consolidation summaries, distillation, identity crystals) through the real `openai` and
`google-genai` clients, against loopback servers speaking their wire formats: success, a 429 with Retry-After, and a
model that keeps failing, after which the offline result answers."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import AsyncIterator

from tests.fixtures.apps import MemoryApi, memory_api_on
from tests.fixtures.loopback.server import Loopback
from tests.integration.test_protocol_dialect import ok

SUMMARY = "The floor-2 coffee machine leaked and was repaired on Monday."


def openai_chat(reply) -> Loopback:
    """POST /v1/chat/completions as api.openai.com answers it; `reply(body)` gives the assistant's text."""

    async def answer(_request, body: dict) -> dict:
        return {
            "id": "chatcmpl-loopback",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": reply(body)}, "finish_reason": "stop"}
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
        }

    def error(status: int) -> dict:
        return {"error": {"message": f"loopback {status}", "type": "server_error", "param": None, "code": None}}

    return Loopback([("/v1/chat/completions", answer)], error)


def gemini(reply) -> Loopback:
    """generateContent as the Gemini API answers it."""

    async def answer(request, body: dict) -> dict:
        return {
            "candidates": [
                {"content": {"parts": [{"text": reply(body)}], "role": "model"}, "finishReason": "STOP", "index": 0}
            ],
            "modelVersion": request.path_params["model"],
        }

    def error(status: int) -> dict:
        return {"error": {"code": status, "message": f"loopback {status}", "status": "UNAVAILABLE"}}

    return Loopback([("/{version}/models/{model}:generateContent", answer)], error)


@contextlib.asynccontextmanager
async def with_llm(servers, server: Loopback, provider: str, **env: str) -> AsyncIterator[MemoryApi]:
    base = server.url + "/v1" if provider == "openai" else server.url
    settings = servers.settings(
        LLM_PROVIDER=provider, LLM_MODEL="test-model", LLM_BASE_URL=base, LLM_API_KEY="sk-loopback", **env
    )
    async with memory_api_on(settings) as api:
        yield api


async def two_sources(api, tenant) -> list[str]:
    ids = []
    for content in ("Coffee machine on floor 2 leaks", "Coffee machine on floor 2 was repaired Monday"):
        result, _ = await ok(api, "memento_store", {"content": content}, tenant)
        ids.append(result["id"])
    return ids


async def test_consolidation_summary_from_openai(servers, tenant):
    with openai_chat(lambda body: SUMMARY) as server:
        async with with_llm(servers, server, "openai") as api:
            ids = await two_sources(api, tenant)
            result, _ = await ok(api, "memento_consolidate", {"source_ids": ids}, tenant)
    assert result["content"] == SUMMARY
    sent = server.requests[0].body
    assert sent["model"] == "test-model" and "Coffee machine on floor 2 leaks" in sent["messages"][1]["content"]
    assert server.requests[0].headers["authorization"] == "Bearer sk-loopback"


async def test_extraction_from_openai_is_stored_once(servers, tenant):
    memories = [
        {"content": "The launch moved to March 3", "type": "decision", "tags": ["launch"]},
        {"content": "Billing runs on Postgres 18", "type": "fact"},
    ]
    with openai_chat(lambda body: "Here you go:\n```json\n" + json.dumps(memories) + "\n```") as server:
        async with with_llm(servers, server, "openai") as api:
            transcript = "Alice: we moved the launch. Bob: and billing is on Postgres 18 now, right? Alice: yes."
            first, text = await ok(api, "memento_extract", {"transcript": transcript}, tenant)
            second, _ = await ok(api, "memento_extract", {"transcript": transcript}, tenant)
    assert [(m["content"], m["type"]) for m in first["stored"]] == [
        ("The launch moved to March 3", "decision"),
        ("Billing runs on Postgres 18", "fact"),
    ]
    assert first["source"] == "llm:test-model" and "source: llm:test-model" in text
    assert second["count"] == 0  # the workspace already holds both
    # the second prompt lists what the workspace holds, so the model can leave it out too
    assert "The launch moved to March 3" in server.requests[1].body["messages"][1]["content"]


async def test_a_429_with_retry_after_is_waited_out(servers, tenant):
    with openai_chat(lambda body: SUMMARY) as server:
        server.fail_next(429, {"Retry-After": "1"})
        async with with_llm(servers, server, "openai") as api:
            ids = await two_sources(api, tenant)
            started = time.monotonic()
            result, _ = await ok(api, "memento_consolidate", {"source_ids": ids}, tenant)
            took = time.monotonic() - started
    assert result["content"] == SUMMARY and len(server.requests) == 2
    assert server.requests[1].at - server.requests[0].at >= 0.95 and took >= 0.95


async def test_a_model_that_keeps_failing_leaves_the_offline_result(servers, tenant):
    with openai_chat(lambda body: SUMMARY) as server:
        server.fail_always(500)
        async with with_llm(servers, server, "openai", LLM_MAX_ATTEMPTS="3") as api:
            ids = await two_sources(api, tenant)
            merged, _ = await ok(api, "memento_consolidate", {"source_ids": ids}, tenant)
            transcript = "Alice: We decided to move the launch to March 3."
            extracted, _ = await ok(api, "memento_extract", {"transcript": transcript}, tenant)
    assert merged["content"].startswith("[") and "2 memories consolidated" in merged["content"]
    assert extracted["source"] == "offline" and [m["type"] for m in extracted["stored"]] == ["decision"]
    assert len(server.requests) == 6  # three attempts for each call, then the offline path


async def test_identity_crystal_from_gemini_and_offline_when_gemini_fails(servers, tenant):
    prose = "I am the night-sky assistant; I report in UTC and I ship on Tuesdays."
    with gemini(lambda body: prose) as server:
        async with with_llm(servers, server, "gemini") as api:
            await ok(api, "memento_update", {"section": "standing_decisions", "content": "Report in UTC"}, tenant)
            made, text = await ok(api, "memento_identity_crystallize", {}, tenant)
            assert made["crystal"] == prose
            assert "Report in UTC" in json.dumps(server.requests[0].body)
            server.fail_always(503)
            fallback, _ = await ok(api, "memento_identity_crystallize", {}, tenant)
    assert fallback["crystal"].startswith("# Identity Crystal") and "Report in UTC" in fallback["crystal"]

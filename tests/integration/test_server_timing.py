"""memory-api's Server-Timing header on tool calls (memento_memory_api.server_timing), through its tool route on real
Postgres and Valkey, with the embedder a loopback server speaking /v1/embeddings that takes a known time to answer:
the question's vector QUERY_S, stored texts' vectors PASSAGE_S (longer, so the fresh rows' wait outlasts it)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator

import httpx
import pytest

from memento_memory_api.server_timing import STAGES
from memento_shared.principal import HEADER, SCOPES, Principal, encode_principal
from tests.fixtures.apps import MemoryApi, memory_api_on
from tests.integration.test_simple_dialect import Embedder

QUERY_S, PASSAGE_S = 0.04, 0.12
FIGURE = re.compile(r"^([a-z]+);dur=(\d+\.\d)$")


class SlowEmbedder(Embedder):
    async def answer(self, request, body: dict) -> dict:
        await asyncio.sleep(PASSAGE_S if body["input_type"] == "document" else QUERY_S)
        return await super().answer(request, body)


@pytest.fixture
async def api(servers) -> AsyncIterator[MemoryApi]:
    embedder = SlowEmbedder()
    with embedder.server:
        async with memory_api_on(servers.settings(EMBEDDER_URL=embedder.server.url)) as found:
            yield found


async def post(api: MemoryApi, tenant: str, tool: str, arguments: dict) -> httpx.Response:
    principal = Principal(tenant_id=tenant, agents=("*",), scopes=SCOPES)
    headers = {HEADER: encode_principal(principal, api.secret)}
    response = await api.client.post(f"/v1/tools/{tool}", json={"arguments": arguments}, headers=headers)
    assert response.status_code == 200, response.text
    return response


def stages(response: httpx.Response) -> dict[str, float]:
    """The header's figures in ms, after checking its form: every stage and `total`, in that order, nothing else."""
    figures = [FIGURE.match(part) for part in response.headers["server-timing"].split(", ")]
    assert all(figures), response.headers["server-timing"]
    found = {m.group(1): float(m.group(2)) for m in figures if m}
    assert list(found) == [*STAGES, "total"]
    assert all(ms >= 0 for ms in found.values())
    assert sum(found[s] for s in STAGES) <= found["total"] + 1e-9  # stages never overlap
    return found


async def test_a_recall_by_text_shows_its_wait_for_the_question_vector_and_its_statements(api, tenant):
    figures = stages(await post(api, tenant, "recall", {"text": "which queue library did we choose?"}))
    assert figures["embed"] >= QUERY_S * 1000 * 0.9  # the embedder's answer took QUERY_S
    assert figures["db"] > 0 and figures["fresh"] == 0  # nothing written yet: no fresh row to embed
    assert figures["total"] >= figures["embed"] + figures["db"]


async def test_a_fresh_row_of_the_caller_shows_as_its_own_stage(api, tenant):
    # no embedder worker runs here: the row waits for its vector, so the search embeds its passage itself
    stored = await post(api, tenant, "remember", {"content": "arq runs our background jobs", "topic": "eng",
                                                   "type": "fact"})  # fmt: skip
    assert "result" in stored.json()
    figures = stages(await post(api, tenant, "recall", {"text": "what runs background jobs?"}))
    # both calls run at once; the passages' takes PASSAGE_S - QUERY_S longer than the question's
    assert figures["fresh"] >= (PASSAGE_S - QUERY_S) * 1000 * 0.8
    assert figures["embed"] >= QUERY_S * 1000 * 0.9


async def test_a_call_that_embeds_nothing_shows_no_embedding_and_a_failed_call_is_timed_too(api, tenant):
    figures = stages(await post(api, tenant, "recall", {"keywords": ["postgres"]}))
    assert figures["embed"] == 0 and figures["fresh"] == 0 and figures["db"] > 0
    refused = await post(api, tenant, "recall", {"keywords": "not a list"})
    assert "error" in refused.json()
    assert stages(refused)["db"] == 0  # refused before any statement

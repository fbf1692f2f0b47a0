"""`make run` on one machine: memory-api inside the gateway's process (MEMENTO_COHOST, memento_devtools.cohost). The
official client's calls reach memory-api with no HTTP hop between them, memory-api still answers on its own port, and
Ctrl-C stops the one process cleanly (the fixture checks for orphans)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import psutil
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.conftest import ACCESS_KEY, System, launched

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def cohosted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[System]:
    with launched(tmp_path_factory.mktemp("cohost") / "memento-data", MEMENTO_COHOST="1") as system:
        yield system


def services_running(system: System) -> list[str]:
    """The module each of the launcher's Python children runs (`-m <module>`)."""
    modules = []
    for child in psutil.Process(system.process.pid).children():
        argv = child.cmdline()
        if "-m" in argv:
            modules.append(argv[argv.index("-m") + 1])
    return sorted(modules)


async def test_one_process_serves_the_gateway_and_memory_api(cohosted: System) -> None:
    assert services_running(cohosted) == [
        "memento_consolidator",
        "memento_devtools.cohost",
        "memento_embedder",
        "memento_evaluator",
    ]
    health = httpx.get(cohosted.base_url + "/health", trust_env=False).json()
    assert (health["status"], health["memory_api"], health["postgres"]) == ("ok", "up", "up")
    own = httpx.get(cohosted.service_url("memory-api") + "/health", trust_env=False)
    assert own.status_code == 200 and own.json()["postgres"] == "up"


async def test_tools_answer_through_the_in_process_hop(cohosted: System) -> None:
    headers = {"Authorization": f"Bearer {ACCESS_KEY}", "X-Memento-Workspace": f"cohost-{time.time_ns()}"}
    transport = streamable_http_client(cohosted.mcp_url, http_client=create_mcp_http_client(headers=headers))
    async with Client(transport) as client:
        note = {"content": "The staging database is rebuilt every Sunday night", "topic": "ops", "type": "fact"}
        stored = await client.call_tool("remember", note)
        assert not stored.is_error, stored
        found = json.loads((await client.call_tool("recall", {"keywords": ["staging"]})).content[0].text)
        assert [f["id"] for f in found["fragments"]] == [stored.structured_content["id"]]
        # memory-api's own refusal reaches the client as it does over HTTP: the field named, nothing written
        refused = await client.call_tool("remember", {"content": "x", "topic": "ops", "type": "not-a-type"})
        assert refused.is_error and "type" in refused.content[0].text
        again = json.loads((await client.call_tool("recall", {"keywords": ["staging"]})).content[0].text)
        assert len(again["fragments"]) == 1
    # the calls counted where memory-api's metrics are scraped, its own port
    metrics = httpx.get(cohosted.service_url("memory-api") + "/metrics", trust_env=False).text
    calls = {
        tuple(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(metrics)
        for s in family.samples
        if s.name == "memento_tool_calls_total"
    }
    assert calls[(("status", "ok"), ("tool", "remember"))] >= 1

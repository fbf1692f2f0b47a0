"""Faults under load, bounded (issue 31 item 4; the long run is `python -m bench.chaos`): a system of its own with two
gateway replicas, the mixed load through them with the official client, memory-api and then Valkey killed with
SIGKILL and started again. Nothing acknowledged may be lost, changed or doubled, and the workers catch up.

Nothing here depends on timing beyond bounded waits: the assertions are about what was stored, not about how many
calls failed or how fast the system came back (those are reported by bench.chaos)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from redis.asyncio import from_url

from bench.chaos import run_chaos
from bench.cluster import Cluster
from bench.mixed_load import LoadThread, MixedLoad
from memento_shared.settings import WorkerSettings as Settings
from tests.e2e.conftest import wait_for

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with Cluster(tmp_path_factory.mktemp("chaos") / "data") as started:
        yield started


def initialize(url: str, key: str) -> httpx.Response:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    headers = {"Authorization": f"Bearer {key}", "Accept": "application/json, text/event-stream"}
    return httpx.post(url, json=body, headers=headers, trust_env=False, timeout=30)


def test_killing_memory_api_and_valkey_under_load_loses_no_acknowledged_write(cluster: Cluster) -> None:
    results = run_chaos(
        cluster,
        ["memory-api", "valkey"],
        rate=8,
        clients=4,
        warmup_s=3,
        down_s=2,
        settle_s=5,
        verify_timeout_s=120,
    )
    writes, checks = results["writes"], results["checks"]
    assert writes["acknowledged_writes"] >= 20, results  # the load did run and write
    assert (writes["missing"], writes["changed"], writes["duplicated"]) == ([], [], []), writes
    assert checks["unacknowledged_stored_twice"] == 0, writes
    assert (writes["not_embedded"], writes["not_evaluated"]) == (0, 0), writes
    assert writes["dead_letters"] == [], writes
    assert checks["errors_before_first_fault"] == 0, results["errors_before_first_fault"]
    assert [f["component"] for f in results["faults"]] == ["memory-api", "valkey"]
    # and both replicas serve again (how soon is bench.chaos's to report, not a test's to time)
    for url in cluster.mcp_urls:
        wait_for(lambda url=url: initialize(url, cluster.access_key).status_code == 200, 60, f"{url} to serve again")


def test_with_valkey_down_the_gateway_answers_503_with_retry_after_and_a_json_rpc_error(cluster: Cluster) -> None:
    url = cluster.mcp_urls[0]
    cluster.kill("valkey")
    try:
        answer = initialize(url, cluster.access_key)
        assert answer.status_code == 503, answer.text  # was a bare 500 (issue 31)
        assert answer.headers["retry-after"] == "2"
        error = answer.json()["error"]
        assert answer.json()["jsonrpc"] == "2.0" and error["code"] == -32000
        assert "Redis is unavailable" in error["message"] and "Traceback" not in answer.text
    finally:
        cluster.restart("valkey")
    assert initialize(url, cluster.access_key).status_code == 200


def test_finished_jobs_results_expire_after_worker_result_seconds(cluster: Cluster) -> None:
    """arq kept every job's result for an hour, so Valkey's memory grew for an hour under a steady load (soak)."""
    assert Settings().worker_result_s == 300

    async def result_ttls() -> list[int]:
        redis = from_url(cluster.redis_url)
        try:
            keys = [key async for key in redis.scan_iter(match="arq:result:*", count=1000)]
            return [await redis.ttl(key) for key in keys]
        finally:
            await redis.aclose()

    load = MixedLoad(cluster.mcp_urls, cluster.access_key, "chaos-results", rate=8, clients=2)
    thread = LoadThread(load).start()
    try:
        wait_for(lambda: len(load.state.writes) >= 5, 60, "five acknowledged writes")
    finally:
        thread.stop()
    # the embedder and the evaluator finish a job for each write; their results are what arq keeps
    ttls = wait_for(lambda: asyncio.run(result_ttls()), 60, "finished jobs' results in Valkey")
    assert all(0 < ttl <= 300 for ttl in ttls), sorted(ttls)[-5:]  # were 3600


def _bytes_waiting(port: int) -> bool:
    """Whether a socket on 127.0.0.1:`port` holds received bytes nobody read yet (/proc/net/tcp's rx_queue)."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[1].split(":")[1], 16) == port and int(fields[4].split(":")[1], 16) > 0:
            return True
    return False


def test_a_call_memory_api_dies_under_is_not_told_that_nothing_was_changed(cluster: Cluster) -> None:
    """memory-api killed after the request reached it: the write may have committed, so the gateway must not say
    "nothing was changed" (it did, for any lost connection). Made deterministic by stopping memory-api (SIGSTOP) and
    killing it only once the request's bytes wait in its socket."""
    connected, stopped, answers = threading.Event(), threading.Event(), []

    async def call() -> None:
        headers = {"Authorization": f"Bearer {cluster.access_key}", "X-Memento-Workspace": "chaos-uncertain"}
        transport = streamable_http_client(
            cluster.mcp_urls[0] + "?profile=all", http_client=create_mcp_http_client(headers=headers)
        )
        async with Client(transport, read_timeout_seconds=60) as client:
            connected.set()
            await asyncio.to_thread(stopped.wait, 60)
            answers.append(await client.call_tool("remember", {"content": "a note sent as memory-api died"}))

    caller = threading.Thread(target=lambda: asyncio.run(call()))
    caller.start()
    api = cluster.process("memory-api")
    try:
        assert connected.wait(60)
        os.kill(api.pid, signal.SIGSTOP)
        stopped.set()
        wait_for(lambda: _bytes_waiting(cluster.launcher.ports["memory-api"]), 30, "the call to reach memory-api")
        cluster.kill("memory-api")
        caller.join(60)
    finally:
        stopped.set()
        if api.poll() is None:
            os.kill(api.pid, signal.SIGCONT)
        else:
            cluster.restart("memory-api")
    assert answers and answers[0].is_error, answers
    error = json.loads(answers[0].content[0].text)["error"]
    assert error["code"] == "STORAGE_ERROR" and error["retryable"] is True
    assert "nothing was changed" not in error["message"] and "may have been applied" in error["message"]

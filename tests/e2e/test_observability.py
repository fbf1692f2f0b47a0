"""One trace from the MCP client to the workers, metrics that move, and logs that never carry secrets or content.

The trace crosses gateway → memory-api over HTTP (traceparent header), memory-api → relay through the outbox row,
and relay → workers through the arq job; each hop is a parent/child edge, so the whole chain is one trace.
"""

from __future__ import annotations

import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.test_walking_skeleton import mcp_client, payload

pytestmark = pytest.mark.e2e
SERVICES = ("memory-api", "embedder", "evaluator", "consolidator")


async def wait_for_spans(predicate, timeout: float = 60):
    deadline = time.monotonic() + timeout
    while True:
        found = predicate()
        if found:
            return found
        assert time.monotonic() < deadline, "spans never arrived at the OTLP receiver"
        import asyncio

        await asyncio.sleep(0.2)


async def test_one_trace_runs_from_the_gateway_through_the_relay_to_each_worker(system, otlp):
    async with mcp_client(system) as client:
        stored = await client.call_tool(
            "remember", {"content": "trace this write through every hop", "topic": "e2e-trace", "type": "fact"}
        )
        assert not stored.is_error

    tool_spans = await wait_for_spans(lambda: otlp.find("memento-memory-api", "tool remember"))
    trace_id = tool_spans[-1].trace_id

    def chain():
        spans = otlp.trace(trace_id)
        services = {s.service for s in spans}
        names = {s.name for s in spans}
        wanted = {"memento-gateway", "memento-memory-api", "memento-embedder", "memento-evaluator"}
        done = wanted <= services and "embedder fragment.stored" in names and "evaluator fragment.stored" in names
        return spans if done else None

    spans = await wait_for_spans(chain)
    by_id = {s.span_id: s for s in spans}

    def parent_service(span) -> str:
        return by_id[span.parent_id].service if span.parent_id in by_id else "?"

    # gateway → memory-api: memory-api's server span is a child of a gateway span
    api_roots = [s for s in spans if s.service == "memento-memory-api" and parent_service(s) == "memento-gateway"]
    assert api_roots, [(s.service, s.name, parent_service(s)) for s in spans]
    # and exactly one server span there: FastAPI's native telemetry would add its own beside the middleware's, with
    # dependency, endpoint and serialization spans under it (five spans per request where one says it all)
    api_servers = [s.name for s in spans if s.service == "memento-memory-api" and s.kind == 2]
    assert len(api_servers) == 1, api_servers
    assert not [s.name for s in spans if s.name.startswith("fastapi.")]
    # memory-api → relay: the relay's span is a child of the tool call that wrote the outbox row
    relay = [s for s in spans if s.name == "outbox relay"]
    assert relay and by_id[relay[0].parent_id].name == "tool remember"
    # relay → workers: each worker's consumer span is a child of the relay span
    for worker in ("embedder", "evaluator"):
        consumer = next(s for s in spans if s.name == f"{worker} fragment.stored")
        assert consumer.parent_id == relay[0].span_id, worker
    # and the tool's database work is in the same trace: client spans (asyncpg) under the tool span
    tool = by_id[relay[0].parent_id]
    assert tool.service == "memento-memory-api"
    assert any(s.parent_id == tool.span_id and s.kind == 3 for s in spans), "no asyncpg span under the tool call"
    # a worker's own queries are in the event's trace too, under its consumer span
    evaluation = next(s for s in spans if s.name == "evaluator fragment.stored")
    assert any(s.parent_id == evaluation.span_id and s.kind == 3 for s in spans), "no client span under the job"


async def test_workers_do_not_trace_their_queue_bookkeeping(system, otlp):
    """arq polls twenty times a second and claims, leases and finishes each job with Redis commands: traced, they
    were most of a worker's spans (each poll a trace of its own) and said nothing about an event."""
    async with mcp_client(system) as client:
        stored = await client.call_tool(
            "remember", {"content": "a job for every worker queue", "topic": "e2e-trace", "type": "fact"}
        )
        assert not stored.is_error
    await wait_for_spans(lambda: otlp.find("memento-evaluator", "evaluator fragment.stored"))
    workers = {f"memento-{w}" for w in ("embedder", "evaluator", "consolidator")}
    with otlp.lock:
        worker_spans = [s for s in otlp.spans if s.service in workers]
    # Redis commands of arq's poll, claim, run and finish (none of them an SQL keyword, as a query span's name is)
    redis_commands = {"ZRANGEBYSCORE", "EVAL", "WATCH", "EXISTS", "ZSCORE", "PSETEX", "PEXPIRE", "INCR", "ZREM"}
    bookkeeping = [s.name for s in worker_spans if s.name.split(" ")[0] in redis_commands]
    assert not bookkeeping, bookkeeping[:10]


async def test_a_recall_span_names_its_tiers_and_vector_plan_but_not_the_question(system, otlp):
    workspace = f"traced-{time.time_ns()}"
    async with mcp_client(system, workspace=workspace) as client:
        await client.call_tool(
            "remember", {"content": "the lighthouse keeper logs storms", "topic": "e2e-trace", "type": "fact"}
        )
        await client.call_tool("recall", {"keywords": ["lighthouse"]})
        await client.call_tool("recall", {"text": "who writes down the weather at sea"})

    def recalls():
        spans = [s for s in otlp.find("memento-memory-api", "tool recall") if "memento.recall.tiers" in s.attributes]
        return spans if any("memento.recall.vector_plan" in s.attributes for s in spans) else None

    spans = await wait_for_spans(recalls)
    by_keyword = [s.attributes for s in spans if "memento.recall.vector_plan" not in s.attributes]
    by_text = [s.attributes for s in spans if "memento.recall.vector_plan" in s.attributes]
    assert any({"L1", "L2"} & set(a["memento.recall.tiers"]) for a in by_keyword), by_keyword
    assert {a["memento.recall.vector_plan"] for a in by_text} <= {"exact", "hnsw"}
    said = " ".join(str(v) for s in spans for v in s.attributes.values())
    assert "lighthouse" not in said and "weather" not in said


def scrape(url: str) -> dict[tuple[str, tuple], float]:
    samples = {}
    for family in text_string_to_metric_families(httpx.get(url + "/metrics").text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def total(samples: dict, name: str, **labels: str) -> float:
    return sum(
        v for (n, ls), v in samples.items() if n == name and all(dict(ls).get(k) == w for k, w in labels.items())
    )


async def test_named_metrics_move_after_a_tool_call(system):
    urls = {"gateway": system.base_url} | {s: system.service_url(s) for s in SERVICES}
    before = {name: scrape(url) for name, url in urls.items()}
    async with mcp_client(system) as client:
        stored = payload(
            await client.call_tool(
                "remember", {"content": "metrics should move for this write", "topic": "e2e-metrics", "type": "fact"}
            )
        )
        await client.call_tool("recall", {"keywords": ["metrics"]})
    assert stored["created"]

    def moved(service: str, name: str, **labels: str) -> bool:
        return total(scrape(urls[service]), name, **labels) > total(before[service], name, **labels)

    checks = [
        ("gateway", "memento_http_requests_total", {"route": "/mcp"}),
        ("memory-api", "memento_tool_calls_total", {"tool": "remember", "status": "ok"}),
        ("memory-api", "memento_tool_latency_seconds_count", {"tool": "recall"}),
        ("memory-api", "memento_recall_tier_hits_total", {}),
        ("memory-api", "memento_outbox_relayed_total", {"event_type": "fragment.stored"}),
        ("embedder", "memento_event_processing_seconds_count", {"event_type": "fragment.stored", "status": "ok"}),
        ("embedder", "memento_embedder_latency_seconds_count", {}),
        ("evaluator", "memento_event_processing_seconds_count", {"event_type": "fragment.stored", "status": "ok"}),
    ]
    deadline = time.monotonic() + 60
    pending = list(checks)
    while pending:
        pending = [c for c in pending if not moved(c[0], c[1], **c[2])]
        assert time.monotonic() < deadline, f"metrics that never moved: {pending}"
        if pending:
            time.sleep(0.2)
    # labels stay bounded: no fragment ids or content anywhere in the exposition
    for url in urls.values():
        assert "frag-" not in httpx.get(url + "/metrics").text
    for service in SERVICES:
        families = {f.name for f in text_string_to_metric_families(httpx.get(urls[service] + "/metrics").text)}
        assert "memento_http_requests" in families, service


def test_every_service_froze_what_its_startup_built(system):
    """memento_shared.heap: once started, each service collected startup's garbage (a generation 2 collection, timed
    into memento_gc_pause_seconds) and froze the rest, so later full collections do not walk it again."""
    urls = {"gateway": system.base_url} | {s: system.service_url(s) for s in SERVICES}
    for service, url in urls.items():
        samples = scrape(url)
        assert total(samples, "memento_gc_pause_seconds_count", generation="2") >= 1, service
        assert total(samples, "memento_gc_frozen_objects") > 10_000, service

"""Every Prometheus metric, defined once. Labels stay bounded: tool, status, event type, provider — never ids."""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from starlette.requests import Request
from starlette.responses import Response

REGISTRY = CollectorRegistry(auto_describe=True)
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)

HTTP_REQUESTS = Counter(
    "memento_http_requests_total", "HTTP requests served", ["service", "route", "status"], registry=REGISTRY
)
HTTP_LATENCY = Histogram(
    "memento_http_request_seconds",
    "HTTP request latency",
    ["service", "route"],
    buckets=LATENCY_BUCKETS,
    registry=REGISTRY,
)
TOOL_CALLS = Counter("memento_tool_calls_total", "Tool calls by tool and status", ["tool", "status"], registry=REGISTRY)
TOOL_LATENCY = Histogram(
    "memento_tool_latency_seconds", "Tool call latency", ["tool", "status"], buckets=LATENCY_BUCKETS, registry=REGISTRY
)
RECALL_TIER_HITS = Counter(
    "memento_recall_tier_hits_total", "Fragments found per recall tier", ["tier"], registry=REGISTRY
)
SEARCH_LATENCY = Histogram(
    "memento_search_latency_seconds",
    "Search latency by kind",
    ["search_type"],
    buckets=LATENCY_BUCKETS,
    registry=REGISTRY,
)
OUTBOX_BACKLOG = Gauge("memento_outbox_backlog_total", "Unpublished outbox events", ["event_type"], registry=REGISTRY)
OUTBOX_RELAYED = Counter("memento_outbox_relayed_total", "Events handed to arq", ["event_type"], registry=REGISTRY)
EVENT_PROCESSING = Histogram(
    "memento_event_processing_seconds",
    "Time to process an event in a worker",
    ["event_type", "status"],
    buckets=(0.005, 0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30),
    registry=REGISTRY,
)
JOB_FAILURES = Counter("memento_job_failures_total", "Failed job tries", ["worker", "event_type"], registry=REGISTRY)
DEAD_LETTERS = Counter(
    "memento_dead_letters_total", "Events dead-lettered", ["worker", "event_type"], registry=REGISTRY
)
EMBEDDER_LATENCY = Histogram(
    "memento_embedder_latency_seconds",
    "Embedding call latency",
    ["provider", "model"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 5),
    registry=REGISTRY,
)
EMBEDDER_ERRORS = Counter(
    "memento_embedder_errors_total", "Embedding errors", ["provider", "error_type"], registry=REGISTRY
)
EMBEDDED_TEXTS = Counter(
    "memento_embedded_texts_total", "Texts embedded", ["provider", "input_type"], registry=REGISTRY
)
ACTIVE_SESSIONS = Gauge("memento_active_sessions", "MCP sessions alive in Redis", registry=REGISTRY)


async def metrics_endpoint(_: Request) -> Response:
    return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)


# --- workers (issue 5) ---
DEAD_LETTERS_OPEN = Gauge(
    "memento_dead_letters_open", "Dead letters not replayed yet", ["queue", "event_type"], registry=REGISTRY
)
PROVIDER_THROTTLED = Counter(
    "memento_provider_throttled_total",
    "Calls that waited for a provider's rate limit or Retry-After",
    ["provider"],
    registry=REGISTRY,
)
EMBEDDING_PROFILE_PROGRESS = Gauge(
    "memento_embedding_profile_progress_ratio",
    "Share of fragments embedded into a profile that is being built",
    ["profile"],
    registry=REGISTRY,
)
EVALUATIONS = Counter(
    "memento_evaluations_total", "Fragments scored by the evaluator", ["scorer", "status"], registry=REGISTRY
)
CONSOLIDATION_STAGE_SECONDS = Histogram(
    "memento_consolidation_stage_seconds",
    "Time per consolidation stage",
    ["stage"],
    buckets=(0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 120),
    registry=REGISTRY,
)
CONSOLIDATION_ITEMS = Counter(
    "memento_consolidation_items_total", "Fragments or links changed per stage", ["stage"], registry=REGISTRY
)


# --- gateway edge (issue 3) ---
GATEWAY_REJECTIONS = Counter(
    "memento_gateway_rejections_total",
    "Requests refused at the edge (unauthorized, origin, body size, rate, streams)",
    ["reason"],
    registry=REGISTRY,
)
GATEWAY_STREAMS = Gauge("memento_gateway_open_streams", "SSE streams open on this replica", ["kind"], registry=REGISTRY)
MCP_MESSAGES = Counter(
    "memento_mcp_messages_total",
    "JSON-RPC messages handled by method, transport and protocol version",
    ["method", "transport", "version"],
    registry=REGISTRY,
)

# seed 004 §13.1, named as the seed names them
MEMORY_BEFORE_TURN = Counter("mcp_memory_before_turn_total", "memory_before_turn calls", ["status"], registry=REGISTRY)
MEMORY_AFTER_TURN = Counter("mcp_memory_after_turn_total", "memory_after_turn calls", ["status"], registry=REGISTRY)
MEMORY_AFTER_TURN_DURATION = Histogram(
    "mcp_memory_after_turn_duration_ms",
    "memory_after_turn duration in milliseconds",
    buckets=(5, 10, 25, 50, 80, 100, 250, 500, 1000, 2500, 5000),
    registry=REGISTRY,
)
MEMORY_MAINTENANCE = Counter(
    "mcp_memory_maintenance_total", "memory_run_maintenance calls", ["status"], registry=REGISTRY
)
MEMORY_COMPACTION = Counter("mcp_memory_compaction_total", "Session events compacted into archives", registry=REGISTRY)
MEMORY_FACT_WRITES = Counter("mcp_memory_fact_write_total", "Facts written by tier", ["tier"], registry=REGISTRY)
AFTER_ACK_JOBS = Counter(
    "memento_after_ack_jobs_total",
    "Work done after a call was acknowledged, by kind and outcome",
    ["kind", "status"],
    registry=REGISTRY,
)
MEMORY_IDEMPOTENCY_CONFLICTS = Counter(
    "mcp_memory_idempotency_conflicts_total", "Turn commits refused as a duplicate in progress", registry=REGISTRY
)

# --- the process (memento_shared.heap) ---
GC_PAUSE = Histogram(
    "memento_gc_pause_seconds",
    "Time the cyclic garbage collector held the process, by generation (a full collection stalls every request)",
    ["generation"],
    buckets=(0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25),
    registry=REGISTRY,
)
GC_FROZEN = Gauge(
    "memento_gc_frozen_objects", "Objects frozen when startup was over: full collections skip them", registry=REGISTRY
)

"""The model's own time on the exact texts a row embedded, measured in the same run (issue 46).

Each measured call notes what it asked the model to read (a search: its question, as memory-api's recall.question
cuts it; store_memory: its content, as a passage); right after the row, those texts are embedded again alone, one call
at a time, as memory-api calls the embedder. The row's p95 is then read beside the model's, and its throughput against
the model's single-core throughput on the same texts (texts a second when nothing else runs).
"""

from __future__ import annotations

import time

from bench.report import percentiles
from memento_memory_api.recall.question import question
from memento_memory_api.settings import MemoryApiSettings
from memento_shared.internal_http import InternalClient

QUESTION_TOKENS = MemoryApiSettings.model_fields[
    "query_embed_max_tokens"
].default  # benches start systems with the defaults
MAX_TEXTS = 200  # a row's texts embedded alone, at most (the last ones it asked)


def embedded(op: str, arguments: dict) -> tuple[str, str] | None:
    """(input_type, text) the model reads for one call of `op` with `arguments`, or None for a call that embeds
    nothing (a keyword recall, a write whose vector the workers compute)."""
    asked = {
        "recall_text": "text",
        "search_memories": "query",
        "memento_recall": "query",
        "memento_context": "message",
        "memory.search": "query",
    }.get(op)
    if asked is not None:
        return "query", question(arguments[asked], QUESTION_TOKENS)
    if op == "store_memory":
        return "document", arguments["content"]
    return None


async def model_alone(embedder_url: str, texts: list[tuple[str, str]]) -> dict:
    """The model's latency and single-core throughput on `texts`, one call at a time (the first two unmeasured)."""
    texts = texts[-MAX_TEXTS:]
    client = InternalClient(embedder_url, timeout_s=60)
    latencies = []
    try:
        for i, (input_type, text) in enumerate([*texts[:2], *texts]):
            started = time.perf_counter()
            answer = await client.post_json("/v1/embeddings", {"input": [text], "input_type": input_type})
            if answer.status != 200:
                raise SystemExit(f"bench: the embedder answered HTTP {answer.status}")
            if i >= 2:
                latencies.append(time.perf_counter() - started)
    finally:
        await client.aclose()
    stats = percentiles(latencies)
    return {
        "model_p50_ms": stats["p50_ms"],
        "model_p95_ms": stats["p95_ms"],
        "model_throughput_per_s": round(len(latencies) / sum(latencies), 1),
        "model_texts": len(latencies),
    }

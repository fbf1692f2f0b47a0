"""Stage 9: fragments without a vector for their current content, in the active profile or the one being built,
are sent to the embedder (seed 000 §9.3: embeddings that failed are backfilled by consolidation).

They are enqueued straight onto the embedder's queue as `embedding.requested` events of up to BATCH ids, not
through the outbox: nothing depends on this delivery, because the next run looks again and enqueues whatever is
still missing. The job id is derived from the (id, content hash) pairs, so a run while the previous run's batches
are still queued adds nothing. Fragments younger than backfillGraceSeconds are left to their own events; at most
backfillLimit are sent per run (the embedder's model, not this stage, is the bottleneck).
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

from memento_consolidator.pipeline.context import StageContext
from memento_shared.enqueue import wake
from memento_shared.events import envelope, job_id, queue_key

BATCH = 64
NAMESPACE = uuid.UUID("6f1d2c4e-98a5-4b7e-9d1b-0e6f3c2a7b10")

# One hash anti-join of two sequential scans. Written as a LEFT JOIN with the hash compared in the filter, Postgres
# merge-joined both primary keys in id order instead, reading each table's heap in random order: 94 s against 6 s
# at a million fragments (EXPLAIN ANALYZE, bench store). DISTINCT ON: a fragment can miss two profiles' vectors.
MISSING_SQL = (
    "SELECT DISTINCT ON (f.id) f.id, f.content_hash FROM agent_memory.fragments f"
    " CROSS JOIN (SELECT id FROM agent_memory.embedding_profiles WHERE status IN ('active', 'building')) p"
    " WHERE f.tenant_id = $1 AND f.workspace = $2 AND f.created_at < now() - $3::float8 * interval '1 second'"
    " AND NOT EXISTS (SELECT 1 FROM agent_memory.fragment_embeddings e WHERE e.profile_id = p.id"
    "  AND e.tenant_id = f.tenant_id AND e.workspace = f.workspace AND e.fragment_id = f.id"
    "  AND e.content_hash = f.content_hash)"
    " ORDER BY f.id LIMIT $4"
)


async def run(ctx: StageContext) -> int:
    if ctx.queue is None:
        return 0
    limit = int(ctx.config["backfillLimit"])
    grace = float(ctx.config["backfillGraceSeconds"])
    sent = 0
    async for rows in ctx.stream(MISSING_SQL, ctx.tenant_id, ctx.workspace, grace, limit):
        for start in range(0, len(rows), BATCH):
            await _enqueue(ctx, rows[start : start + BATCH])
        sent += len(rows)
    if sent and ctx.queue is not None:
        await wake(ctx.queue, queue_key("embedder"))
    return sent


async def _enqueue(ctx: StageContext, rows: list[Any]) -> None:
    digest = hashlib.sha256("|".join(f"{r['id']}:{r['content_hash']}" for r in rows).encode()).hexdigest()
    event_id = str(uuid.uuid5(NAMESPACE, digest))
    event = envelope(
        event_id, "embedding.requested", ctx.tenant_id, ctx.workspace, {"fragment_ids": [r["id"] for r in rows]}, None
    )
    await ctx.queue.enqueue_job(
        "handle_event", event, _job_id=job_id(event_id, "embedder"), _queue_name=queue_key("embedder")
    )

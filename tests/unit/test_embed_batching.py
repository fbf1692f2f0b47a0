"""The embedder's Batcher with the real offline model: a recall's query embedding does not wait for a whole batch
of document embeddings (the model is shared, one call at a time)."""

from __future__ import annotations

import asyncio
import os
import threading

import numpy as np

from memento_embedder.batching import Batcher
from memento_embedder.providers.offline import OfflineProvider


async def test_a_query_overtakes_a_document_batch_in_progress():
    batcher = Batcher(OfflineProvider(threads=1), max_batch=16, window_s=0.0)
    try:
        texts = [
            f"deploy note {i}: the staging migration needs the force flag before service {i} restarts"
            for i in range(16)
        ]
        documents = [asyncio.create_task(batcher.embed_document(t)) for t in texts]
        await asyncio.sleep(0.05)  # the batch has started on the model
        query = await batcher.embed_queries(["which flag does the staging migration need"])
        still_embedding = sum(not d.done() for d in documents)
        vectors = await asyncio.gather(*documents)
        assert still_embedding >= 8, f"the query waited for the batch ({still_embedding} documents left)"
        assert query.shape == (1, 384)
        # chunked calls give the same vectors as one call would
        whole = OfflineProvider(threads=1).embed(texts[:3], "document")
        assert np.allclose(np.stack(vectors[:3]), whole, atol=1e-5)
    finally:
        await batcher.aclose()


class GatedModel(OfflineProvider):
    """The real offline model, whose document calls wait at a gate the test opens: a document call 'in progress'
    for as long as the test likes."""

    def __init__(self, threads: int = 1, gate: threading.Event | None = None) -> None:
        super().__init__(threads)
        self.gate = gate or threading.Event()

    def replica(self) -> GatedModel:
        return GatedModel(self.threads, self.gate)

    def embed(self, texts, input_type):
        if input_type == "document":
            self.gate.wait(30)
        return super().embed(texts, input_type)


async def test_a_query_does_not_wait_for_the_document_call_in_progress():
    model = GatedModel()
    batcher = Batcher(model, max_batch=16, window_s=0.0)
    try:
        document = asyncio.create_task(batcher.embed_document("the staging migration needs the force flag"))
        await asyncio.sleep(0.05)  # the document call is on the model, held at the gate
        query = await asyncio.wait_for(batcher.embed_queries(["which flag does the migration need"]), 10)
        assert not document.done(), "the document call should still be held"
        assert query.shape == (1, 384)
    finally:
        model.gate.set()
        await batcher.aclose()


class PriorityProbe(OfflineProvider):
    """The real offline model, noting the nice value of the thread each call runs on."""

    def __init__(self, threads: int = 1, seen: dict | None = None) -> None:
        super().__init__(threads)
        self.seen = {} if seen is None else seen

    def replica(self) -> PriorityProbe:
        return PriorityProbe(self.threads, self.seen)

    def embed(self, texts, input_type):
        self.seen[input_type] = os.getpriority(os.PRIO_PROCESS, 0)  # 0: the calling thread, on Linux
        return super().embed(texts, input_type)


async def priorities_seen(probe: PriorityProbe) -> dict[str, int]:
    """The nice values a document call and a query call ran at, relative to ours."""
    batcher = Batcher(probe, max_batch=4, window_s=0.0, document_niceness=7)
    try:
        await batcher.embed_document("the staging migration needs the force flag")
        await batcher.embed_queries(["which flag does the migration need"])
    finally:
        await batcher.aclose()
    ours = os.getpriority(os.PRIO_PROCESS, 0)
    return {kind: nice - ours for kind, nice in probe.seen.items()}


async def test_documents_run_niced_and_queries_do_not():
    assert os.getpriority(os.PRIO_PROCESS, 0) <= 12, "already too nice to show a difference"
    assert await priorities_seen(PriorityProbe()) == {"document": 7, "query": 0}


async def test_without_a_query_lane_the_shared_thread_keeps_its_priority():
    class NoReplica(PriorityProbe):
        replica = None

    assert await priorities_seen(NoReplica()) == {"document": 0, "query": 0}

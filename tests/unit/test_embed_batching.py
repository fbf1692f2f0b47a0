"""The embedder's Batcher with the real offline model: a recall's query embedding does not wait for a whole batch
of document embeddings (the model is shared, one call at a time), and documents yield the CPU to everything else."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time

import numpy as np
import psutil
import pytest

from memento_embedder.batching import Batcher
from memento_embedder.providers.base import ProviderError
from memento_embedder.providers.offline import OfflineProvider
from tests.fixtures.waiting import eventually, truthy


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
        async with asyncio.timeout(10):
            query = await batcher.embed_queries(["which flag does the migration need"])
        assert not document.done(), "the document call should still be held"
        assert query.shape == (1, 384)
    finally:
        model.gate.set()
        await batcher.aclose()


class GatedDocumentLane(GatedModel):
    """Like GatedModel, but only the document lane's thread waits at the gate."""

    def replica(self) -> GatedDocumentLane:
        return GatedDocumentLane(self.threads, self.gate)

    def embed(self, texts, input_type):
        if not threading.current_thread().name.startswith("embed-query"):
            self.gate.wait(30)
        return OfflineProvider.embed(self, texts, input_type)


async def test_a_document_asked_for_on_the_request_path_runs_on_the_query_lane():
    """store_memory waits for its own text's (document) vector: the HTTP API computes it on the query lane, so it
    does not queue behind the write backlog's call in progress, and it is the vector the worker would have written."""
    model = GatedDocumentLane()
    batcher = Batcher(model, max_batch=16, window_s=0.0)
    try:
        backlog = asyncio.create_task(batcher.embed_document("the staging migration needs the force flag"))
        await asyncio.sleep(0.05)  # the backlog's call is on the document lane, held at the gate
        async with asyncio.timeout(10):
            inline = await batcher.embed(["User moved to Austin"], "document")
        assert not backlog.done(), "the backlog's call should still be held"
        expected = OfflineProvider(threads=1).embed(["User moved to Austin"], "document")
        assert np.allclose(inline, expected, atol=1e-5)
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


async def priorities_seen(probe: PriorityProbe, document_niceness: int) -> dict[str, int]:
    """The nice values a document call and a query call ran at in this process, relative to ours."""
    batcher = Batcher(probe, max_batch=4, window_s=0.0, document_niceness=document_niceness)
    try:
        await batcher.embed_document("the staging migration needs the force flag")
        await batcher.embed_queries(["which flag does the migration need"])
    finally:
        await batcher.aclose()
    ours = os.getpriority(os.PRIO_PROCESS, 0)
    return {kind: nice - ours for kind, nice in probe.seen.items()}


def document_process() -> psutil.Process:
    children = [c for c in psutil.Process().children() if "spawn_main" in " ".join(c.cmdline())]
    assert len(children) == 1, children
    return children[0]


async def test_documents_run_in_a_niced_session_of_their_own_and_queries_here():
    """Under autogroup scheduling a niced thread still takes a full share of the CPU from other processes; a niced
    session of its own yields to them (memory-api, the gateway, Postgres) as well."""
    ours = os.getpriority(os.PRIO_PROCESS, 0)
    assert ours <= 12, "already too nice to show a difference"
    probe = PriorityProbe()
    batcher = Batcher(probe, max_batch=4, window_s=0.0, document_niceness=7)
    try:
        text = "the staging migration needs the force flag"
        vector = await batcher.embed_document(text)
        await batcher.embed_queries(["which flag does the migration need"])
        child = document_process()
        assert child.nice() == ours + 7
        assert os.getsid(child.pid) == child.pid != os.getsid(0)
        if os.path.exists(f"/proc/{os.getpid()}/autogroup"):
            with open(f"/proc/{child.pid}/autogroup") as group:
                assert group.read().split()[-1] == "7"
        # the child computed it (the probe here saw no document call), with the same model
        assert probe.seen == {"query": ours}
        assert np.allclose(vector, OfflineProvider(threads=1).embed([text], "document")[0], atol=1e-5)
    finally:
        await batcher.aclose()


async def test_a_killed_document_process_fails_one_call_and_is_replaced():
    batcher = Batcher(OfflineProvider(threads=1), max_batch=4, window_s=0.0, document_niceness=5)
    try:
        await batcher.embed_document("first document")
        first = document_process()
        first.kill()
        first.wait(10)
        with pytest.raises(ProviderError):  # the job retries (its worker's backoff), nothing is lost
            await batcher.embed_document("second document")
        again = await batcher.embed_document("second document")
        assert again.shape == (384,)
        assert document_process().pid != first.pid
    finally:
        await batcher.aclose()


async def test_without_niceness_documents_stay_in_this_process():
    assert await priorities_seen(PriorityProbe(), 0) == {"document": 0, "query": 0}
    assert not [c for c in psutil.Process().children() if "spawn_main" in " ".join(c.cmdline())]


async def test_without_a_query_lane_the_shared_thread_keeps_its_priority():
    class NoReplica(PriorityProbe):
        replica = None

    assert await priorities_seen(NoReplica(), 7) == {"document": 0, "query": 0}


class SlowDocuments(OfflineProvider):
    """The real offline model, whose calls for a text starting "slow" take SLOW_S longer (in the document process)."""

    def __init__(self, threads: int = 1, marker: str | None = None) -> None:
        super().__init__(threads)
        self.marker = marker  # a file the slow call creates as it starts: the test's sign it is in progress

    def replica(self) -> SlowDocuments:
        return SlowDocuments(self.threads, self.marker)

    def __reduce__(self):
        return type(self), (self.threads, self.marker)

    def embed(self, texts, input_type):
        if texts[0].startswith("slow"):
            if self.marker:
                open(self.marker, "w").close()
            time.sleep(SLOW_S)
        return super().embed(texts, input_type)


SLOW_S = 1.5


async def test_closing_waits_for_the_document_process_without_blocking_the_event_loop(tmp_path):
    """Shutdown waits for the child's call in progress (no process outlives the embedder), but other shutdown work
    on the loop (the worker's HTTP side, in-flight jobs going back to the queue) goes on meanwhile."""
    marker = tmp_path / "slow-call-started"
    batcher = Batcher(SlowDocuments(threads=1, marker=str(marker)), max_batch=4, window_s=0.0, document_niceness=5)
    await batcher.embed_document("a document that starts the process")
    child = document_process()
    slow = asyncio.create_task(batcher.embed_document("slow document"))
    await eventually(lambda: truthy(marker.exists()), 30, "the child to be in the slow call", interval=0.01)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.05)
            ticks += 1

    ticking = asyncio.create_task(ticker())
    started = time.monotonic()
    await batcher.aclose()
    waited = time.monotonic() - started
    ticking.cancel()
    assert slow.done(), "the call in progress ends with the batcher"
    if not slow.cancelled():
        assert isinstance(slow.exception(), RuntimeError)  # "embedding cancelled": its job goes back to the queue
    assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE, "the document process outlived close"
    assert waited > 0.5, "close returned before the child's call ended"
    assert ticks >= waited / 0.05 / 3, f"the event loop stood still while closing ({ticks} ticks in {waited:.2f} s)"


PID_ONE = """
import asyncio, os
from memento_embedder.batching import Batcher
from memento_embedder.providers.offline import OfflineProvider

async def main():
    assert os.getpid() == 1
    batcher = Batcher(OfflineProvider(threads=1), max_batch=4, window_s=0.0, document_niceness=5)
    try:
        print((await batcher.embed_document("the staging migration needs the force flag")).shape)
    finally:
        await batcher.aclose()

asyncio.run(main())
"""


def test_documents_embed_when_the_embedder_is_pid_1():
    """In a container without an init the embedder is PID 1, so its document process's parent is PID 1 while alive:
    that must not read as "the parent died". A PID namespace of its own (unshare) puts the embedder there."""
    done = subprocess.run(
        ["unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount-proc", sys.executable, "-c", PID_ONE],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0 and done.stdout.strip() == "(384,)", done.stderr[-2000:]


def _cannot_start():
    raise RuntimeError("this model cannot load here")


class ModelThatCannotStartInAChild(OfflineProvider):
    """Loads here, but its pickle (the recipe the document process builds its instance from) fails there."""

    def replica(self) -> OfflineProvider:
        return OfflineProvider(self.threads)

    def __reduce__(self):
        return _cannot_start, ()


async def test_warming_starts_the_document_process_and_fails_when_it_cannot_start():
    """The embedder warms its batcher before it reports healthy, so a broken document process stops the start
    instead of failing every stored fragment's job."""
    batcher = Batcher(OfflineProvider(threads=1), max_batch=4, window_s=0.0, document_niceness=5)
    try:
        await batcher.warm()
        assert document_process().nice() > os.getpriority(os.PRIO_PROCESS, 0)  # up before any document arrived
    finally:
        await batcher.aclose()
    broken = Batcher(ModelThatCannotStartInAChild(threads=1), max_batch=4, window_s=0.0, document_niceness=5)
    try:
        with pytest.raises(ProviderError, match="died"):
            await broken.warm()
    finally:
        await broken.aclose()


async def test_warming_does_not_call_an_http_provider():
    class Remote:
        name, model = "openai", "text-embedding-3-small"
        calls = 0

        async def embed(self, texts, input_type):
            Remote.calls += 1
            return np.zeros((len(texts), 3), dtype=np.float32)

    batcher = Batcher(Remote())
    await batcher.warm()
    await batcher.aclose()
    assert Remote.calls == 0
    await Batcher(Remote()).embed_queries(["counted"])  # the probe would have seen a call
    assert Remote.calls == 1

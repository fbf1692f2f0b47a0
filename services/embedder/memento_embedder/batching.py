"""Coalesce concurrent embedding requests into batches (by size or time window) for one profile's provider, and
write each batch's vectors in one transaction.

Each fragment arrives as its own arq job; up to `max_jobs` of them run at once and meet here, so the provider
sees batches of `max_batch` texts and Postgres sees one multi-row write per batch instead of one commit per
fragment (the HNSW insert costs the same either way: docs/benchmarks.md). Queries (on a recall's request path)
skip the document queue so a backlog of writes never delays a search, and a local model that offers a replica
runs them on it, on their own thread, so they do not wait for the document call in progress either; its documents
then run in a niced child process (lanes.py), so the backlog also yields the CPU to the request path.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np

from memento_embedder.lanes import ProcessLane, ThreadLane
from memento_embedder.providers.base import InputType, Provider
from memento_shared.telemetry.metrics import EMBEDDED_TEXTS, EMBEDDER_ERRORS, EMBEDDER_LATENCY
from memento_shared.worker import ProviderLimiter, retry_after_of

Store = Callable[[list[Any], np.ndarray], Awaitable[None]]
LOCAL_MODEL_CALL = 2  # texts per call of a local model (see _call)


class Batcher:
    def __init__(
        self,
        provider: Provider,
        max_batch: int = 16,
        window_s: float = 0.01,
        *,
        limiter: ProviderLimiter | None = None,
        store: Store | None = None,
        document_niceness: int = 0,
    ) -> None:
        self.provider = provider
        self.max_batch = max_batch
        self.window_s = window_s
        self.limiter = limiter or ProviderLimiter(provider.name, concurrency=4)
        self.store = store
        self._is_async = inspect.iscoroutinefunction(provider.embed)
        # A local model is not re-entrant: one call at a time per instance, each instance in its own lane.
        self._lanes: dict[InputType, ThreadLane | ProcessLane] = {}
        if not self._is_async:
            replica = getattr(provider, "replica", None)
            if replica and document_niceness > 0:
                # documents in a niced process of their own, queries here at full priority
                self._lanes = {
                    "document": ProcessLane(provider, document_niceness),
                    "query": ThreadLane(provider, "embed-query"),
                }
            elif replica:
                self._lanes = {"document": ThreadLane(provider, "embed"), "query": ThreadLane(replica(), "embed-query")}
            else:  # one instance: its thread serves queries too, so it keeps its priority
                shared = ThreadLane(provider, "embed")
                self._lanes = {"document": shared, "query": shared}
        self._pending: list[tuple[str, Any, asyncio.Future[Any]]] = []
        self._pump_task: asyncio.Task[Any] | None = None
        self._in_flight: set[asyncio.Task[Any]] = set()

    async def _call(self, texts: list[str], input_type: InputType, lane_name: InputType) -> np.ndarray:
        if self._is_async:
            return await self.provider.embed(texts, input_type)
        # The local model gains nothing from batching (35 ms per text at 1, 4 or 8, worse at 16), so a document
        # batch runs a few texts per model call and takes a turn on its lane for each: without a query lane, a query
        # arriving meanwhile gets the model next instead of after the whole batch. Turns go to the shortest waiting
        # call first (turns.py): concurrent questions then wait least in all.
        lane = self._lanes[lane_name]
        parts = []
        for start in range(0, len(texts), LOCAL_MODEL_CALL):
            part = texts[start : start + LOCAL_MODEL_CALL]
            async with lane.turns.turn(sum(map(len, part))):
                parts.append(await lane.embed(part, input_type))
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    async def _run(self, texts: list[str], input_type: InputType, lane: InputType | None = None) -> np.ndarray:
        started = time.perf_counter()
        try:
            async with self.limiter.slot():
                vectors = await self._call(texts, input_type, lane or input_type)
        except Exception as exc:
            EMBEDDER_ERRORS.labels(self.provider.name, getattr(exc, "error_type", type(exc).__name__)).inc()
            if wait := retry_after_of(exc):
                self.limiter.pause(wait)  # every caller of this provider waits, not only this batch's jobs
            raise
        EMBEDDER_LATENCY.labels(self.provider.name, self.provider.model).observe(time.perf_counter() - started)
        EMBEDDED_TEXTS.labels(self.provider.name, input_type).inc(len(texts))
        return vectors

    async def embed(self, texts: list[str], input_type: InputType) -> np.ndarray:
        """One call for these texts now, outside the document queue, on the query lane (the HTTP API: a recall's
        query, and the document a store_memory waits for on its request path, both at full priority)."""
        return await self._run(texts, input_type, "query")

    async def embed_in_context(self, chunks: list[str]) -> np.ndarray | None:
        """A document's chunks embedded together, where the provider can (Voyage's contextualized embeddings, Jina's
        late chunking); None where it cannot."""
        method = getattr(self.provider, "embed_in_context", None)
        if method is None:
            return None
        started = time.perf_counter()
        async with self.limiter.slot():
            vectors = await method(chunks)
        EMBEDDER_LATENCY.labels(self.provider.name, self.provider.model).observe(time.perf_counter() - started)
        EMBEDDED_TEXTS.labels(self.provider.name, "document").inc(len(chunks))
        return vectors

    async def embed_queries(self, texts: list[str]) -> np.ndarray:
        return await self._run(texts, "query")

    async def warm(self) -> None:
        """Load a local model in each of its lanes, before the worker reports healthy: a document process that
        cannot start then fails the embedder's start, where health and the logs show it, rather than every stored
        fragment's job until each is dead-lettered. An HTTP provider is not called (a paid call, and an API that is
        down must not keep the worker from starting)."""
        one_per_lane = {id(lane): input_type for input_type, lane in self._lanes.items()}
        await asyncio.gather(*(self._run(["warm up"], input_type) for input_type in one_per_lane.values()))

    async def embed_document(self, text: str, key: Any = None) -> np.ndarray:
        """Embed `text` in the next batch; with a `key` (and a store) the vector is written before this returns."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending.append((text, key, future))
        if self._pump_task is None or self._pump_task.done():
            self._pump_task = asyncio.create_task(self._pump())
        return await future

    async def _pump(self) -> None:
        """Take batches off the pending list until it is empty. A local model runs one batch at a time; an HTTP
        provider gets each batch as its own task (the limiter caps how many run at once)."""
        while self._pending:
            if len(self._pending) < self.max_batch:
                await asyncio.sleep(self.window_s)  # the batching window: let concurrent jobs join
            batch, self._pending = self._pending[: self.max_batch], self._pending[self.max_batch :]
            if self._is_async:
                task = asyncio.create_task(self._process(batch))
                self._in_flight.add(task)
                task.add_done_callback(self._in_flight.discard)
            else:
                await self._process(batch)

    async def _process(self, batch: list[tuple[str, Any, asyncio.Future[Any]]]) -> None:
        try:
            vectors = await self._run([t for t, _, _ in batch], "document")
            keyed = [i for i, (_, key, _) in enumerate(batch) if key is not None]
            if self.store and keyed:
                await self.store([batch[i][1] for i in keyed], vectors[keyed])
        except BaseException as exc:
            for _, _, future in batch:
                if not future.done():
                    future.set_exception(exc if isinstance(exc, Exception) else RuntimeError("embedding cancelled"))
            if not isinstance(exc, Exception):
                raise
        else:
            for (_, _, future), vector in zip(batch, vectors, strict=True):
                if not future.done():
                    future.set_result(vector)

    async def aclose(self) -> None:
        tasks = [t for t in (self._pump_task, *self._in_flight) if t and not t.done()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        # a process lane waits for its child's call in progress: off the loop, so other shutdown work goes on
        await asyncio.to_thread(self.close)
        closer = getattr(self.provider, "aclose", None)
        if closer:
            await closer()

    def close(self) -> None:
        for lane in set(self._lanes.values()):
            lane.close()

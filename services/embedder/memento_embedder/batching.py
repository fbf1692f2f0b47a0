"""Coalesce concurrent embedding requests into batches (by size or time window) on one model thread.

Queries (on a recall's request path) go ahead of document batches so a backlog of writes never delays a search.
"""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from memento_embedder.providers.base import InputType, Provider
from memento_shared.telemetry.metrics import EMBEDDED_TEXTS, EMBEDDER_ERRORS, EMBEDDER_LATENCY


class Batcher:
    def __init__(self, provider: Provider, max_batch: int = 16, window_s: float = 0.01) -> None:
        self.provider = provider
        self.max_batch = max_batch
        self.window_s = window_s
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed")  # the model is not re-entrant
        self._pending: list[tuple[str, asyncio.Future]] = []
        self._flush_task: asyncio.Task | None = None
        self._model_lock = asyncio.Lock()
        self.calls = 0  # texts sent to the provider; tests use it to prove idempotency

    async def _run(self, texts: list[str], input_type: InputType) -> np.ndarray:
        loop = asyncio.get_running_loop()
        started = time.perf_counter()
        try:
            vectors = await loop.run_in_executor(self._executor, self.provider.embed, texts, input_type)
        except Exception as exc:
            EMBEDDER_ERRORS.labels(self.provider.name, type(exc).__name__).inc()
            raise
        EMBEDDER_LATENCY.labels(self.provider.name, self.provider.model).observe(time.perf_counter() - started)
        EMBEDDED_TEXTS.labels(self.provider.name, input_type).inc(len(texts))
        self.calls += len(texts)
        return vectors

    async def embed_queries(self, texts: list[str]) -> np.ndarray:
        async with self._model_lock:
            return await self._run(texts, "query")

    async def embed_document(self, text: str) -> np.ndarray:
        future: asyncio.Future = asyncio.get_running_loop().create_future()
        self._pending.append((text, future))
        if len(self._pending) >= self.max_batch:
            await self._flush()
        elif self._flush_task is None or self._flush_task.done():
            self._flush_task = asyncio.create_task(self._flush_later())
        return await future

    async def _flush_later(self) -> None:
        await asyncio.sleep(self.window_s)
        await self._flush()

    async def _flush(self) -> None:
        batch, self._pending = self._pending[: self.max_batch], self._pending[self.max_batch :]
        if not batch:
            return
        try:
            async with self._model_lock:
                vectors = await self._run([t for t, _ in batch], "document")
        except Exception as exc:
            for _, future in batch:
                if not future.done():
                    future.set_exception(exc)
        else:
            for (_, future), vector in zip(batch, vectors, strict=True):
                if not future.done():
                    future.set_result(vector)
        if self._pending:
            self._flush_task = asyncio.create_task(self._flush_later())

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

"""Query embeddings from the embedder service (OpenAI-compatible /v1/embeddings plus `input_type`).

The model runs in the embedder process, not here: its OpenMP threads spin and would steal the cores memory-api
needs to answer in milliseconds, and one loaded model serves every memory-api replica. Repeated queries hit a
small LRU cache.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import Any

import numpy as np

from memento_shared import jsonio
from memento_shared.internal_http import InternalClient, InternalTimeout, InternalUnreachable
from memento_shared.telemetry.tracing import inject_headers


class EmbeddingUnavailable(Exception):
    pass


class EmbeddingClient:
    def __init__(self, base_url: str, cache_size: int = 2048) -> None:
        self.client = InternalClient(base_url, timeout_s=10.0)
        self.cache: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self.cache_size = cache_size
        self.in_flight: dict[tuple[str, str], asyncio.Task[Any]] = {}

    async def embed_query(self, text: str, profile: str) -> np.ndarray:
        """A query vector in `profile`'s space (cached per profile: vectors of two profiles never mix). Callers asking
        for the same text while it is being embedded share that one call (a context's memories and its skip list
        embed the same message at once)."""
        key = (profile, text)
        cached = self.cache.get(key)
        if cached is not None:
            self.cache.move_to_end(key)
            return cached
        task = self.in_flight.get(key)
        if task is None:
            task = asyncio.create_task(self._embed(text, profile, "query"))
            self.in_flight[key] = task
            task.add_done_callback(lambda done: self._settle(key, done))
        # shielded: one caller given up (a cancelled request) does not cancel the vector the others wait for
        return await asyncio.shield(task)

    def _settle(self, key: tuple[str, str], task: asyncio.Task[Any]) -> None:
        self.in_flight.pop(key, None)
        if task.cancelled() or task.exception() is not None:
            return
        self.cache[key] = task.result()
        if len(self.cache) > self.cache_size:
            self.cache.popitem(last=False)

    async def embed_document(self, text: str, profile: str) -> np.ndarray:
        """A stored text's vector in `profile`'s space, as the embedder worker would write it, computed now on the
        embedder's query lane (store_memory's request path). Not cached: a text is stored once."""
        return await self._embed(text, profile, "document")

    async def _embed(self, text: str, profile: str, input_type: str) -> np.ndarray:
        try:
            answer = await self.client.post_json(
                "/v1/embeddings", {"input": [text], "input_type": input_type, "profile": profile}, inject_headers()
            )
            if answer.status != 200:
                raise ValueError(f"embedder answered {answer.status}")
            body = jsonio.loads(answer.content)
            if body.get("profile", profile) != profile:
                raise ValueError(f"embedder answered for profile {body.get('profile')!r}")
            vector = np.asarray(body["data"][0]["embedding"], dtype=np.float32)
        except (InternalTimeout, InternalUnreachable, KeyError, TypeError, IndexError, ValueError) as exc:
            raise EmbeddingUnavailable(type(exc).__name__) from exc
        return vector

    async def aclose(self) -> None:
        await self.client.aclose()

"""Query and passage embeddings from the embedder service (OpenAI-compatible /v1/embeddings plus `input_type`).

The model runs in the embedder process, not here: its OpenMP threads spin and would steal the cores memory-api
needs to answer in milliseconds, and one loaded model serves every memory-api replica. Vectors are kept in a small
LRU cache per (profile, input type, text), and callers asking for a text being embedded share that one call.
"""

from __future__ import annotations

import asyncio
import functools
from collections import OrderedDict

import numpy as np

from memento_memory_api import server_timing
from memento_shared import jsonio
from memento_shared.internal_http import InternalClient, InternalTimeout, InternalUnreachable
from memento_shared.telemetry.tracing import inject_headers

Key = tuple[str, str, str]  # (profile, input type, text)


class EmbeddingUnavailable(Exception):
    pass


class EmbeddingClient:
    def __init__(self, base_url: str, cache_size: int = 2048) -> None:
        self.client = InternalClient(base_url, timeout_s=10.0)
        self.cache: OrderedDict[Key, np.ndarray] = OrderedDict()
        self.cache_size = cache_size
        self.in_flight: dict[Key, asyncio.Future[np.ndarray]] = {}

    async def embed_query(self, text: str, profile: str) -> np.ndarray:
        """A query vector in `profile`'s space (cached per profile: vectors of two profiles never mix). Callers asking
        for the same text while it is being embedded share that one call (a context's memories and its skip list
        embed the same message at once)."""
        return (await self._shared([text], profile, "query"))[0]

    async def embed_document(self, text: str, profile: str) -> np.ndarray:
        """A stored text's vector in `profile`'s space, as the embedder worker would write it, computed now on the
        embedder's query lane (store_memory's request path)."""
        return (await self._shared([text], profile, "document"))[0]

    async def embed_passages(self, texts: list[str], profile: str, stage: str = "embed") -> list[np.ndarray]:
        """Stored texts' vectors, as the embedder worker would write them, in one call for those not cached or
        already being embedded: a search scoring the caller's rows that have no vector yet (recall.fresh, whose
        wait is the `fresh` stage of the call's Server-Timing). Two searches meeting the same fresh row share its
        vector rather than each paying the model for it."""
        return await self._shared(texts, profile, "document", stage)

    async def _shared(self, texts: list[str], profile: str, input_type: str, stage: str = "embed") -> list[np.ndarray]:
        keys = [(profile, input_type, t) for t in texts]
        waits: dict[Key, asyncio.Future[np.ndarray]] = {}
        wanted: list[Key] = []
        for key in dict.fromkeys(keys):
            cached = self.cache.get(key)
            if cached is not None:
                self.cache.move_to_end(key)
                future: asyncio.Future[np.ndarray] = asyncio.get_running_loop().create_future()
                future.set_result(cached)
                waits[key] = future
            elif key in self.in_flight:
                waits[key] = self.in_flight[key]
            else:
                wanted.append(key)
        if wanted:
            task = asyncio.ensure_future(self._embed([k[2] for k in wanted], profile, input_type))
            for index, key in enumerate(wanted):
                waits[key] = self.in_flight[key] = asyncio.ensure_future(_nth(task, index))
                waits[key].add_done_callback(functools.partial(self._settle, key))
        # shielded: one caller given up (a cancelled request) does not cancel the vectors the others wait for
        with server_timing.stage(stage):  # the call's wait, another caller's call or the queue included
            return [await asyncio.shield(waits[key]) for key in keys]

    def _settle(self, key: Key, future: asyncio.Future[np.ndarray]) -> None:
        if self.in_flight.get(key) is future:
            del self.in_flight[key]
        if future.cancelled() or future.exception() is not None:
            return
        self.cache[key] = future.result()
        if len(self.cache) > self.cache_size:
            self.cache.popitem(last=False)

    async def _embed(self, texts: list[str], profile: str, input_type: str) -> np.ndarray:
        try:
            answer = await self.client.post_json(
                "/v1/embeddings", {"input": texts, "input_type": input_type, "profile": profile}, inject_headers()
            )
            if answer.status != 200:
                raise ValueError(f"embedder answered {answer.status}")
            body = jsonio.loads(answer.content)
            if body.get("profile", profile) != profile:
                raise ValueError(f"embedder answered for profile {body.get('profile')!r}")
            vectors = np.asarray([d["embedding"] for d in body["data"]], dtype=np.float32)
            if len(vectors) != len(texts):
                raise ValueError(f"embedder answered {len(vectors)} vectors for {len(texts)} texts")
        except (InternalTimeout, InternalUnreachable, KeyError, TypeError, IndexError, ValueError) as exc:
            raise EmbeddingUnavailable(type(exc).__name__) from exc
        return vectors

    async def aclose(self) -> None:
        await self.client.aclose()


async def _nth(task: asyncio.Future[np.ndarray], index: int) -> np.ndarray:
    vectors = await asyncio.shield(task)
    row: np.ndarray = vectors[index].copy()  # not a view: the cache would keep the whole batch alive
    return row

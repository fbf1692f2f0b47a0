"""Voyage AI embeddings (seed 001 Part 3): POST /v1/embeddings with `input_type` query or document and
`output_dimension` (Matryoshka sizes 256, 512, 1024, 2048)."""

from __future__ import annotations

import httpx
import numpy as np

from memento_embedder.providers.base import InputType, to_matrix
from memento_embedder.providers.http import post_embeddings

DEFAULT_BASE_URL = "https://api.voyageai.com"


class VoyageProvider:
    name = "voyage"

    def __init__(self, *, model: str, dimension: int, api_key: str, base_url: str | None, timeout: float) -> None:
        self.model = model
        self.dimension = dimension
        self._api_key = api_key
        self._url = (base_url or DEFAULT_BASE_URL).rstrip("/") + "/v1/embeddings"
        self._client = httpx.AsyncClient(timeout=timeout)

    async def embed(self, texts: list[str], input_type: InputType) -> np.ndarray:
        body = {"input": texts, "model": self.model, "input_type": input_type, "output_dimension": self.dimension}
        vectors = await post_embeddings(self._client, self.name, self._url, self._api_key, body)
        return to_matrix(vectors, len(texts), self.dimension)

    async def aclose(self) -> None:
        await self._client.aclose()

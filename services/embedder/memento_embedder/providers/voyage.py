"""Voyage AI embeddings (seed 001 Part 3): POST /v1/embeddings with `input_type` query or document and
`output_dimension` (Matryoshka sizes 256, 512, 1024, 2048); a canonical document's chunks together through POST
/v1/contextualizedembeddings (voyage-context-3: each chunk's vector knows the document it is part of)."""

from __future__ import annotations

from typing import Any

import numpy as np

from memento_embedder.providers.base import InputType, ProviderError, to_matrix
from memento_embedder.providers.http import EmbeddingsApi


class VoyageProvider(EmbeddingsApi):
    name = "voyage"
    default_base_url = "https://api.voyageai.com"

    def body(self, texts: list[str], input_type: InputType) -> dict[str, Any]:
        return {"input": texts, "model": self.model, "input_type": input_type, "output_dimension": self.dimension}

    async def embed_in_context(self, chunks: list[str]) -> np.ndarray:
        """One document's chunks, in order (without overlap: the model sees the whole document)."""
        url = self._url.removesuffix("/v1/embeddings") + "/v1/contextualizedembeddings"
        body = {"inputs": [chunks], "model": self.model, "input_type": "document", "output_dimension": self.dimension}
        documents = await self._post_json(body, url)
        try:
            inner = sorted(documents, key=lambda d: d.get("index", 0))[0]["data"]
            vectors = [item["embedding"] for item in sorted(inner, key=lambda d: d.get("index", 0))]
        except (KeyError, TypeError, IndexError, AttributeError) as exc:
            raise ProviderError("voyage sent an unexpected body", error_type="bad_response") from exc
        return to_matrix(vectors, len(chunks), self.dimension)

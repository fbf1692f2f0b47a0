"""Jina AI embeddings (seed 001 Part 3): POST /v1/embeddings with `task` retrieval.query or retrieval.passage
and `dimensions` (Matryoshka, 32..1024); a canonical document's chunks together with `late_chunking` (the model reads
the whole document, then pools each chunk's tokens)."""

from __future__ import annotations

from typing import Any

import numpy as np

from memento_embedder.providers.base import InputType, to_matrix
from memento_embedder.providers.http import EmbeddingsApi

TASKS = {"query": "retrieval.query", "document": "retrieval.passage"}


class JinaProvider(EmbeddingsApi):
    name = "jina"
    default_base_url = "https://api.jina.ai"

    def body(self, texts: list[str], input_type: InputType) -> dict[str, Any]:
        return {"input": texts, "model": self.model, "task": TASKS[input_type], "dimensions": self.dimension}

    async def embed_in_context(self, chunks: list[str]) -> np.ndarray:
        body = {**self.body(chunks, "document"), "late_chunking": True}
        return to_matrix(await self._post(body), len(chunks), self.dimension)

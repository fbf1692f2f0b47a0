"""Jina AI embeddings (seed 001 Part 3): POST /v1/embeddings with `task` retrieval.query or retrieval.passage
and `dimensions` (Matryoshka, 32..1024)."""

from __future__ import annotations

from memento_embedder.providers.base import InputType
from memento_embedder.providers.http import EmbeddingsApi

TASKS = {"query": "retrieval.query", "document": "retrieval.passage"}


class JinaProvider(EmbeddingsApi):
    name = "jina"
    default_base_url = "https://api.jina.ai"

    def body(self, texts: list[str], input_type: InputType) -> dict:
        return {"input": texts, "model": self.model, "task": TASKS[input_type], "dimensions": self.dimension}

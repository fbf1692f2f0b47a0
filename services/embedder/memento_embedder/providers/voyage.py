"""Voyage AI embeddings (seed 001 Part 3): POST /v1/embeddings with `input_type` query or document and
`output_dimension` (Matryoshka sizes 256, 512, 1024, 2048)."""

from __future__ import annotations

from memento_embedder.providers.base import InputType
from memento_embedder.providers.http import EmbeddingsApi


class VoyageProvider(EmbeddingsApi):
    name = "voyage"
    default_base_url = "https://api.voyageai.com"

    def body(self, texts: list[str], input_type: InputType) -> dict:
        return {"input": texts, "model": self.model, "input_type": input_type, "output_dimension": self.dimension}

"""The provider interface every embedding backend implements (offline model, OpenAI-compatible, Voyage, Jina)."""

from __future__ import annotations

from typing import Literal, Protocol

import numpy as np

InputType = Literal["query", "document"]


class Provider(Protocol):
    name: str
    model: str
    dimension: int

    def embed(self, texts: list[str], input_type: InputType) -> np.ndarray:
        """Blocking: (len(texts), dimension) float32, L2-normalised. Called from a worker thread."""
        ...

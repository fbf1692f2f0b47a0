"""The provider interface every embedding backend implements (offline model, OpenAI and compatible servers,
Voyage, Jina), and the one error type they raise.

`embed` may be a plain function (the offline model: CPU-bound, run on a worker thread by the Batcher) or a
coroutine (HTTP providers). Vectors come back as (len(texts), dimension) float32, L2-normalised. A local model
may also offer `replica()`: a second, independent instance the Batcher keeps for queries alone.
"""

from __future__ import annotations

from typing import Literal, Protocol

import numpy as np

InputType = Literal["query", "document"]


class Provider(Protocol):
    name: str
    model: str
    dimension: int

    def embed(self, texts: list[str], input_type: InputType) -> np.ndarray: ...


class ProviderError(Exception):
    """A provider call failed. `retry_after` carries a 429's Retry-After (seconds), which the worker honours;
    `error_type` is the metric label (rate_limited, server_error, client_error, timeout, connection, bad_response)."""

    def __init__(self, message: str, *, error_type: str, status: int | None = None, retry_after: float | None = None):
        super().__init__(message)
        self.error_type = error_type
        self.status = status
        self.retry_after = retry_after


def error_type_for(status: int) -> str:
    if status == 429:
        return "rate_limited"
    return "server_error" if status >= 500 else "client_error"


def to_matrix(vectors: list[list[float]], count: int, dimension: int) -> np.ndarray:
    """Check a provider's answer (count and dimension) and L2-normalise it: the cosine index expects unit vectors."""
    matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.shape != (count, dimension):
        raise ProviderError(
            f"expected {count} vectors of {dimension} dimensions, got shape {matrix.shape}", error_type="bad_response"
        )
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1.0, norms)

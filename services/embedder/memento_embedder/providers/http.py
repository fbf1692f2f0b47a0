"""A JSON POST to an embedding API over httpx, with its failures mapped onto ProviderError (Voyage and Jina)."""

from __future__ import annotations

import httpx

from memento_embedder.providers.base import ProviderError, error_type_for
from memento_shared.worker import parse_retry_after


async def post_embeddings(client: httpx.AsyncClient, provider: str, url: str, api_key: str, body: dict) -> list:
    """The `data[].embedding` lists of an OpenAI-shaped answer, in input order."""
    try:
        response = await client.post(url, json=body, headers={"Authorization": f"Bearer {api_key}"})
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
        data = response.json()["data"]
        return [item["embedding"] for item in sorted(data, key=lambda d: d.get("index", 0))]
    except (ValueError, KeyError, TypeError) as exc:
        raise ProviderError(f"{provider} sent an unexpected body", error_type="bad_response") from exc

"""Build the provider a profile names. API keys come from the environment only, never from the database."""

from __future__ import annotations

from memento_embedder.providers.base import Provider, ProviderError
from memento_embedder.settings import EmbedderSettings

PROVIDERS = ("offline", "openai", "openai_compat", "voyage", "jina")


def build_provider(
    provider: str, model: str, dimension: int, base_url: str | None, settings: EmbedderSettings
) -> Provider:
    timeout = settings.embedding_timeout_s
    if provider == "offline":
        from memento_embedder.providers.offline import OfflineProvider

        built = OfflineProvider(settings.embedding_threads)
        if (model, dimension) != (built.model, built.dimension):
            raise ProviderError(f"the offline model is {built.model}/{built.dimension}", error_type="config")
        return built
    if provider in ("openai", "openai_compat"):
        from memento_embedder.providers.openai_compat import OpenAIProvider

        key = settings.openai_api_key if provider == "openai" else settings.embedding_api_key
        if provider == "openai" and not key:
            raise ProviderError("OPENAI_API_KEY is not set", error_type="config")
        if provider == "openai_compat" and not base_url:
            raise ProviderError("EMBEDDING_BASE_URL is not set for openai_compat", error_type="config")
        return OpenAIProvider(
            name=provider,
            model=model,
            dimension=dimension,
            api_key=key,
            base_url=base_url,
            timeout=timeout,
            send_dimensions=provider == "openai" and model.startswith("text-embedding-3"),
        )
    if provider in ("voyage", "jina"):
        from memento_embedder.providers.jina import JinaProvider
        from memento_embedder.providers.voyage import VoyageProvider

        key = settings.voyage_api_key if provider == "voyage" else settings.jina_api_key
        if not key:
            raise ProviderError(f"{provider.upper()}_API_KEY is not set", error_type="config")
        cls = VoyageProvider if provider == "voyage" else JinaProvider
        return cls(model=model, dimension=dimension, api_key=key, base_url=base_url, timeout=timeout)
    raise ProviderError(f"unknown embedding provider {provider!r} (one of {', '.join(PROVIDERS)})", error_type="config")

"""The embedder's settings: its port and the embedding providers (EMBEDDING_PROVIDER: offline | openai |
openai_compat | voyage | jina)."""

from __future__ import annotations

from pydantic import Field

from memento_shared.settings import ApiKeySettings, WorkerSettings
from memento_shared.worker import Runtime


class EmbedderSettings(WorkerSettings, ApiKeySettings):
    """The embedder's own variables over a worker's sections and the providers' keys."""

    embedder_port: int = Field(56334, alias="EMBEDDER_PORT")
    embedding_model: str = Field("text-embedding-3-small", alias="EMBEDDING_MODEL")
    embedding_dimensions: int = Field(1536, alias="EMBEDDING_DIMENSIONS")
    embedding_provider: str = Field("offline", alias="EMBEDDING_PROVIDER")
    # embedding providers (EMBEDDING_PROVIDER: offline | openai | openai_compat | voyage | jina)
    embedding_base_url: str = Field("", alias="EMBEDDING_BASE_URL")
    embedding_api_key: str = Field("", alias="EMBEDDING_API_KEY")
    embedding_batch_size: int = Field(32, alias="EMBEDDING_BATCH_SIZE")
    embedding_batch_window_ms: float = Field(10.0, alias="EMBEDDING_BATCH_WINDOW_MS")
    embedding_concurrency: int = Field(4, alias="EMBEDDING_CONCURRENCY")
    embedding_rate_limit: float = Field(0.0, alias="EMBEDDING_RATE_LIMIT")  # requests/s per provider, 0: none
    embedding_timeout_s: float = Field(30.0, alias="EMBEDDING_TIMEOUT_SECONDS")
    # threads of the offline model; 0: every core but one, which stays free for the services sharing the machine
    embedding_threads: int = Field(0, alias="EMBEDDING_THREADS")
    # the offline model embeds documents in a child session niced by this much (0: on a thread, not niced)
    embedding_document_niceness: int = Field(10, alias="EMBEDDING_DOCUMENT_NICENESS", ge=0, le=19)
    voyage_api_key: str = Field("", alias="VOYAGE_API_KEY")
    jina_api_key: str = Field("", alias="JINA_API_KEY")


def settings_of(rt: Runtime) -> EmbedderSettings:
    """The worker's own settings on its runtime (memento_shared.worker types them as the shared WorkerSettings)."""
    settings = rt.settings
    if not isinstance(settings, EmbedderSettings):
        raise TypeError(f"the runtime holds {type(settings).__name__}, not EmbedderSettings")
    return settings

"""The evaluator's settings: its port and its scorer (Gemini when GEMINI_API_KEY is set, else the offline scorer)."""

from __future__ import annotations

from pydantic import Field

from memento_shared.settings import LlmSettings, MemoryConfigSettings, WorkerSettings
from memento_shared.worker import Runtime


class EvaluatorSettings(WorkerSettings, LlmSettings, MemoryConfigSettings):
    """The evaluator's own variables over a worker's sections, the language model (facts) and MEMORY_CONFIG."""

    evaluator_port: int = Field(56335, alias="EVALUATOR_PORT")
    # evaluator: Gemini when GEMINI_API_KEY is set, the offline scorer otherwise
    gemini_model: str = Field("gemini-2.5-flash", alias="GEMINI_MODEL")
    gemini_base_url: str = Field("", alias="GEMINI_BASE_URL")
    evaluator_concurrency: int = Field(4, alias="EVALUATOR_CONCURRENCY")
    evaluator_rate_limit: float = Field(5.0, alias="EVALUATOR_RATE_LIMIT")  # requests/s, 0: none
    evaluator_timeout_s: float = Field(30.0, alias="EVALUATOR_TIMEOUT_SECONDS")


def settings_of(rt: Runtime) -> EvaluatorSettings:
    """The worker's own settings on its runtime (memento_shared.worker types them as the shared WorkerSettings)."""
    settings = rt.settings
    if not isinstance(settings, EvaluatorSettings):
        raise TypeError(f"the runtime holds {type(settings).__name__}, not EvaluatorSettings")
    return settings

"""memory-api's language model: the one implementation in memento_shared.llm (the evaluator uses it too), named here
for memory-api's own callers."""

from __future__ import annotations

from memento_shared.llm import (
    LLM,
    GeminiModel,
    LLMFailed,
    Model,
    OpenAIModel,
    ResponsesModel,
    from_settings,
    heuristic_from_settings,
    json_array,
    responses_base,
)

__all__ = [
    "LLM",
    "GeminiModel",
    "LLMFailed",
    "Model",
    "OpenAIModel",
    "ResponsesModel",
    "from_settings",
    "heuristic_from_settings",
    "json_array",
    "responses_base",
]

"""A language model for the text work Memento may hand to one, when one is configured: seed 003's consolidation
summaries, distillation and identity crystals (memory-api), seed 004's heuristic fact extraction (memory-api), and the
facts the evaluator draws from a stored fragment (issue 28). LLM_PROVIDER `openai` (the `openai` client: OpenAI, or any
OpenAI-compatible server at LLM_BASE_URL) or `gemini` (`google-genai`). Without one, or when it fails, callers take
their offline path: a call never fails because the model did. Importing this module needs both SDKs installed (the
services that call a model depend on them; the shared library itself does not).

Each call is bounded (LLM_TIMEOUT_SECONDS per attempt, LLM_MAX_ATTEMPTS attempts); a 429's Retry-After is waited out
when it is no longer than LLM_MAX_RETRY_WAIT_SECONDS, other failures back off briefly. The SDKs' own retries are off,
so these are the only ones. What is sent is the caller's text; nothing of it is logged."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from typing import Any, Protocol

import openai
from google import genai
from google.genai import errors as genai_errors
from google.genai import types as genai_types

from memento_shared.settings import HeuristicSettings, LlmSettings
from memento_shared.worker import parse_retry_after

log = logging.getLogger(__name__)
BACKOFF_S = 0.5


_FENCE = re.compile(r"```(?:json)?\s*\n([\s\S]*?)```", re.I)
_MAX_STARTS = 64  # bounds the work on a long answer full of brackets


def json_array(text: str) -> list[Any] | None:
    """The JSON array in a model's answer, which may wrap it in prose or a ```json fence: the first array that parses,
    looked for inside fences first (prose may hold brackets of its own, "[1]"); None when the answer holds none."""
    if not text:
        return None
    decoder = json.JSONDecoder()
    for part in [*_FENCE.findall(text), text]:
        start, tries = part.find("["), 0
        while start != -1 and tries < _MAX_STARTS:
            try:
                value, _ = decoder.raw_decode(part, start)
            except (ValueError, RecursionError):  # not JSON, or nested deeper than the parser goes
                value = None
            if isinstance(value, list):
                return value
            start, tries = part.find("[", start + 1), tries + 1
    return None


class LLMFailed(Exception):
    def __init__(self, message: str, retry_after: float | None = None, retryable: bool = True) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.retryable = retryable


class Model(Protocol):
    name: str

    async def complete(self, system: str, prompt: str, max_tokens: int) -> str: ...

    async def aclose(self) -> None: ...


class OpenAIModel:
    def __init__(self, api_key: str, model: str, base_url: str | None, timeout_s: float) -> None:
        self.name = model
        self._client = openai.AsyncOpenAI(api_key=api_key, base_url=base_url or None, timeout=timeout_s, max_retries=0)

    async def complete(self, system: str, prompt: str, max_tokens: int) -> str:
        try:
            answer = await self._client.chat.completions.create(
                model=self.name,
                messages=[{"role": "system", "content": system}, {"role": "user", "content": prompt}],
                max_tokens=max_tokens,
                temperature=0,
            )
        except openai.APIStatusError as exc:
            retry_after = parse_retry_after(exc.response.headers.get("retry-after"))
            retryable = exc.status_code == 429 or exc.status_code >= 500
            raise LLMFailed(f"answered {exc.status_code}", retry_after, retryable) from exc
        except openai.APIError as exc:  # connection errors and timeouts
            raise LLMFailed(type(exc).__name__) from exc
        text = answer.choices[0].message.content if answer.choices else None
        if not text:
            raise LLMFailed("answered without text", retryable=False)
        return text

    async def aclose(self) -> None:
        await self._client.close()


class ResponsesModel:
    """The OpenAI Responses API (seed 004 §9.3's heuristic fact extraction), through the `openai` client."""

    def __init__(self, api_key: str, model: str, base_url: str, timeout_s: float) -> None:
        self.name = model
        self._client = openai.AsyncOpenAI(
            api_key=api_key, base_url=responses_base(base_url), timeout=timeout_s, max_retries=0
        )

    async def complete(self, system: str, prompt: str, max_tokens: int) -> str:
        try:
            answer = await self._client.responses.create(
                model=self.name, instructions=system, input=prompt, max_output_tokens=max_tokens
            )
        except openai.APIStatusError as exc:
            retry_after = parse_retry_after(exc.response.headers.get("retry-after"))
            retryable = exc.status_code == 429 or exc.status_code >= 500
            raise LLMFailed(f"answered {exc.status_code}", retry_after, retryable) from exc
        except openai.APIError as exc:
            raise LLMFailed(type(exc).__name__) from exc
        if not answer.output_text:
            raise LLMFailed("answered without text", retryable=False)
        return answer.output_text

    async def aclose(self) -> None:
        await self._client.close()


def responses_base(url: str) -> str:
    """Seed 004 §9.3: the configured URL is the endpoint when it ends with /v1/responses, else /v1/responses is
    appended; the `openai` client appends /responses itself, so it is given the part before."""
    url = url.strip().rstrip("/")
    if url.endswith("/v1/responses"):
        return url[: -len("/responses")]
    return url if url.endswith("/v1") else url + "/v1"


class GeminiModel:
    def __init__(self, api_key: str, model: str, base_url: str | None, timeout_s: float) -> None:
        self.name = model
        options = genai_types.HttpOptions(base_url=base_url or None, timeout=int(timeout_s * 1000))
        self._client = genai.Client(api_key=api_key, http_options=options)

    async def complete(self, system: str, prompt: str, max_tokens: int) -> str:
        config = genai_types.GenerateContentConfig(
            system_instruction=system, temperature=0, max_output_tokens=max_tokens
        )
        try:
            answer = await self._client.aio.models.generate_content(model=self.name, contents=prompt, config=config)
        except genai_errors.APIError as exc:
            headers = getattr(exc.response, "headers", None) or {}
            retry_after = parse_retry_after(headers.get("retry-after") if hasattr(headers, "get") else None)
            raise LLMFailed(f"answered {exc.code}", retry_after, exc.code == 429 or exc.code >= 500) from exc
        except Exception as exc:  # httpx transport errors and timeouts
            raise LLMFailed(type(exc).__name__) from exc
        if not answer.text:
            raise LLMFailed("answered without text", retryable=False)
        return answer.text

    async def aclose(self) -> None:
        await self._client.aio.aclose()


class LLM:
    """The configured model with its retry policy; `complete` answers None when there is no model or it failed."""

    def __init__(self, model: Model | None, attempts: int = 3, max_retry_wait_s: float = 5.0) -> None:
        self.model = model
        self.attempts = max(1, attempts)
        self.max_retry_wait_s = max_retry_wait_s

    @property
    def source(self) -> str:
        return f"llm:{self.model.name}" if self.model else "offline"

    async def complete(self, system: str, prompt: str, max_tokens: int = 800) -> str | None:
        if self.model is None:
            return None
        for attempt in range(1, self.attempts + 1):
            try:
                return await self.model.complete(system, prompt, max_tokens)
            except LLMFailed as exc:
                wait = exc.retry_after if exc.retry_after is not None else BACKOFF_S * attempt
                last = attempt == self.attempts or not exc.retryable or wait > self.max_retry_wait_s
                log.warning("llm.failed", extra={"error_type": str(exc), "attempt": attempt, "giving_up": last})
                if last:
                    return None
                await asyncio.sleep(wait)
        return None

    async def aclose(self) -> None:
        if self.model is not None:
            await self.model.aclose()


def from_settings(settings: LlmSettings) -> LLM:
    provider = settings.llm_provider.strip().lower()
    timeout = settings.llm_timeout_s
    if provider == "openai":
        key = settings.llm_api_key or settings.openai_api_key
        model: Model | None = OpenAIModel(
            key or "none", settings.llm_model or "gpt-4o-mini", settings.llm_base_url, timeout
        )
    elif provider == "gemini":
        key = settings.llm_api_key or settings.gemini_api_key
        model = GeminiModel(key, settings.llm_model or "gemini-2.5-flash", settings.llm_base_url, timeout)
    elif provider in ("", "offline"):
        model = None
    else:
        raise ValueError(f"LLM_PROVIDER: {settings.llm_provider!r} is not openai, gemini or offline")
    return LLM(model, settings.llm_max_attempts, settings.llm_max_retry_wait_s)


def heuristic_from_settings(settings: HeuristicSettings) -> LLM | None:
    """Seed 004's fact extraction model, when MEMORY_HEURISTIC_ENABLED and a base URL are set; None otherwise."""
    if not settings.memory_heuristic_enabled:
        return None
    if not settings.memory_heuristic_base_url.strip():
        raise ValueError("MEMORY_HEURISTIC_BASE_URL: needed when MEMORY_HEURISTIC_ENABLED (an absolute URL)")
    if "://" not in settings.memory_heuristic_base_url:
        raise ValueError("MEMORY_HEURISTIC_BASE_URL: must be an absolute URL with scheme and host")
    key = settings.memory_heuristic_api_key or settings.openai_api_key or "none"
    timeout = settings.memory_heuristic_timeout_ms / 1000
    model = ResponsesModel(key, settings.memory_heuristic_model, settings.memory_heuristic_base_url, timeout)
    return LLM(model, settings.llm_max_attempts, settings.llm_max_retry_wait_s)

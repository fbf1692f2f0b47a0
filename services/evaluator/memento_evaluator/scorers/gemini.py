"""Gemini Flash through `google-genai` (GEMINI_API_KEY; GEMINI_MODEL, GEMINI_BASE_URL to change model or endpoint).

Gemini rates informational value, specificity and actionability (seed 000 §7), each in [0, 1], as JSON;
quality = 0.4 x informational value + 0.3 x specificity + 0.3 x actionability. The SDK's own retries are off:
a failure raises ScorerError, the worker retries with backoff (a 429's Retry-After when longer, also pausing
every other call through the limiter), then dead-letters. The fragment text goes to Gemini; nothing of it is
logged.
"""

from __future__ import annotations

import json

from google import genai
from google.genai import errors, types

from memento_evaluator.scorers import Fragment, Score, ScorerError
from memento_shared.worker import ProviderLimiter, parse_retry_after

PROMPT = """You rate one note an AI agent stored in its long-term memory.
Return JSON with three numbers between 0 and 1:
- informational_value: how much durable, reusable knowledge it carries
- specificity: how concrete it is (names, numbers, versions, commands) rather than vague
- actionability: how directly it tells a future agent what to do or avoid
Topic: {topic}
Type: {type}
Note: {content}"""

SCHEMA = types.Schema(
    type=types.Type.OBJECT,
    properties={
        name: types.Schema(type=types.Type.NUMBER) for name in ("informational_value", "specificity", "actionability")
    },
    required=["informational_value", "specificity", "actionability"],
)
WEIGHTS = {"informational_value": 0.4, "specificity": 0.3, "actionability": 0.3}


def _retry_after(exc: errors.APIError) -> float | None:
    headers = getattr(exc.response, "headers", None) or {}
    return parse_retry_after(headers.get("retry-after") if hasattr(headers, "get") else None)


class GeminiScorer:
    name = "gemini"
    local = False

    def __init__(
        self, *, api_key: str, model: str, base_url: str | None, timeout_s: float, limiter: ProviderLimiter
    ) -> None:
        self.model = model
        self.limiter = limiter
        options = types.HttpOptions(base_url=base_url or None, timeout=int(timeout_s * 1000))
        self._client = genai.Client(api_key=api_key, http_options=options)

    async def score(self, fragment: Fragment) -> Score:
        prompt = PROMPT.format(topic=fragment.topic, type=fragment.type, content=fragment.content)
        config = types.GenerateContentConfig(
            temperature=0, response_mime_type="application/json", response_schema=SCHEMA
        )
        async with self.limiter.slot():
            try:
                response = await self._client.aio.models.generate_content(
                    model=self.model, contents=prompt, config=config
                )
            except errors.APIError as exc:
                retry_after = _retry_after(exc)
                if exc.code == 429:
                    self.limiter.pause(retry_after or 1.0)
                kind = "rate_limited" if exc.code == 429 else "server_error" if exc.code >= 500 else "client_error"
                raise ScorerError(f"gemini answered {exc.code}", error_type=kind, retry_after=retry_after) from exc
            except Exception as exc:  # httpx transport errors and timeouts
                raise ScorerError(f"gemini unreachable: {type(exc).__name__}", error_type="connection") from exc
        return _parse(response.text)

    async def aclose(self) -> None:
        await self._client.aio.aclose()


def _parse(text: str | None) -> Score:
    try:
        data = json.loads(text or "")
        parts = {name: max(0.0, min(1.0, float(data[name]))) for name in WEIGHTS}
    except (ValueError, KeyError, TypeError) as exc:
        raise ScorerError("gemini sent an answer that is not the requested JSON", error_type="bad_response") from exc
    quality = sum(WEIGHTS[name] * value for name, value in parts.items())
    return Score(round(quality, 3), {k: round(v, 3) for k, v in parts.items()})

"""The evaluator's composition: Gemini when GEMINI_API_KEY is set, the offline scorer otherwise, each behind a
per-provider limiter (EVALUATOR_CONCURRENCY calls at once, EVALUATOR_RATE_LIMIT per second); and the facts step's
model when LLM_PROVIDER is set (memento_evaluator.facts)."""

from __future__ import annotations

import logging

from memento_evaluator.facts import FactDrawer
from memento_evaluator.scorers.offline import OfflineScorer
from memento_evaluator.settings import settings_of
from memento_shared.worker import ProviderLimiter, Runtime

log = logging.getLogger(__name__)


async def setup(rt: Runtime) -> None:
    settings = settings_of(rt)
    if settings.gemini_api_key:
        from memento_evaluator.scorers.gemini import GeminiScorer

        limiter = ProviderLimiter("gemini", settings.evaluator_concurrency, settings.evaluator_rate_limit)
        rt.state["scorer"] = GeminiScorer(
            api_key=settings.gemini_api_key,
            model=settings.gemini_model,
            base_url=settings.gemini_base_url or None,
            timeout_s=settings.evaluator_timeout_s,
            limiter=limiter,
        )
    else:
        rt.state["scorer"] = OfflineScorer()
    log.info("evaluator.scorer", extra={"scorer": rt.state["scorer"].name})
    rt.state["facts"] = FactDrawer.from_settings(settings)


async def teardown(rt: Runtime) -> None:
    for part in ("scorer", "facts"):
        closer = getattr(rt.state.get(part), "aclose", None)
        if closer:
            await closer()

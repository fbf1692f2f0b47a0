"""The evaluator's facts step (issue 28): when LLM_PROVIDER is set, the model lists the facts a fragment states
(memento_shared.text.facts) and they are written to fragments.facts, which the full-text index searches beside the
content. Written only if the fragment still has the content they were drawn from (its content_hash): an amend in
between clears facts and brings its own event, which draws them again.

Best effort: without a model, or when it fails for good, facts stay NULL and the evaluation stands; nothing here
raises into the handler, so facts never dead-letter an evaluation. Logs carry a failure's type, never the text."""

from __future__ import annotations

import logging
from typing import Any

from memento_evaluator.settings import EvaluatorSettings
from memento_shared.db.rls import system_transaction
from memento_shared.llm import LLM, from_settings
from memento_shared.text import facts as text_facts
from memento_shared.text.links import entity_tokens, fact_tokens
from memento_shared.text.stems import with_fact_stems
from memento_shared.worker import ProviderLimiter, Runtime

log = logging.getLogger(__name__)

# no updated_at bump: the facts are derived, and the evaluation (verified_at >= updated_at) must stay current. The
# expansion gains the facts' stems (text.stems.with_fact_stems), so the full-text index finds them by a stem too, and
# the entities the names they give (text.links.fact_tokens), so recall's second hop follows them too (issue 53)
_WRITE_SQL = (
    "UPDATE agent_memory.fragments SET facts = $2, expansion = $4, entities = $5 WHERE id = $1 AND content_hash = $3"
)


class FactDrawer:
    """The configured model behind its own limiter (EVALUATOR_CONCURRENCY calls at once, EVALUATOR_RATE_LIMIT/s)."""

    def __init__(self, llm: LLM, limiter: ProviderLimiter) -> None:
        self.llm = llm
        self.limiter = limiter

    @classmethod
    def from_settings(cls, settings: EvaluatorSettings) -> FactDrawer | None:
        llm = from_settings(settings)
        if llm.model is None:
            return None
        return cls(llm, ProviderLimiter("llm", settings.evaluator_concurrency, settings.evaluator_rate_limit))

    async def draw(self, content: str, topic: str) -> list[str] | None:
        """The facts, [] when the model states none or answers no array; None when it failed for good."""
        async with self.limiter.slot():
            answer = await self.llm.complete(
                text_facts.SYSTEM, text_facts.prompt(content, topic), text_facts.MAX_TOKENS
            )
        return None if answer is None else text_facts.parse(answer)

    async def aclose(self) -> None:
        await self.llm.aclose()


async def draw_and_write(rt: Runtime, row: Any) -> str:
    """Draws the facts of a loaded fragment row and writes them; the outcome, for logs and tests: `off` (no model),
    `failed`, `none`, `stale` (deleted or amended since it was loaded) or `written`."""
    drawer: FactDrawer | None = rt.state.get("facts")
    if drawer is None:
        return "off"
    try:
        found = await drawer.draw(row["content"], row["topic"] or "")
        if not found:
            outcome = "failed" if found is None else "none"
        else:
            joined = text_facts.joined(found)
            expansion = with_fact_stems(row["expansion"], joined)
            own = row["entities"] if row["entities"] is not None else entity_tokens(row["content"])  # before 0025
            entities = fact_tokens(joined or "", own)
            async with rt.pool.acquire() as conn, system_transaction(conn):
                status = await conn.execute(_WRITE_SQL, row["id"], joined, row["content_hash"], expansion, entities)
            outcome = "stale" if status == "UPDATE 0" else "written"
    except Exception as exc:  # never the evaluation's failure; the type only (an SDK's message may quote the text)
        log.warning("facts.failed", extra={"worker": rt.name, "error_type": type(exc).__name__})
        return "failed"
    log.debug("facts.done", extra={"worker": rt.name, "outcome": outcome})
    return outcome

"""Evaluator event handlers: score a stored or amended fragment into quality_score, utility_score, verified_at.

Idempotent: a fragment judged since its last change (verified_at >= updated_at with a quality score) is skipped,
so a re-delivered event costs one query and no Gemini call. utility_score uses the same SQL function as
consolidation stage 8, so the two never disagree about the formula; like stage 8 and recall's access bump, the
evaluator leaves an anchor's utility_score as it is (its quality_score and verified_at are still recorded).

The score is written only if the fragment still has the content that was scored (its content_hash): an amend of
the content in between brings its own `fragment.amended` event, which scores the new content; an amend of the
topic, type, importance or anchor flag emits no event, and must not make the score vanish.

With LLM_PROVIDER set, the fragment's facts are drawn after its score (memento_evaluator.facts), under the same
content_hash rule; a fragment judged but still without facts (a crash between the two) gets them on re-delivery.
"""

from __future__ import annotations

import logging
from typing import Any, cast

from memento_evaluator import facts
from memento_evaluator.scorers import Fragment, Score
from memento_evaluator.scorers.offline import NOVELTY_PLAN, NOVELTY_SQL, NOVELTY_WINDOW
from memento_evaluator.settings import settings_of
from memento_shared.consolidation import utility_half_life_days
from memento_shared.db.rls import system_transaction
from memento_shared.telemetry.metrics import EVALUATIONS
from memento_shared.worker import Runtime

log = logging.getLogger(__name__)

_LOAD_SQL = (
    "SELECT id, tenant_id, workspace, agent_id, content, content_hash, topic, type, expansion, entities,"
    " quality_score IS NOT NULL AND verified_at >= updated_at AS judged, facts IS NOT NULL AS has_facts"
    " FROM agent_memory.fragments WHERE id = $1"
)
# verified_at is the statement's time, not the transaction's: the offline rules score inside the transaction, and a
# change committed meanwhile (updated_at) must not look newer than the judgement written after it
_WRITE_SQL = (
    "UPDATE agent_memory.fragments SET quality_score = $2, verified_at = statement_timestamp(),"
    " utility_score = CASE WHEN is_anchor THEN utility_score ELSE agent_memory.utility_score("
    "$2, importance, access_count, coalesce(accessed_at, created_at), $4) END"
    " WHERE id = $1 AND content_hash = $3"
)


async def evaluate_fragment(envelope: dict[str, Any], rt: Runtime) -> None:
    fragment_id = envelope["payload"]["fragment_id"]
    scorer = rt.state["scorer"]
    half_life = utility_half_life_days(settings_of(rt))
    score: Score | None = None
    status = ""
    async with rt.pool.acquire() as conn, system_transaction(conn):
        row = await conn.fetchrow(_LOAD_SQL, fragment_id)
        if row is not None and not row["judged"]:
            candidate = Fragment(row["content"], row["topic"], row["type"], await _novelty(conn, row))
            # the offline rules score inside the transaction, so loading, scoring and writing take one (two round
            # trips fewer a fragment, issue 50); a scorer that calls out (a model) scores outside any transaction
            if scorer.local:
                score = await _scored(scorer, candidate)
                status = await _write(conn, row, score, half_life)
    if row is None:
        return  # deleted since
    if row["judged"]:  # already judged in its current form
        if not row["has_facts"]:
            await facts.draw_and_write(rt, row)
        return
    if score is None:
        score = await _scored(scorer, candidate)
        async with rt.pool.acquire() as conn, system_transaction(conn):
            status = await _write(conn, row, score, half_life)
    if status == "UPDATE 0":  # deleted, or its content amended, since it was loaded
        log.debug("evaluation.stale", extra={"worker": rt.name})
        EVALUATIONS.labels(scorer.name, "stale").inc()
        return
    EVALUATIONS.labels(scorer.name, "ok").inc()
    await facts.draw_and_write(rt, row)


async def _novelty(conn: Any, row: Any) -> float:
    await conn.execute(NOVELTY_PLAN)
    args = (row["content"], row["tenant_id"], row["workspace"], row["agent_id"], row["id"], NOVELTY_WINDOW)
    return 1.0 - float(await conn.fetchval(NOVELTY_SQL, *args))


async def _scored(scorer: Any, fragment: Fragment) -> Score:
    try:
        return cast(Score, await scorer.score(fragment))
    except Exception:
        EVALUATIONS.labels(scorer.name, "error").inc()
        raise


async def _write(conn: Any, row: Any, score: Score, half_life: float) -> str:
    """The score, only if the content is still the one scored (its content_hash): an amend of the content in
    between brings its own event, which scores the new content."""
    return cast(str, await conn.execute(_WRITE_SQL, row["id"], score.quality, row["content_hash"], half_life))


HANDLERS = {
    "fragment.stored": evaluate_fragment,
    "fragment.amended": evaluate_fragment,
}

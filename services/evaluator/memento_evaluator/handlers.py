"""Evaluator event handlers: score a stored or amended fragment into quality_score, utility_score, verified_at.

Idempotent: a fragment judged since its last change (verified_at >= updated_at with a quality score) is skipped,
so a re-delivered event costs one query and no Gemini call. utility_score uses the same SQL function as
consolidation stage 8, so the two never disagree about the formula.
"""

from __future__ import annotations

import logging

from memento_evaluator.scorers import Fragment
from memento_evaluator.scorers.offline import NOVELTY_PLAN, NOVELTY_SQL, NOVELTY_WINDOW
from memento_shared.consolidation import utility_half_life_days
from memento_shared.db.rls import system_transaction
from memento_shared.telemetry.metrics import EVALUATIONS
from memento_shared.worker import Runtime

log = logging.getLogger(__name__)

_LOAD_SQL = (
    "SELECT id, tenant_id, workspace, agent_id, content, topic, type, updated_at,"
    " quality_score IS NOT NULL AND verified_at >= updated_at AS judged FROM agent_memory.fragments WHERE id = $1"
)
_WRITE_SQL = (
    "UPDATE agent_memory.fragments SET quality_score = $2, verified_at = now(),"
    " utility_score = agent_memory.utility_score($2, importance, access_count, coalesce(accessed_at, created_at), $4)"
    " WHERE id = $1 AND updated_at = $3"
)


async def evaluate_fragment(envelope: dict, rt: Runtime) -> None:
    fragment_id = envelope["payload"]["fragment_id"]
    async with rt.pool.acquire() as conn, system_transaction(conn):
        row = await conn.fetchrow(_LOAD_SQL, fragment_id)
        if row is None or row["judged"]:
            return  # deleted since, or already judged in its current form
        await conn.execute(NOVELTY_PLAN)
        novelty = 1.0 - await conn.fetchval(
            NOVELTY_SQL, row["content"], row["tenant_id"], row["workspace"], row["agent_id"], row["id"], NOVELTY_WINDOW
        )
    scorer = rt.state["scorer"]
    try:
        score = await scorer.score(Fragment(row["content"], row["topic"], row["type"], novelty))
    except Exception:
        EVALUATIONS.labels(scorer.name, "error").inc()
        raise
    half_life = utility_half_life_days(rt.settings)
    async with rt.pool.acquire() as conn, system_transaction(conn):
        # only if the content is still what was judged; an amend in between brings its own event
        await conn.execute(_WRITE_SQL, fragment_id, score.quality, row["updated_at"], half_life)
    EVALUATIONS.labels(scorer.name, "ok").inc()


HANDLERS = {
    "fragment.stored": evaluate_fragment,
    "fragment.amended": evaluate_fragment,
}

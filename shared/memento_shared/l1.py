"""The L1 keyword index's Redis layout, shared by memory-api (writes, reads, rebuild) and the consolidator
(expiry): one sorted set per (tenant, workspace, agent, keyword) of fragment ids, plus a marker that says the
index is complete. If Redis loses its data the marker goes with it, and memory-api rebuilds from Postgres.

Sorted, not plain, sets: at a million fragments a common keyword holds tens of thousands of ids, and recall must
read only the best few. The score approximates seed 000's composite rank (importance and recency) with a term
that is linear in creation time, so it can be computed once when the fragment is written.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from redis.exceptions import RedisError

from memento_shared import keys

log = logging.getLogger(__name__)

# The key names live in memento_shared.keys (the state Redis may be a cluster: the sets carry their tenant as hash
# tag, the control keys the tag `{l1}`, since MARK_READY and `invalidate` touch several of them at once).
READY_KEY = keys.L1_READY
# older layouts' markers: a rebuild drops them before clearing the sets, so replicas still running older code during
# a rolling upgrade stop trusting an L1 that is being emptied and rebuilt (they answer from L2 meanwhile)
LEGACY_READY_KEYS = ("memento:l1:ready", "memento:l1:ready:2")
REBUILD_LOCK = keys.L1_REBUILDING
# bumped by every invalidation: a rebuild that began before one must not mark L1 ready when it ends
GENERATION_KEY = keys.L1_GENERATION
# a hash: the weights L1 is to be scored with and when the replica that claimed them started (L1Keeper)
WANTED_KEY = keys.L1_WANTED
SETS_PATTERN = keys.L1_SETS
key = keys.l1_set  # (tenant, workspace, agent, keyword): agent ids are escaped, so every pair is its own key


Weights = tuple[float, float]  # MEMORY_CONFIG.ranking's importanceWeight, recencyWeight
DEFAULT_WEIGHTS: Weights = (0.6, 0.4)


def weights(memory_config: dict[str, Any]) -> Weights:
    ranking = memory_config.get("ranking", {})
    return (
        float(ranking.get("importanceWeight", DEFAULT_WEIGHTS[0])),
        float(ranking.get("recencyWeight", DEFAULT_WEIGHTS[1])),
    )


def ready_value(w: Weights) -> str:
    """What the ready marker holds: the weights the scores were computed with (a change rebuilds, see memory-api)."""
    return f"{w[0]!r}:{w[1]!r}"


def parse_weights(value: str) -> Weights:
    """`ready_value`'s inverse."""
    importance, recency = value.split(":")
    return float(importance), float(recency)


def score(importance: float, created_at: datetime, w: Weights = DEFAULT_WEIGHTS) -> float:
    """importanceWeight * importance + recencyWeight * (months since 1970): newer and more important first."""
    return w[0] * float(importance) + w[1] * created_at.timestamp() / (30 * 86400)


async def remove(
    redis: Any, tenant_id: str, workspace: str, agent_id: str, fragment_id: str, keywords: list[str]
) -> None:
    """Drop one fragment from its keyword sets (forget, amend, expiry). Callers treat Redis errors as non-fatal."""
    if redis is None or not keywords:
        return
    async with redis.pipeline(transaction=False) as pipe:
        for keyword in keywords:
            pipe.zrem(key(tenant_id, workspace, agent_id, keyword), fragment_id)
        await pipe.execute()


# KEYS: generation, ready marker (one slot: the `{l1}` tag)
_INVALIDATE = """
redis.call('INCR', KEYS[1])
redis.call('DEL', KEYS[2])
return 1
"""


async def invalidate(redis: Any) -> bool:
    """Drop the ready marker after a write to L1 was lost (Redis failed mid-write, then came back with its data) or
    its scores' weights changed: every memory-api replica then stops reading L1 at once and rebuilds it from
    Postgres, and a rebuild already under way will not mark it ready. False when Redis still does not answer; the
    caller tries again later, since until it succeeds L1 may hold what Postgres no longer does (or lack what it
    has)."""
    try:
        await redis.eval(_INVALIDATE, 2, GENERATION_KEY, READY_KEY)  # one script: a cluster runs no MULTI
    except (RedisError, OSError):
        return False
    log.info("l1.invalidated")
    return True

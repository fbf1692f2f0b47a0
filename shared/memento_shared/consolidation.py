"""The consolidation contract between memory-api (`memory_consolidate`) and the consolidator, and the lifecycle
thresholds both the consolidator and the evaluator read from MEMORY_CONFIG.

On demand: enqueue `JOB_NAME` on the consolidator's queue and await its result, for example

    job = await queue.enqueue_job(JOB_NAME, tenant_id, workspace, _queue_name=queue_key("consolidator"))
    result = await job.result(timeout=settings.consolidate_timeout_s)

The job runs the ten stages of seed 000 §8 in `STAGES` order for that tenant and workspace, serialised per tenant
with a Postgres advisory lock (a run already going for the tenant is waited for, up to
CONSOLIDATION_LOCK_TIMEOUT_SECONDS, then the job fails with `ConsolidationBusy`). It returns

    {"stages": {stage: count, ...},            # every name in STAGES, in order, ints
     "contradictions": [                        # stage 6
         {"kind": "linked", "from_id": ..., "to_id": ..., "topic": ...},           # a `contradicts` link
         {"kind": "candidate", "from_id": ..., "to_id": ..., "topic": ..., "similarity": 0.93},  # proposed only
     ],
     "stats": {"fragments": n, "by_tier": {...}, "embedded": n, "dead_letters": n},  # stage 10
     "stage_ms": {stage: ms, ...},
     "duration_ms": int}

While it runs, `progress_key(tenant, workspace)` is a Redis hash {"stage": name, "done": k, "total": 10} (kept ten
minutes; stage "done" or "failed" once it ended), which memory_stats reports as `consolidationRunning`; each
finished run's result is its row in agent_memory.consolidation_runs (memory_stats' `lastConsolidation`).
"""

from __future__ import annotations

import copy
from typing import Any

from memento_shared import keys
from memento_shared.settings import MemoryConfigSettings

JOB_NAME = "consolidate"

STAGES = (
    "hot_to_warm",  # 1: hot fragments past hotDays without use become warm
    "warm_to_cold",  # 2: warm fragments unused for warmInactiveDays become cold
    "cold_expiration",  # 3: cold fragments unused past staleThresholds[type] (and past expires_at) are deleted
    "importance_decay",  # 4: rarely used, low-utility fragments lose importance, once per decay interval
    "deduplication",  # 5: same content (normalised) in one namespace: merged into the oldest
    "contradiction_detection",  # 6: `contradicts` links reported; same-topic near-duplicates proposed
    "orphan_link_pruning",  # 7: linked_to entries and links that point at nothing (or at themselves)
    "utility_recompute",  # 8: utility_score from quality, importance, recency and use
    "embedding_backfill",  # 9: fragments without a current vector are sent to the embedder
    "statistics",  # 10: the figures returned (count = fragments in scope after the run)
)

# MEMORY_CONFIG keys beyond seed 000 §10.1 (staleThresholds is the seed's); every one can be overridden.
LIFECYCLE_DEFAULTS: dict[str, Any] = {
    "tiers": {"hotDays": 7, "warmInactiveDays": 30},
    "decay": {
        "rate": 0.9,  # importance multiplied by this per interval
        "intervalDays": 1,
        "minImportance": 0.05,
        "maxAccessCount": 2,  # decays only if used at most this often ...
        "maxUtility": 0.5,  # ... and judged below this
        "utilityHalfLifeDays": 30,  # recency half-life in the utility formula
    },
    "contradictions": {"similarity": 0.9, "candidateLimit": 200},
    "backfillLimit": 10000,  # fragments sent to the embedder per run (it embeds a few hundred a second at most)
    "backfillGraceSeconds": 60,  # younger fragments are left to their own fragment.stored events
}


class ConsolidationBusy(Exception):
    """Another run holds the tenant's lock for longer than CONSOLIDATION_LOCK_TIMEOUT_SECONDS."""


def progress_key(tenant_id: str, workspace: str) -> str:
    return keys.consolidation_progress(tenant_id, workspace)


def lifecycle(settings: MemoryConfigSettings) -> dict[str, Any]:
    """MEMORY_CONFIG's lifecycle part over LIFECYCLE_DEFAULTS (one level of nesting merged key by key)."""
    merged = copy.deepcopy(LIFECYCLE_DEFAULTS)
    config = settings.memory_config
    for key, default in LIFECYCLE_DEFAULTS.items():
        value = config.get(key)
        if isinstance(default, dict) and isinstance(value, dict):
            merged[key].update(value)
        elif value is not None:
            merged[key] = value
    merged["staleThresholds"] = dict(config["staleThresholds"])
    return merged


def utility_half_life_days(settings: MemoryConfigSettings) -> float:
    """decay.utilityHalfLifeDays: the recency half-life every writer of utility_score passes to its SQL function."""
    return float(lifecycle(settings)["decay"]["utilityHalfLifeDays"])

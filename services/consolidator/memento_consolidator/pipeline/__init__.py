"""The ten consolidation stages of seed 000 §8, in order. Each is a module with `async def run(ctx) -> int`
(how many fragments or links it changed, found or sent), idempotent, and working in batches of
CONSOLIDATION_BATCH_SIZE committed one by one, so writes continue meanwhile and no stage holds the table."""

from __future__ import annotations

from memento_consolidator.pipeline import (
    cold_expiration,
    contradiction_detection,
    deduplication,
    embedding_backfill,
    hot_to_warm,
    importance_decay,
    orphan_link_pruning,
    statistics,
    utility_recompute,
    warm_to_cold,
)
from memento_shared.consolidation import STAGES as STAGE_NAMES

PIPELINE = (
    ("hot_to_warm", hot_to_warm.run),
    ("warm_to_cold", warm_to_cold.run),
    ("cold_expiration", cold_expiration.run),
    ("importance_decay", importance_decay.run),
    ("deduplication", deduplication.run),
    ("contradiction_detection", contradiction_detection.run),
    ("orphan_link_pruning", orphan_link_pruning.run),
    ("utility_recompute", utility_recompute.run),
    ("embedding_backfill", embedding_backfill.run),
    ("statistics", statistics.run),
)
assert tuple(name for name, _ in PIPELINE) == STAGE_NAMES, "the pipeline must follow the shared contract"

"""The consolidator's settings: its port, the pipeline's schedule and batches, seed 003's decay and seed 004's idle
sessions."""

from __future__ import annotations

from pydantic import Field

from memento_shared.settings import LifecycleSettings, MemoryConfigSettings, WorkerSettings
from memento_shared.worker import Runtime


class ConsolidatorSettings(WorkerSettings, LifecycleSettings, MemoryConfigSettings):
    """The consolidator's own variables over a worker's sections, session maintenance and MEMORY_CONFIG."""

    consolidator_port: int = Field(56336, alias="CONSOLIDATOR_PORT")
    # consolidator: a five-field cron expression (UTC); empty disables the schedule
    consolidation_cron: str = Field("30 3 * * *", alias="CONSOLIDATION_CRON")
    # seed 003's decay: stored relevance recomputed, expired memories and skip entries purged (empty disables)
    protocol_decay_cron: str = Field("15 */6 * * *", alias="PROTOCOL_DECAY_CRON")
    protocol_decay_batch_size: int = Field(5000, alias="PROTOCOL_DECAY_BATCH_SIZE", ge=100, le=100_000)
    protocol_decay_writers: int = Field(2, alias="PROTOCOL_DECAY_WRITERS", ge=1, le=8)
    consolidation_batch_size: int = Field(1000, alias="CONSOLIDATION_BATCH_SIZE")
    # batches of one stage written at once, each on its own connection (a run holds up to this many + 2)
    consolidation_writers: int = Field(2, alias="CONSOLIDATION_WRITERS", ge=1, le=8)
    consolidation_lock_timeout_s: float = Field(60.0, alias="CONSOLIDATION_LOCK_TIMEOUT_SECONDS")
    # the consolidator maintains sessions idle this long that nobody maintained since their last turn (empty: never)
    memory_idle_maintenance_cron: str = Field("40 * * * *", alias="MEMORY_IDLE_MAINTENANCE_CRON")
    memory_idle_minutes: float = Field(60.0, alias="MEMORY_IDLE_MINUTES", gt=0)


def settings_of(rt: Runtime) -> ConsolidatorSettings:
    """The worker's own settings on its runtime (memento_shared.worker types them as the shared WorkerSettings)."""
    settings = rt.settings
    if not isinstance(settings, ConsolidatorSettings):
        raise TypeError(f"the runtime holds {type(settings).__name__}, not ConsolidatorSettings")
    return settings

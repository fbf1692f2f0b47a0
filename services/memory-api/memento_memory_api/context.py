"""What a tool handler gets: the call's scope, a unit-of-work factory and the shared clients."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis

from memento_memory_api.embedding_client import EmbeddingClient
from memento_memory_api.settings import MemoryApiSettings
from memento_memory_api.uow import Scope, UnitOfWorkFactory
from memento_shared import l1 as l1_layout
from memento_shared.principal import Principal


@dataclass(frozen=True)
class Profile:
    id: str
    dimension: int
    provider: str = "offline"  # the embedding provider: whether a canonical document's chunks embed in context


@dataclass
class ToolContext:
    principal: Principal
    scope: Scope
    uow: UnitOfWorkFactory
    redis: Redis | None
    embedder: EmbeddingClient
    profile: Profile
    settings: MemoryApiSettings
    queue: Any = None  # arq pool: on-demand jobs (memory_consolidate)
    access: Any = None  # AccessRecorder: access counts, flushed off the request path
    partition_verdicts: Any = None  # recall.vector.PartitionVerdicts: partitions not worth counting again
    l1: Any = None  # recall.l1.L1Keeper: told when an L1 write fails, says whether L1 can be read
    write_back: Any = None  # recall.fresh.VectorWriteBack: vectors searches computed for fresh rows, written later
    progress_id: str | None = None  # memento_shared.progress channel the gateway reads, when the client wants progress
    llm: Any = None  # memento_memory_api.llm.LLM: seed 003's summaries, distillation and crystals when configured
    heuristic: Any = None  # memento_memory_api.llm.LLM: seed 004's fact extraction, when its heuristic is enabled
    after_ack: Any = None  # memento_memory_api.after_ack.AfterAck: work done once the call is acknowledged

    def l1_write_failed(self) -> None:
        if self.l1 is not None:
            self.l1.write_failed()

    def l1_for_write(self) -> Redis | None:
        """The client an L1 write (after its commit) goes through; None, with the write counted as lost, while Redis
        has failed a write and every marker drop since: the rebuild that follows covers this write too, and a Redis
        that does not answer costs only the first write its REDIS_TIMEOUT_SECONDS. Once a drop succeeds, writes are
        tried again, so they do not keep asking for another one."""
        if self.l1 is not None and self.l1.out_of_step and self.l1.redis_away:
            self.l1.write_failed(tried=False)
            return None
        return self.redis

    def l1_weights(self) -> l1_layout.Weights:
        """What L1 is scored with now (the newest replica's configuration), so this write sorts among the rest."""
        return self.l1.scoring if self.l1 is not None else l1_layout.DEFAULT_WEIGHTS

    def l1_trusted(self) -> bool:
        return self.l1 is None or self.l1.readable

    def l1_read_failed(self) -> None:
        if self.l1 is not None:
            self.l1.read_failed()

    def visible_agents(self) -> list[str] | None:
        """Agent namespaces this call reads: its own and 'default'; None (all) for admin access."""
        if self.scope.access in ("admin", "system"):
            return None
        return sorted({self.scope.agent_id, "default"})

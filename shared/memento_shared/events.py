"""Event contracts: what memory-api emits in its outbox and which worker queues consume each type.

Wire names are dotted and past tense; a breaking change gets a new name (`fragment.stored.v2`).
A queue is named after the worker that consumes it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

QUEUES = ("embedder", "evaluator", "consolidator")

CONSUMERS: dict[str, tuple[str, ...]] = {
    "fragment.stored": ("embedder", "evaluator"),
    "fragment.amended": ("embedder", "evaluator"),
    "consolidation.requested": ("consolidator",),
    # seed 001: a document version's chunks to embed; payload {"item_id", "version_num"}
    "document.versioned": ("embedder",),
}


def queue_key(queue: str) -> str:
    """The arq queue (a Redis sorted set) a worker listens on."""
    return f"memento:queue:{queue}"


@dataclass(frozen=True)
class Event:
    type: str
    tenant_id: str
    workspace: str
    payload: dict[str, Any]
    id: str = field(default_factory=lambda: str(uuid.uuid4()))

    def __post_init__(self) -> None:
        if self.type not in CONSUMERS:
            raise ValueError(f"unknown event type {self.type!r}")


def envelope(
    event_id: str, event_type: str, tenant_id: str, workspace: str, payload: dict[str, Any], traceparent: str | None
) -> dict[str, Any]:
    """What travels through arq as the job's only argument (JSON, never pickle)."""
    return {
        "event_id": event_id,
        "event_type": event_type,
        "tenant_id": tenant_id,
        "workspace": workspace,
        "payload": payload,
        "traceparent": traceparent,
    }


def job_id(event_id: str, queue: str) -> str:
    """Deterministic: relaying the same event twice enqueues it once per queue."""
    return f"{event_id}:{queue}"


# Issue 5. Consolidation stage 9 asks the embedder to (re)embed fragments that lack a vector in the active or
# building profile; payload {"fragment_ids": [...]}. Enqueued directly with a deterministic job id (not through
# the outbox): the next consolidation run re-enqueues whatever is still missing, so nothing depends on it.
CONSUMERS["embedding.requested"] = ("embedder",)

# NOTIFY channel raised whenever embedding_profiles changes (a profile is added, cut over or dropped).
PROFILE_CHANNEL = "memento_profile"

"""Change notices: after the outbox relay hands events to the queues, it tells every gateway replica which MCP
resources those events changed, on one Redis pub/sub channel. The gateway passes them on to the clients that
subscribed (subscriptions/listen, resources/subscribe), whichever replica their stream is open on.

A notice names a resource of one tenant's workspace, and whether it is new (the resource list changed). Delivery is
best effort, as MCP's notifications are: a client that missed one reads the resource again when it re-subscribes.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

CHANNEL = "memento:changes"


@dataclass(frozen=True)
class Change:
    tenant: str
    workspace: str
    uri: str
    new: bool = False  # a resource that did not exist before: the workspace's resource list changed


def encode(change: Change) -> str:
    return json.dumps(asdict(change))


def decode(raw: Any) -> Change | None:
    """The notice, or None for anything that is not one."""
    try:
        fields = json.loads(raw)
        return Change(str(fields["tenant"]), str(fields["workspace"]), str(fields["uri"]), bool(fields.get("new")))
    except (ValueError, TypeError, KeyError):
        return None

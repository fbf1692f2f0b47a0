"""Which MCP resources the relayed outbox events changed (memento_shared.changes), published once the relay's
transaction committed: a document's new version changes `memento://items/{id}`, and its first version adds it to
the workspace's resource list. Fragments are not MCP resources, so their events change none."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import Any

from redis.asyncio import Redis

from memento_memory_api.routes.resources import PREFIX
from memento_shared import changes

log = logging.getLogger(__name__)


def notices(rows: Iterable[Any]) -> list[changes.Change]:
    found = []
    for row in rows:
        if row["event_type"] != "document.versioned":
            continue
        payload = row["payload"] if isinstance(row["payload"], dict) else json.loads(row["payload"])
        uri = PREFIX + str(payload["item_id"])
        found.append(changes.Change(row["tenant_id"], row["workspace"], uri, payload.get("version_num") == 1))
    return found


async def announce(redis: Redis, rows: Iterable[Any]) -> None:
    """Publish the notices; never fails the relay (its events are delivered already, a notice is a courtesy)."""
    found = notices(rows)
    if not found:
        return
    try:
        async with redis.pipeline(transaction=False) as pipe:
            for change in found:
                pipe.publish(changes.CHANNEL, changes.encode(change))
            await pipe.execute()
    except Exception as exc:
        log.warning("changes.not_announced", extra={"error_type": type(exc).__name__, "count": len(found)})

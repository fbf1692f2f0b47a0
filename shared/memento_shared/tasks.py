"""Long tool calls run as tasks (the MCP tasks extension, `io.modelcontextprotocol/tasks`): their state in Redis, so
whichever gateway replica a client polls answers, and the call outlives the replica that received it.

memory-api creates the record and runs the call (memento_memory_api.tasks), holding a lease while it runs; the
gateway reads records for `tasks/get` and marks them cancelled for `tasks/cancel`. A record is kept TTL_S from its
creation, then Redis forgets it. Status moves from "working" to one terminal status, once: the update is a script
that changes nothing unless the record is still working, so a cancel and a finish cannot both win.

A record: id, owner (tenant and subject of the credential), tool, status, createdAt, lastUpdatedAt, progressId,
and when terminal `body` (memory-api's answer, JSON text) or `error` (a JSON-RPC error, JSON text).
"""

from __future__ import annotations

import json
import secrets
from datetime import UTC, datetime
from typing import Any

from memento_shared import keys

TTL_S = 3600
POLL_INTERVAL_MS = 1000
LEASE_S = 15  # the runner renews it every LEASE_S / 3; a working task without one lost its runner
TERMINAL = ("completed", "failed", "cancelled")

# KEYS[1]: the record. ARGV[1]: fields to set (JSON). Only a working record changes; 1 when it did.
_SETTLE = """
local raw = redis.call('GET', KEYS[1])
if not raw then return 0 end
local record = cjson.decode(raw)
if record['status'] ~= 'working' then return 0 end
for name, value in pairs(cjson.decode(ARGV[1])) do record[name] = value end
redis.call('SET', KEYS[1], cjson.encode(record), 'KEEPTTL')
return 1
"""


# named by the task's random id, as their hash tag (memento_shared.keys): a task's record, lease and cancel share a
# slot (one server answers a task's pipeline)
def key(task_id: str) -> str:
    return f"{keys.TASK_PREFIXES[0]}{{{task_id}}}"


def lease_key(task_id: str) -> str:
    return f"{keys.TASK_PREFIXES[1]}{{{task_id}}}"


def cancel_key(task_id: str) -> str:
    return f"{keys.TASK_PREFIXES[2]}{{{task_id}}}"


def new_id() -> str:
    """Unguessable: a task id is all a poller shows besides its credential."""
    return secrets.token_urlsafe(24)


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def owner(tenant_id: str, subject: str) -> str:
    return f"{tenant_id}\x1f{subject}"


async def create(redis: Any, record: dict[str, Any]) -> None:
    """Durable before it is answered: a tasks/get for it resolves once this returns. No MULTI (a cluster client's
    pipeline has none): the lease first, so a record is never seen without the runner's lease unless it died."""
    async with redis.pipeline(transaction=False) as pipe:
        pipe.set(lease_key(record["id"]), "1", ex=LEASE_S)
        pipe.set(key(record["id"]), json.dumps(record), ex=TTL_S, nx=True)
        await pipe.execute()


async def get(redis: Any, task_id: str) -> dict[str, Any] | None:
    raw = await redis.get(key(task_id))
    return json.loads(raw) if raw else None


async def settle(redis: Any, task_id: str, status: str, **fields: Any) -> bool:
    """Move a working task to a terminal `status`; False when it was not working (already settled, or gone)."""
    update = {"status": status, "lastUpdatedAt": now(), **fields}
    return bool(await redis.eval(_SETTLE, 1, key(task_id), json.dumps(update)))


async def request_cancel(redis: Any, task_id: str) -> bool:
    """Mark it cancelled (if still working) and tell its runner to stop; False when it had settled already."""
    await redis.set(cancel_key(task_id), "1", ex=TTL_S)
    return await settle(redis, task_id, "cancelled", statusMessage="cancelled by the client")


async def cancel_requested(redis: Any, task_id: str) -> bool:
    return bool(await redis.exists(cancel_key(task_id)))


async def renew_lease(redis: Any, task_id: str) -> None:
    await redis.set(lease_key(task_id), "1", ex=LEASE_S)


async def drop_lease(redis: Any, task_id: str) -> None:
    await redis.delete(lease_key(task_id))


async def has_runner(redis: Any, task_id: str) -> bool:
    return bool(await redis.exists(lease_key(task_id)))

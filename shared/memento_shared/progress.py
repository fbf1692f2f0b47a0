"""A long tool call's progress, from whoever does the work to the gateway that tells the MCP client.

The gateway mints a progress id for a tools/call whose client asked for progress (a `progressToken`) and sends it to
memory-api in `HEADER`; work that knows its steps (the consolidator's ten stages) writes
{"done": k, "total": n, "message": ...} under `key(tenant, id)` (memento_shared.keys); the gateway polls it while the
call runs and turns each increase into a `notifications/progress`. `done` may be fractional: MCP progress must
increase with each notification, so a word before the first step is done (waiting for a lock) is a step of less
than one.
The id is random (unguessable) and the hash carries no memory content."""

from __future__ import annotations

import logging
import re
from typing import Any

from memento_shared import keys

log = logging.getLogger(__name__)
HEADER = "X-Memento-Progress-Id"
TTL_S = 600
_ID = re.compile(r"[0-9a-f]{32}")


key = keys.progress  # (tenant, progress id)


def valid_id(value: str | None) -> str | None:
    """The header's id when it has the shape the gateway mints (uuid4 hex), else None: nothing else becomes a key."""
    return value if value is not None and _ID.fullmatch(value) else None


async def report(redis: Any, tenant_id: str, progress_id: str | None, done: float, total: int, message: str) -> None:
    """Record that `done` of `total` steps are finished. Progress is a courtesy: a Redis failure is only logged."""
    if progress_id is None:
        return
    try:
        async with redis.pipeline(transaction=False) as pipe:
            queue_report(pipe, tenant_id, progress_id, done, total, message)
            await pipe.execute()
    except Exception:
        log.debug("progress.unavailable")


def queue_report(pipe: Any, tenant_id: str, progress_id: str, done: float, total: int, message: str) -> None:
    """`report` as commands of the caller's pipeline."""
    pipe.hset(key(tenant_id, progress_id), mapping={"done": done, "total": total, "message": message})
    pipe.expire(key(tenant_id, progress_id), TTL_S)


async def read(redis: Any, tenant_id: str, progress_id: str) -> tuple[float, int, str] | None:
    """(done, total, message) as last reported, or None when nothing was (or Redis does not answer)."""
    try:
        raw = await redis.hgetall(key(tenant_id, progress_id))
    except Exception:
        return None
    values = {_text(k): _text(v) for k, v in raw.items()}
    try:
        done = float(values["done"])
        return int(done) if done.is_integer() else done, int(values["total"]), values.get("message", "")
    except (KeyError, ValueError):
        return None


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value

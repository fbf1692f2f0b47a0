"""Requests running on this replica, so that `notifications/cancelled` stops them wherever they run.

A cancellation may arrive at any replica; it is broadcast (see hub.py) and each replica looks here.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine
from typing import Any


def _key(session_id: str, request_id: Any) -> tuple[str, str]:
    return session_id, json.dumps(request_id)  # "1" and 1 are different ids


def owner(session: Any) -> str:
    """Whose requests: the tenant and the session. A stateless request's session id is the working-memory handle
    its client chose, which another tenant's client may choose too; their requests must not cancel each other."""
    return f"{session.principal.tenant_id}\x1f{session.id}"


class InFlight:
    def __init__(self) -> None:
        self.tasks: dict[tuple[str, str], asyncio.Task[Any]] = {}
        self.background: set[asyncio.Task[Any]] = set()

    def spawn(self, work: Coroutine[Any, Any, Any]) -> None:
        """Work nobody can cancel by id (a notification's handling); kept so shutdown can wait for it."""
        task = asyncio.create_task(work)
        self.background.add(task)
        task.add_done_callback(self.background.discard)

    def start(self, session_id: str, request_id: Any, work: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        key = _key(session_id, request_id)
        task = asyncio.create_task(work)
        self.tasks[key] = task
        task.add_done_callback(lambda done: self.tasks.pop(key, None) if self.tasks.get(key) is done else None)
        return task

    def cancel(self, session_id: str, request_id: Any) -> bool:
        task = self.tasks.get(_key(session_id, request_id))
        if task is None or task.done():
            return False
        task.cancel()
        return True

    async def drain(self) -> None:
        """At shutdown: stop what still runs (the clients get no answer; a new replica serves their retry)."""
        tasks = [*self.tasks.values(), *self.background]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

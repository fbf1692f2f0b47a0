"""Per-tenant API keys, checked by memory-api (which holds their hashes) and remembered here for a few seconds.

The gateway has no database: `POST /internal/keys/verify` answers with the key's binding (tenant, workspaces,
agents, scopes, profiles). A revoked key stops working within CACHE_SECONDS on every replica.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

from memento_gateway.upstream import Upstream
from memento_shared.principal import Principal

KEY_PREFIX = "mk_"
CACHE_SECONDS = 30.0
MISS_SECONDS = 5.0  # unknown keys too, so guessing cannot make every attempt a database query
MAX_ENTRIES = 10_000


def principal_from(binding: dict[str, Any]) -> Principal:
    return Principal(
        tenant_id=binding["tenant_id"],
        workspaces=tuple(binding["workspaces"]),
        agents=tuple(binding["agents"]),
        scopes=tuple(binding["scopes"]),
        profiles=tuple(binding["profiles"]),
        subject=f"key:{binding['id']}",
    )


class ApiKeys:
    def __init__(self, upstream: Upstream) -> None:
        self.upstream = upstream
        self.cache: dict[str, tuple[float, Principal | None]] = {}

    async def verify(self, key: str) -> Principal | None:
        """The key's principal, or None for a key that is unknown, revoked or expired."""
        return await self._cached("k:" + hashlib.sha256(key.encode()).hexdigest(), "verify", {"key": key})

    async def lookup(self, key_id: str) -> Principal | None:
        """The same by id, for credentials derived from a key (OAuth tokens, sessions) that no longer carry it."""
        return await self._cached("i:" + key_id, "lookup", {"id": key_id})

    async def _cached(self, slot: str, path: str, body: dict[str, str]) -> Principal | None:
        now = time.monotonic()
        hit = self.cache.get(slot)
        if hit is not None and hit[0] > now:
            return hit[1]
        binding = await self.upstream.key(path, body)
        principal = principal_from(binding) if binding else None
        if len(self.cache) >= MAX_ENTRIES:
            self.cache.clear()
        self.cache[slot] = (now + (CACHE_SECONDS if principal else MISS_SECONDS), principal)
        return principal

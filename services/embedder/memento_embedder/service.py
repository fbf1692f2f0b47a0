"""The embedder's composition: the profile registry, the profile the environment asks for, the background
builder. Used by __main__ (the process) and by tests hosting the worker in-process."""

from __future__ import annotations

import logging

from memento_embedder import profiles
from memento_embedder.providers.base import Provider
from memento_embedder.reembed import ProfileBuilder
from memento_embedder.registry import ProfileRegistry
from memento_embedder.settings import settings_of
from memento_shared.db.rls import set_system
from memento_shared.worker import Runtime

log = logging.getLogger(__name__)


async def setup(
    rt: Runtime, *, build_interval: float = 60.0, providers: dict[str, Provider] | None = None, build: bool = True
) -> None:
    """`providers` pins a provider object to a profile id instead of building it from the profile's row;
    `build=False` leaves out the background builder (a test that registers a profile only to embed new writes)."""
    settings = settings_of(rt)
    registry = ProfileRegistry(rt.pool, settings)
    for profile_id, provider in (providers or {}).items():
        registry.add(profile_id, provider)
    rt.state["registry"] = registry
    await adopt_desired_profile(rt)
    active = await registry.active_id()
    await (await registry.batcher(active)).warm()
    if build:
        builder = ProfileBuilder(
            rt.pool,
            registry,
            dsn=settings.database_url,
            interval=build_interval,
            batch=2 * settings.embedding_batch_size,
        )
        rt.state["builder"] = builder
        builder.start()


async def teardown(rt: Runtime) -> None:
    if builder := rt.state.get("builder"):
        await builder.stop()
    await rt.state["registry"].aclose()


async def adopt_desired_profile(rt: Runtime) -> None:
    """If the environment names a profile that does not exist yet, register it and let the builder switch to it.

    A profile that exists in standby (one we switched away from) is not switched back to automatically: during a
    rolling update an old replica would otherwise undo the switch. `memento-embedder profiles switch ID` does it.
    """
    spec = profiles.desired_spec(settings_of(rt))
    async with rt.pool.acquire() as conn, conn.transaction():
        await set_system(conn)
        row = await profiles.get(conn, spec.id)
        if row is None:
            try:
                await profiles.start_building(conn, spec)
            except ValueError as exc:
                log.error("embedding_profile.not_registered", extra={"profile": spec.id, "reason": str(exc)})
                return
            log.info("embedding_profile.registered", extra={"profile": spec.id})
        elif row["status"] == "standby":
            log.warning("embedding_profile.desired_is_standby", extra={"profile": spec.id})

"""`python -m memento_embedder`: the embedding worker (queue `embedder`) and its /v1/embeddings endpoint."""

from __future__ import annotations

import asyncio

from memento_embedder.api import ROUTES
from memento_embedder.batching import Batcher
from memento_embedder.handlers import HANDLERS
from memento_embedder.providers.offline import OfflineProvider
from memento_shared.settings import Settings
from memento_shared.worker import Runtime, run_worker


async def on_startup(rt: Runtime) -> None:
    provider = OfflineProvider()
    row = await rt.pool.fetchrow("SELECT id, dimension FROM agent_memory.embedding_profiles WHERE is_active")
    if row is None or row["dimension"] != provider.dimension:
        raise RuntimeError("the active embedding profile does not match the offline model; run memento-migrate")
    rt.state.update(profile_id=row["id"], batcher=Batcher(provider))
    await rt.state["batcher"].embed_queries(["warm up"])  # load weights before reporting healthy


async def on_shutdown(rt: Runtime) -> None:
    rt.state["batcher"].close()


def main() -> None:
    settings = Settings()
    asyncio.run(
        run_worker(
            "embedder",
            HANDLERS,
            port=settings.embedder_port,
            settings=settings,
            routes=ROUTES,
            on_startup=on_startup,
            on_shutdown=on_shutdown,
            max_jobs=32,
        )
    )


if __name__ == "__main__":
    main()

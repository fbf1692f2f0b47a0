"""`python -m memento_embedder`: the embedding worker (queue `embedder`) and its /v1/embeddings endpoint.
`python -m memento_embedder profiles ...`: list, switch to or drop embedding profiles (see profiles_cli.py)."""

from __future__ import annotations

import sys

from memento_embedder import service
from memento_embedder.api import ROUTES
from memento_embedder.handlers import HANDLERS
from memento_embedder.settings import EmbedderSettings
from memento_shared import eventloop
from memento_shared.worker import run_worker


def main() -> None:
    if sys.argv[1:2] == ["profiles"]:
        from memento_embedder.profiles_cli import main as profiles_main

        raise SystemExit(profiles_main(sys.argv[2:]))
    settings = EmbedderSettings()
    eventloop.run(
        run_worker(
            "embedder",
            HANDLERS,
            port=settings.embedder_port,
            settings=settings,
            routes=ROUTES,
            on_startup=service.setup,
            on_shutdown=service.teardown,
            max_jobs=64,
        )
    )


if __name__ == "__main__":
    main()

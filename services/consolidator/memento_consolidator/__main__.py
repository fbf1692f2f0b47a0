"""`python -m memento_consolidator`: the consolidator worker (queue `consolidator`)."""

from __future__ import annotations

import asyncio

from memento_consolidator.handlers import HANDLERS
from memento_shared.settings import Settings
from memento_shared.worker import run_worker


def main() -> None:
    settings = Settings()
    asyncio.run(run_worker("consolidator", HANDLERS, port=settings.consolidator_port, settings=settings))


if __name__ == "__main__":
    main()

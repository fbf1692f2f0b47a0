"""`python -m memento_evaluator`: the evaluator worker (queue `evaluator`)."""

from __future__ import annotations

from memento_evaluator import service
from memento_evaluator.handlers import HANDLERS
from memento_evaluator.settings import EvaluatorSettings
from memento_shared import eventloop
from memento_shared.worker import run_worker


def main() -> None:
    settings = EvaluatorSettings()
    eventloop.run(
        run_worker(
            "evaluator",
            HANDLERS,
            port=settings.evaluator_port,
            settings=settings,
            on_startup=service.setup,
            on_shutdown=service.teardown,
            max_jobs=16,
        )
    )


if __name__ == "__main__":
    main()

"""`python -m memento_consolidator`: the consolidator worker (queue `consolidator`): the ten-stage pipeline on
demand (`consolidate`, memento_shared.consolidation) and on CONSOLIDATION_CRON, seed 003's decay on
PROTOCOL_DECAY_CRON and seed 004's maintenance of idle sessions on MEMORY_IDLE_MAINTENANCE_CRON."""

from __future__ import annotations

from memento_consolidator import decay, idle_sessions, jobs, schedule
from memento_consolidator.handlers import HANDLERS
from memento_consolidator.settings import ConsolidatorSettings
from memento_shared import eventloop
from memento_shared.worker import run_worker


def main() -> None:
    settings = ConsolidatorSettings()
    timeout = settings.worker_job_timeout_s
    eventloop.run(
        run_worker(
            "consolidator",
            HANDLERS,
            port=settings.consolidator_port,
            settings=settings,
            functions=jobs.functions(timeout),
            cron_jobs=schedule.cron_jobs(settings.consolidation_cron, jobs.consolidate_all, timeout)
            + schedule.cron_jobs(settings.protocol_decay_cron, decay.decay_all, timeout, name="protocol_decay")
            + schedule.cron_jobs(
                settings.memory_idle_maintenance_cron,
                idle_sessions.maintain_idle_job,
                timeout,
                name="lifecycle_idle_maintenance",
            ),
            # A run holds two pool connections throughout (its tenant lock, its cursor) and writes on up to
            # CONSOLIDATION_WRITERS more; with two runs at once the pool (max_jobs + 4) always has one left for a
            # writer, where four runs could hold all eight and wait on each other for ever.
            max_jobs=2,
        )
    )


if __name__ == "__main__":
    main()

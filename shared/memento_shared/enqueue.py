"""Enqueue many arq jobs in one Redis round trip (as commands on the caller's pipeline), with arq's own semantics:
a job whose id already exists (queued, running or with a stored result) is not enqueued again, so a deterministic
id makes a second relay a no-op.

arq's `enqueue_job` does this with WATCH / EXISTS / MULTI-EXEC: three round trips per job. The relay enqueues one
job per consuming queue for every event, and each round trip between processes is the dominant cost of a write on
a small machine, so a Lua script does the check-and-set on the server and the whole batch goes in one pipeline.
Jobs are written exactly as arq writes them (same keys, serializer, expiry and score), so arq workers run them
unchanged. The expiry is the queue pool's (`create_queue_pool`: WORKER_JOB_EXPIRY_SECONDS, 30 days by default,
not arq's one day): a job that outlives it is dropped by arq unrun, with its outbox row already published.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from arq.connections import ArqRedis
from arq.constants import job_key_prefix, result_key_prefix
from arq.jobs import serialize_job
from arq.utils import timestamp_ms
from redis.exceptions import RedisError

# KEYS: job key, result key, queue. ARGV: expiry ms, serialized job, job id, score. 1 if enqueued, 0 if it existed.
ENQUEUE_IF_ABSENT = """
if redis.call('EXISTS', KEYS[1], KEYS[2]) > 0 then return 0 end
redis.call('PSETEX', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[3])
return 1
"""


def wake_channel(queue: str) -> str:
    """The channel an idle worker of `queue` waits on: add_jobs publishes to it, so a worker with nothing to do polls
    rarely (memento_shared.worker) and still starts a job the moment it is enqueued."""
    return f"{queue}:wake"


async def wake(queue: ArqRedis, queue_name: str) -> None:
    """Wake `queue_name`'s idle workers after a job enqueued with arq's own enqueue_job (add_jobs wakes them itself);
    without it the job starts within the workers' idle wait (memento_shared.worker.IDLE_WAIT_S)."""
    with contextlib.suppress(RedisError):  # the job is queued: a wake that fails only leaves it to the idle poll
        await queue.publish(wake_channel(queue_name), b"1")


@dataclass(frozen=True)
class JobSpec:
    function: str
    args: tuple[Any, ...]
    job_id: str
    queue: str


def add_jobs(pipe: Any, queue: ArqRedis, jobs: list[JobSpec]) -> None:
    """Queue the enqueue commands on `pipe` (a non-transactional pipeline of `queue`); each answers 1 or 0, then one
    wake per queue (wake_channel) answers the number of workers it woke. Each job
    key expires after `queue.expires_extra_ms` (set from WORKER_JOB_EXPIRY_SECONDS by `create_queue_pool`)."""
    now = timestamp_ms()
    for job in jobs:
        data = serialize_job(job.function, job.args, {}, None, now, serializer=queue.job_serializer)
        pipe.eval(
            ENQUEUE_IF_ABSENT,
            3,
            job_key_prefix + job.job_id,
            result_key_prefix + job.job_id,
            job.queue,
            queue.expires_extra_ms,
            data,
            job.job_id,
            now,
        )
    for name in sorted({job.queue for job in jobs}):  # after the jobs: a worker woken finds them queued
        pipe.publish(wake_channel(name), b"1")

"""/livez on a worker hosted in-process, with a short staleness window: a worker whose job slots are all busy with
jobs longer than the window stays alive (arq's poll loop keeps turning: its semaphore has a spare permit); a job loop
that stopped turning is reported stuck."""

from __future__ import annotations

import asyncio
import time

import httpx

from memento_devtools.embedded import free_port
from memento_shared.events import envelope, queue_key
from memento_shared.worker import create_queue_pool
from tests.fixtures.waiting import eventually, truthy
from tests.workers.conftest import hosted_worker

WINDOW_S = 0.5


async def _enqueue(settings, tenant: str, n: int) -> list[str]:
    """`n` fragment.stored jobs on the evaluator's queue, due now, as the relay writes them."""
    queue = await create_queue_pool(settings)
    ids = []
    try:
        for i in range(n):
            event_id = f"00000000-0000-4000-8000-{i:04d}{tenant[2:10]}"
            job = envelope(event_id, "fragment.stored", tenant, "default", {"fragment_id": f"frag-{i}"}, None)
            await queue.enqueue_job(
                "handle_event", job, _job_id=f"{event_id}:evaluator", _queue_name=queue_key("evaluator")
            )
            ids.append(f"frag-{i}")
    finally:
        await queue.aclose()
    return ids


async def test_a_worker_with_every_slot_busy_on_long_jobs_stays_alive(wenv, tenant):
    settings = wenv.settings()
    finished: list[str] = []

    async def long_job(event: dict, rt) -> None:
        await asyncio.sleep(WINDOW_S * 3)  # each job outlasts the staleness window
        finished.append(event["payload"]["fragment_id"])

    port = free_port()
    async with (
        hosted_worker(
            "evaluator", {"fragment.stored": long_job}, settings, port=port, max_jobs=2, liveness_window_s=WINDOW_S
        ) as host,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http,
    ):
        ids = await _enqueue(settings, tenant, 5)  # more due jobs than slots
        answers: list[tuple[int, dict, float]] = []
        deadline = time.monotonic() + 30
        # arq counts a job complete after the handler returns and its result is stored: wait for its count too
        while (len(finished) < len(ids) or host.worker.jobs_complete < len(ids)) and time.monotonic() < deadline:
            live = await http.get("/livez")
            answers.append((live.status_code, live.json(), time.monotonic()))
            await asyncio.sleep(0.05)
        assert sorted(finished) == sorted(ids), "every job ran"
        assert host.worker.jobs_complete == len(ids)
        assert answers and all(code == 200 and body["alive"] for code, body, _ in answers), [
            a for a in answers if a[0] != 200
        ]
        saturated = [at for _, body, at in answers if body["running_jobs"] == body["max_jobs"] == 2]
        assert saturated and saturated[-1] - saturated[0] > WINDOW_S * 2, "both slots were busy for several windows"


async def test_a_job_loop_stuck_with_no_job_running_is_reported_dead(wenv):
    settings = wenv.settings()
    port = free_port()
    async with (
        hosted_worker("evaluator", {}, settings, port=port, liveness_window_s=WINDOW_S) as host,
        httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http,
    ):
        await asyncio.sleep(WINDOW_S * 2)
        assert (await http.get("/livez")).status_code == 200, "an idle worker whose loop turns is alive"
        wedged = asyncio.Event()

        async def wedged_round() -> None:
            wedged.set()
            await asyncio.Event().wait()

        host.worker._poll_iteration = wedged_round
        await eventually(lambda: truthy(wedged.is_set()), 10, "the poll loop to enter the wedged round")

        async def reported_dead():
            live = await http.get("/livez")
            return live if live.status_code == 503 else None

        body = (await eventually(reported_dead, 10, "/livez to report the stuck loop")).json()
        assert body["alive"] is False and body["running_jobs"] == 0 and body["redis"] == "ok"

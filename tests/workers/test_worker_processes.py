"""Every worker as the process operators run: readiness (/health), liveness (/livez), /metrics, configuration from
the environment only, and a clean exit soon after SIGTERM. A worker waiting for Redis to come back stays alive."""

from __future__ import annotations

import asyncio
import secrets
import time

import httpx

from memento_devtools.embedded import free_port, start_valkey
from memento_evaluator import service as evaluator_service
from memento_evaluator.handlers import HANDLERS as EVALUATOR_HANDLERS
from tests.fixtures.waiting import eventually
from tests.workers.conftest import hosted_worker, start_worker_process

WORKERS = [
    ("memento_embedder", "EMBEDDER_PORT"),
    ("memento_evaluator", "EVALUATOR_PORT"),
    ("memento_consolidator", "CONSOLIDATOR_PORT"),
]


async def test_each_worker_process_reports_health_liveness_and_metrics_and_stops_on_sigterm(wenv, tmp_path):
    env = wenv.process_env(CONSOLIDATION_CRON="*/5 * * * *")
    started = await asyncio.gather(
        *(start_worker_process(module, var, env, tmp_path / f"{module}.log") for module, var in WORKERS)
    )
    try:
        async with httpx.AsyncClient() as http:
            for worker in started:
                base = f"http://127.0.0.1:{worker.port}"
                health = (await http.get(f"{base}/health")).json()
                assert health["status"] == "ok" and health["postgres"] == health["redis"] == "up"
                live = await http.get(f"{base}/livez")
                assert live.status_code == 200 and live.json()["alive"] is True
                metrics = (await http.get(f"{base}/metrics")).text
                for name in (
                    "memento_event_processing_seconds",
                    "memento_outbox_backlog_total",
                    "memento_http_requests",
                ):
                    assert f"# HELP {name}" in metrics, (worker.log_path, name)
    finally:
        sent = time.monotonic()
        codes = await asyncio.gather(*(worker.stop() for worker in started))
        stopped_in = time.monotonic() - sent
    assert codes == [0, 0, 0]
    # idle, nothing to drain: the side server stops once should_exit is set (its main loop waits for it, no tick)
    assert stopped_in < 5, f"the idle workers took {stopped_in:.1f} s to stop after SIGTERM"


async def test_a_worker_waiting_for_redis_is_alive_and_resumes(wenv, tmp_path):
    password = secrets.token_urlsafe(12)
    valkey = start_valkey(tmp_path / "valkey", password=password)
    port = free_port()
    settings = wenv.settings(REDIS_URL=valkey.url)
    try:
        async with (
            hosted_worker(
                "evaluator",
                EVALUATOR_HANDLERS,
                settings,
                setup=evaluator_service.setup,
                teardown=evaluator_service.teardown,
                port=port,
            ),
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http,
        ):

            async def redis_state(state: str):
                live = await http.get("/livez")
                return live.status_code == 200 and live.json()["redis"] == state

            await eventually(lambda: redis_state("ok"), 10, "the worker to poll")
            valkey.process.kill()
            valkey.process.wait()
            await eventually(lambda: redis_state("reconnecting"), 10, "the worker to notice Redis is gone")
            assert (await http.get("/health")).json()["redis"] == "down"
            valkey = start_valkey(tmp_path / "valkey", port=valkey.port, password=password)
            await eventually(lambda: redis_state("ok"), 20, "the worker to resume polling")
    finally:
        valkey.stop()

"""Every service's HTTP server sleeps while idle (issue 50) and keeps what uvicorn's 0.1 s tick gave: a Date header of
the current second, and a prompt stop when `should_exit` is set, from a signal handler or another thread."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from email.utils import parsedate_to_datetime

import httpx
import pytest
import uvicorn

from memento_devtools.embedded import free_port
from memento_shared.http import QuietServer


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"ok"})


def quiet_server(**config) -> tuple[QuietServer, int]:
    port = free_port()
    return QuietServer(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, **config)), port


async def started(server: QuietServer) -> asyncio.Task:
    task = asyncio.create_task(server.serve())
    async with asyncio.timeout(10):
        while not server.started:
            await asyncio.sleep(0.01)
    return task


def voluntary_switches(tid: int) -> int:
    status = open(f"/proc/self/task/{tid}/status").read()  # noqa: SIM115 (read whole at once)
    return int(next(line for line in status.splitlines() if line.startswith("voluntary_ctxt_switches")).split()[1])


def test_an_idle_server_does_not_wake():
    """uvicorn's own main loop woke its thread ten times a second with nothing to do."""
    server, port = quiet_server()
    thread = threading.Thread(target=server.run)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
            time.sleep(0.01)
        assert httpx.get(f"http://127.0.0.1:{port}/", trust_env=False).text == "ok"
        time.sleep(0.2)  # the connection's own close settled
        before = voluntary_switches(thread.native_id)
        time.sleep(1.5)
        woke = voluntary_switches(thread.native_id) - before
    finally:
        server.should_exit = True  # from this thread, not the server's
        thread.join(5)
    assert not thread.is_alive(), "setting should_exit from another thread did not stop the server"
    assert woke <= 1, f"the idle server's thread woke {woke} times in 1.5 s"


async def test_the_date_header_is_the_current_seconds_on_one_connection():
    server, port = quiet_server()
    task = await started(server)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", trust_env=False) as http:
            dates = []
            for _ in range(2):
                before = time.time()
                answer = await http.get("/")
                sent = parsedate_to_datetime(answer.headers["date"]).timestamp()
                assert int(before) <= sent <= time.time(), (answer.headers["date"], before)
                dates.append(sent)
                await asyncio.sleep(1.1)
        assert dates[1] > dates[0], "the Date header did not move on the same keep-alive connection"
        assert answer.headers["server"] == "uvicorn"  # uvicorn's other default headers still sent
    finally:
        server.should_exit = True
        await task


async def test_sigterm_through_the_services_handler_stops_the_server_promptly():
    """The wiring of every service's __main__: the loop's SIGTERM handler sets should_exit."""
    server, port = quiet_server()
    loop = asyncio.get_running_loop()
    previous = signal.getsignal(signal.SIGTERM)
    loop.add_signal_handler(signal.SIGTERM, lambda: setattr(server, "should_exit", True))
    try:
        task = await started(server)
        await asyncio.sleep(0.3)  # idle, waiting
        os.kill(os.getpid(), signal.SIGTERM)
        sent = time.monotonic()
        async with asyncio.timeout(5):
            await task
        assert time.monotonic() - sent < 1.0  # the shutdown itself waits 0.1 s for connections
    finally:
        loop.remove_signal_handler(signal.SIGTERM)
        signal.signal(signal.SIGTERM, previous)


async def test_should_exit_set_during_startup_skips_the_main_loop():
    server, _ = quiet_server()
    server.should_exit = True
    async with asyncio.timeout(5):
        await server.serve()
    assert server.started


def test_limits_a_tick_would_check_are_refused():
    with pytest.raises(ValueError, match="limit_max_requests"):
        quiet_server(limit_max_requests=10)

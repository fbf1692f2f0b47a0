"""memento_shared.heap and the server hook that calls it. Freezing is process-wide, so it is tried in a child
process: the test process's own heap is left as it is."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import textwrap

import uvicorn

from memento_shared.http import QuietServer

CHILD = textwrap.dedent(
    """
    import gc, weakref
    from memento_shared import heap
    from memento_shared.telemetry.metrics import REGISTRY

    class Node:
        pass

    heap.observe_pauses()
    kept = [Node() for _ in range(1000)]
    garbage = Node()
    garbage.me = garbage  # a cycle only the collector frees
    dead = weakref.ref(garbage)
    del garbage
    tracked = len(gc.get_objects())
    heap.settle()
    assert dead() is None, "startup's garbage was frozen instead of freed"
    assert gc.get_freeze_count() >= len(kept), gc.get_freeze_count()
    assert len(gc.get_objects()) < tracked / 10, "full collections still walk what startup built"
    count = REGISTRY.get_sample_value("memento_gc_pause_seconds_count", {"generation": "2"})
    assert count >= 1, count
    assert REGISTRY.get_sample_value("memento_gc_frozen_objects") == gc.get_freeze_count()
    young = gc.get_stats()[0]["collections"]
    held = [{"id": n, "row": [n]} for n in range(3000)]  # more than a recall by text holds at once
    assert gc.get_stats()[0]["collections"] == young, "a young collection ran in the middle of a request"
    print("ok")
    """
)


def test_settle_frees_startups_garbage_freezes_the_rest_and_lets_a_request_allocate():
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


async def test_on_started_runs_once_the_server_listens():
    async def app(scope, receive, send):
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})

    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    port = listening.getsockname()[1]
    listening.close()
    seen: list[bool] = []

    def on_started() -> None:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            seen.append(server.started)
        server.should_exit = True

    server = QuietServer(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None), on_started)
    async with asyncio.timeout(10):
        await server.serve()
    assert seen == [True]

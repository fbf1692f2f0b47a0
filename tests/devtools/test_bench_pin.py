"""`bench.relevance_latency --pin`: the embedder's process tree held to the first CPU, the run's other processes (the
bench's own included) to the rest, every thread of each."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from types import SimpleNamespace

import psutil
import pytest

from bench.relevance_latency import pin

# a launcher stand-in: an "embedder" (its argv names memento_embedder, as `python -m memento_embedder` does) that has
# a child of its own (the document lane's process), and another service
TREE = """
import subprocess, sys, time
sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
embedder = subprocess.Popen([sys.executable, "-c",
    "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
    "time.sleep(60)", "memento_embedder"])
other = subprocess.Popen(sleeper)
print(embedder.pid, other.pid, flush=True)
time.sleep(60)
"""


def _threads_affinity(pid: int) -> set[frozenset[int]]:
    return {frozenset(os.sched_getaffinity(thread.id)) for thread in psutil.Process(pid).threads()}


@pytest.fixture
def launcher():
    process = subprocess.Popen([sys.executable, "-c", TREE], stdout=subprocess.PIPE, text=True)
    embedder, other = (int(p) for p in process.stdout.readline().split())
    deadline = time.monotonic() + 10
    while not psutil.Process(embedder).children() and time.monotonic() < deadline:  # the lane's process is starting
        time.sleep(0.05)
    mine = {thread.id: os.sched_getaffinity(thread.id) for thread in psutil.Process().threads()}
    try:
        yield process, embedder, other
    finally:
        for tid, cpus in mine.items():  # pin() holds this process too: the rest of the session gets its CPUs back
            with contextlib.suppress(OSError):  # a thread that ended meanwhile
                os.sched_setaffinity(tid, cpus)
        for child in psutil.Process(process.pid).children(recursive=True):
            with contextlib.suppress(psutil.Error):
                child.kill()
        process.kill()
        process.wait()


def test_the_embedders_tree_is_held_to_the_first_cpu_and_every_other_process_to_the_rest(launcher):
    process, embedder, other = launcher
    assert {embedder, other} == {child.pid for child in psutil.Process(process.pid).children()}
    (lane,) = (child.pid for child in psutil.Process(embedder).children())
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        with pytest.raises(SystemExit, match="at least two CPUs"):
            pin(SimpleNamespace(process=process))
        return
    pinned = pin(SimpleNamespace(process=process))
    assert pinned == {"embedder_cpus": cpus[:1], "other_cpus": cpus[1:], "embedder_processes": 2}
    for pid in (embedder, lane):
        assert _threads_affinity(pid) == {frozenset(cpus[:1])}
    for pid in (process.pid, other, os.getpid()):
        assert _threads_affinity(pid) == {frozenset(cpus[1:])}


def test_a_run_without_an_embedder_is_refused(launcher):
    process, embedder, other = launcher
    with pytest.raises(SystemExit, match="no embedder"):
        pin(SimpleNamespace(process=SimpleNamespace(pid=other)))  # a tree with no embedder in it

"""Where a local model computes: a lane is one model instance, the worker that runs it, and the turns that keep it
to one call at a time (the model is not re-entrant), the cheapest waiting call first (turns.py).

- `ThreadLane`: a thread of this process. The model releases the GIL, so a query lane beside a document lane
  computes while a document call is in progress.
- `ProcessLane`: a child process in a session of its own, niced (memento_shared.priority: under autogroup
  scheduling a niced *thread* yields to this process's other threads but still takes a full share from memory-api,
  the gateway and Postgres). A backlog of stored fragments then slows no request, and embeds at full speed
  whenever the request path leaves a core idle.
"""

from __future__ import annotations

import asyncio
import ctypes
import logging
import multiprocessing
import os
import signal
import sys
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool, ProcessPoolExecutor
from typing import Any

import numpy as np

from memento_embedder.providers.base import InputType, Provider, ProviderError
from memento_embedder.turns import ShortestFirst
from memento_shared.priority import lower_priority

log = logging.getLogger(__name__)
_PR_SET_PDEATHSIG = 1


class ThreadLane:
    def __init__(self, provider: Provider, thread_name: str) -> None:
        self.provider = provider
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=thread_name)
        self.turns = ShortestFirst()

    async def embed(self, texts: list[str], input_type: InputType) -> np.ndarray:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, self.provider.embed, texts, input_type)

    def close(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)


class ProcessLane:
    """The provider is pickled into the child, which builds its own instance there (a local model's pickle is
    the recipe for another instance, not its weights). The child starts on the first call."""

    def __init__(self, provider: Provider, niceness: int) -> None:
        self.provider = provider
        self.niceness = niceness
        self.turns = ShortestFirst()
        self.executor = self._start()

    def _start(self) -> ProcessPoolExecutor:
        # spawn, not fork: this process runs threads (the query lane, telemetry) whose locks a fork would copy
        return ProcessPoolExecutor(
            max_workers=1,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_child_start,
            initargs=(self.provider, self.niceness, os.getpid()),
        )

    async def embed(self, texts: list[str], input_type: InputType) -> np.ndarray:
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self.executor, _child_embed, texts, input_type)
        except BrokenProcessPool:
            # The child died (killed, out of memory). Fail this call (the job retries) and start a new child.
            log.warning("embedder.document_process_died")
            self.executor.shutdown(wait=False, cancel_futures=True)
            self.executor = self._start()
            raise ProviderError("the document embedding process died", error_type="crashed") from None

    def close(self) -> None:
        # waits for the child to exit: at most the model call in progress (tens of ms), and no process outlives us
        self.executor.shutdown(wait=True, cancel_futures=True)


_child_provider: Any = None


def _child_start(provider: Provider, niceness: int, parent: int) -> None:
    global _child_provider
    _die_with_parent(parent)
    os.setsid()  # a session (so an autogroup) of its own, which lower_priority nices
    lower_priority(niceness)
    _child_provider = provider


def _child_embed(texts: list[str], input_type: InputType) -> np.ndarray:
    return _child_provider.embed(texts, input_type)


def _die_with_parent(parent: int) -> None:
    """Exit with the embedder even if it is killed outright (without this the child lingers until its next call).
    The parent's pid is passed in, not assumed: in a container without an init the embedder itself is PID 1."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(0)

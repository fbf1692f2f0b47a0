"""Read your own writes by meaning (issue 47), each dialect's write and then its search, through the gateway with the
official MCP client and the real offline model, with the embedder stopped for the test's length.

- Its worker stalled: the embedder's document process (the one that embeds what the worker takes from the queue) is
  stopped with SIGSTOP, so no vector arrives from the backlog while the test runs, and the embedder's query lane (its
  HTTP API, in the main process) still answers. Each search must rank the caller's fresh write first, asked in words
  sharing no content word with it: by meaning, as it will rank once embedded.
- All of it stopped (main process too): no model is reachable, so every search finds by words only and says that its
  meaning search was partial, in the field its dialect answers with.

Both are let go again (SIGCONT) when the test ends, so the system the other e2e tests share catches up."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
import uuid
from collections.abc import Iterator

import psutil
import pytest

from tests.e2e.test_protocol_dialect import call, client_for
from tests.fixtures.waiting import eventually

pytestmark = pytest.mark.e2e
FACT = "We picked arq for background jobs because it is asyncio-native"
QUESTION = "which task queue library did the team adopt?"  # no word of FACT's, nor a word's first five letters
OTHERS = ["The parking garage opens at seven", "Lunch is catered on Wednesdays"]


def embedder_processes(system) -> tuple[psutil.Process, list[psutil.Process]]:
    """The embedder's main process and its document process (a spawned child; the resource tracker is not one)."""
    main = next(
        p for p in psutil.Process(system.process.pid).children(recursive=True) if "memento_embedder" in p.cmdline()
    )
    documents = [c for c in main.children(recursive=True) if "spawn_main" in " ".join(c.cmdline())]
    return main, documents


@contextlib.contextmanager
def stopped(processes: list[psutil.Process]) -> Iterator[None]:
    for process in processes:
        os.kill(process.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for process in processes:
            os.kill(process.pid, signal.SIGCONT)


@pytest.fixture
def worker_stalled(system) -> Iterator[None]:
    _, documents = embedder_processes(system)
    assert documents, "the embedder's document process runs (started by its warm-up)"
    with stopped(documents):
        yield


@pytest.fixture
def embedder_down(system) -> Iterator[None]:
    main, documents = embedder_processes(system)
    with stopped([*documents, main]):
        yield


def workspace(name: str) -> str:
    return f"fresh-{name}-{time.time_ns()}"


def user(text: str) -> dict:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


async def test_fragments_remember_then_recall(system, worker_stalled):
    async with client_for(system, workspace("fragments"), "fragments") as client:
        for other in OTHERS:
            await call(client, "remember", {"content": other, "topic": "office", "type": "fact"})
        stored, _ = await call(client, "remember", {"content": FACT, "topic": "eng", "type": "decision"})
        assert stored["indexed"] is False  # nothing embeds it meanwhile
        found, _ = await call(client, "recall", {"text": QUESTION})
        assert found["fragments"][0]["id"] == stored["id"] and found["fragments"][0]["tier"] == "L3"
        assert "meaningSearch" not in found

        async def backlog() -> bool:
            stats, _ = await call(client, "memory_stats", {})
            return stats["embeddingBacklog"] == 0

        await eventually(backlog, 10, "the recall's write-back of the three vectors (the worker embeds nothing)")


async def test_simple_store_memory_then_search_memories(system, worker_stalled):
    async with client_for(system, workspace("simple"), "simple") as client:
        for other in OTHERS:
            await call(client, "store_memory", {"content": other})
        stored, _ = await call(client, "store_memory", {"content": FACT})
        assert stored["indexed"] is True  # store_memory embeds on its request path (the query lane answers)
        found, _ = await call(client, "search_memories", {"query": QUESTION})
        assert found["memories"][0]["id"] == stored["created"]["id"] and "meaning_search" not in found


async def test_protocol_store_then_recall(system, worker_stalled):
    async with client_for(system, workspace("protocol"), "protocol") as client:
        for other in OTHERS:
            await call(client, "memento_store", {"content": other})
        stored, _ = await call(client, "memento_remember", {"content": FACT})
        assert stored["indexed"] is False
        found, text = await call(client, "memento_recall", {"query": QUESTION})
        assert found["results"][0]["id"] == stored["id"] and "meaning_search" not in found
        assert text.startswith(f"Found {found['count']} memor")


async def test_lifecycle_after_turn_then_before_turn(system, worker_stalled):
    async with client_for(system, workspace("lifecycle"), "lifecycle") as client:
        turn = {"session_id": "s1", "turn_id": "t1", "input_items": [user(f"{FACT}.")], "output_items": []}
        after, _ = await call(client, "memory_after_turn", turn)
        assert after == {"ok": True, "indexed": False}
        asked = {"session_id": "s2", "current_input_text": QUESTION}
        before, _ = await call(client, "memory_before_turn", asked)
        block = before["input_items"][0]["content"][0]["text"]
        assert before["recall_fact_ids"] and FACT in block and "meaning_search" not in before


async def test_documents_commit_then_search(system, worker_stalled):
    async with client_for(system, workspace("documents"), "documents") as client:
        entries = [
            {"kind": "note", "title": "Office", "content": f"# Office\n\n{OTHERS[0]}."},
            {"kind": "decision", "title": "Jobs", "content": f"# Jobs\n\n{FACT}."},
        ]
        committed, _ = await call(client, "memory.commit", {"idempotencyKey": str(uuid.uuid4()), "entries": entries})
        assert [i["indexed"] for i in committed["items"]] == [False, False]
        found, _ = await call(client, "memory.search", {"query": QUESTION})
        assert found["results"][0]["itemId"] == committed["items"][1]["itemId"] and "meaningSearch" not in found


async def test_with_the_embedder_down_every_dialects_search_says_its_meaning_search_was_partial(system, embedder_down):
    """No model answers (memory-api's call waits for its timeout): the rows are found by their words. Each text is new
    to this test, so no vector memory-api cached earlier answers for the model."""
    fact = f"{FACT} ({uuid.uuid4().hex[:8]})"

    async def fragments() -> None:
        async with client_for(system, workspace("down-fragments"), "fragments") as client:
            stored, _ = await call(client, "remember", {"content": fact, "topic": "eng", "type": "decision"})
            found, _ = await call(client, "recall", {"text": "background jobs"})
            assert found["fragments"][0]["id"] == stored["id"] and found["meaningSearch"] == "partial"

    async def simple() -> None:
        async with client_for(system, workspace("down-simple"), "simple") as client:
            stored, _ = await call(client, "store_memory", {"content": fact})
            assert stored["indexed"] is False  # its inline embedding gave up: the embedder fills it in later
            found, _ = await call(client, "search_memories", {"query": "background jobs"})
            assert found["memories"][0]["id"] == stored["created"]["id"] and found["meaning_search"] == "partial"

    async def protocol() -> None:
        async with client_for(system, workspace("down-protocol"), "protocol") as client:
            stored, _ = await call(client, "memento_store", {"content": fact})
            found, text = await call(client, "memento_recall", {"query": "background jobs"})
            assert found["results"][0]["id"] == stored["id"] and found["meaning_search"] == "partial"
            assert text.endswith("matched by words only.)")

    async def lifecycle() -> None:
        async with client_for(system, workspace("down-lifecycle"), "lifecycle") as client:
            turn = {"session_id": "s1", "turn_id": "t1", "input_items": [user(f"{fact}.")], "output_items": []}
            await call(client, "memory_after_turn", turn)
            asked = {"session_id": "s2", "current_input_text": "what runs our background jobs?"}
            before, _ = await call(client, "memory_before_turn", asked)
            assert before["recall_fact_ids"] and before["meaning_search"] == "partial"

    async def documents() -> None:
        async with client_for(system, workspace("down-documents"), "documents") as client:
            entries = [{"kind": "decision", "title": "Jobs", "content": f"# Jobs\n\n{fact}."}]
            committed, _ = await call(
                client, "memory.commit", {"idempotencyKey": str(uuid.uuid4()), "entries": entries}
            )
            found, _ = await call(client, "memory.search", {"query": "background jobs"})
            assert found["results"][0]["itemId"] == committed["items"][0]["itemId"]
            assert found["meaningSearch"] == "partial"

    await asyncio.gather(fragments(), simple(), protocol(), lifecycle(), documents())

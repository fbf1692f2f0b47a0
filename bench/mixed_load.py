"""A steady mixed load through the gateways with the official MCP client, recording every acknowledged write.

Calls at a fixed rate, spread over a few virtual clients: seed 000's `remember`, `amend` and `recall` (by keywords
and by text), and seed 002's `store_memory` and `search_memories` (the `?profile=all` tool list). A client whose
call fails in transport (its gateway gone, or answering 5xx) moves to the next gateway for its next call.

With `keep` set (the soak), the store stays that size: a write that would create a fragment while the load's own
live fragments already number `keep` forgets the oldest of them instead (`forget`), so the data the services hold
does not grow while the load runs.

A write counts as acknowledged only when its answer said success; then its id and the SHA-256 of what it wrote are
recorded (`Write`). A write that failed is not retried: it may have committed before the failure, so it is counted
as unacknowledged and may be present at most once. An amend that failed leaves its fragment's content either the old
or the new text, and that fragment is not amended again.

Runs in a thread of its own (`LoadThread`) with its own event loop, so the caller's main thread stays free to kill
and restart components (bench.cluster spawns from the main thread).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import random
import re
import secrets
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from bench.corpus import TOPICS, keyword_pool, queries

# (op, weight): writes about half the calls, as an agent that both learns and looks up
MIX = (
    ("remember", 30),
    ("store_memory", 12),
    ("amend", 13),
    ("recall_keywords", 20),
    ("recall_text", 12),
    ("search_memories", 13),
)
WRITES = ("remember", "store_memory", "amend")
CREATES = ("remember", "store_memory")
CALL_TIMEOUT_S = 20.0  # one call, whatever happens under it (a killed server must not hang the client)
CONNECT_TIMEOUT_S = 10.0
_CODE = re.compile(r'"code"\s*:\s*"([A-Z_]+)"')


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class Write:
    """An acknowledged write: the fragment `id` now holds content with one of `shas` (one, unless an amend of it
    failed without an answer)."""

    id: str
    tool: str
    shas: set[str]
    acked_at: float
    settled: bool = True  # False once an amend of it went unanswered: not amended again


@dataclass
class Call:
    op: str
    started: float  # time.monotonic()
    seconds: float
    gateway: int
    error: str | None = None  # None: success; "tool:CODE" or "transport:ExceptionType"


@dataclass
class LoadState:
    writes: dict[str, Write] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    # writes sent but not acknowledged: SHA-256 of what they wrote -> the error their caller saw
    unacknowledged: dict[str, str] = field(default_factory=dict)
    forgotten: int = 0  # acknowledged writes the load itself forgot since (`keep`): no longer in `writes`
    lock: threading.Lock = field(default_factory=threading.Lock)


class MixedLoad:
    def __init__(
        self,
        urls: list[str],
        key: str,
        workspace: str,
        rate: float,
        clients: int = 4,
        seed: int = 31,
        *,
        mix: tuple[tuple[str, int], ...] = MIX,
        keep: int | None = None,
        state: LoadState | None = None,
    ) -> None:
        self.urls = urls
        self.mix = mix
        self.keep = keep
        self.key = key
        self.workspace = workspace
        self.rate = rate
        self.clients = clients
        self.rng = random.Random(seed)
        self.tag = secrets.token_hex(4)
        self.keywords = keyword_pool()
        self.queries = queries(5000, seed=seed)
        self.counter = 0
        self.state = state or LoadState()
        self._next_at: dict[int, float] = {}
        self._stop = asyncio.Event()

    # ---- arguments ----

    def _content(self, n: int) -> str:
        r = self.rng
        return (
            f"chaos {self.tag} note {n}: the {r.choice(TOPICS)} team keeps {r.choice(self.keywords)} next to "
            f"{r.choice(self.keywords)}"
        )

    def _amend_target(self) -> Write | None:
        """A settled fragment, marked unsettled while the amend is under way: two clients amending one fragment at
        once would leave whichever committed last, which the record cannot tell."""
        with self.state.lock:
            ids = [w for w in self.state.writes.values() if w.settled and w.tool == "remember"]
            target = self.rng.choice(ids) if ids else None
            if target is not None:
                target.settled = False
        return target

    def _forget_target(self) -> Write | None:
        """The oldest settled fragment, when the load's live fragments number `keep` or more (marked unsettled: a
        forget that goes unanswered leaves it either there or gone, and it is not touched again)."""
        if self.keep is None:
            return None
        with self.state.lock:
            if len(self.state.writes) < self.keep:
                return None
            target = next((w for w in self.state.writes.values() if w.settled), None)
            if target is not None:
                target.settled = False
        return target

    # ---- calls ----

    async def _one(self, client: Client, op: str, gateway: int) -> None:
        self.counter += 1
        n = self.counter
        target: Write | None = None
        content = None
        if op in CREATES and (target := self._forget_target()) is not None:
            op, tool, args = "forget", "forget", {"id": target.id, "force": True}
        elif op == "remember":
            content = self._content(n)
            tool, args = "remember", {"content": content, "topic": self.rng.choice(TOPICS), "type": "fact"}
        elif op == "store_memory":
            content = self._content(n)
            tool, args = "store_memory", {"content": content, "source": "explicit"}
        elif op == "amend":
            target = self._amend_target()
            if target is None:
                op, tool, args = "recall_keywords", "recall", {"keywords": [self.rng.choice(self.keywords)]}
            else:
                content = self._content(n) + " (amended)"
                tool, args = "amend", {"id": target.id, "content": content}
        elif op == "recall_keywords":
            tool, args = "recall", {"keywords": [self.rng.choice(self.keywords)]}
        elif op == "recall_text":
            tool, args = "recall", {"text": self.queries[n % len(self.queries)]}
        else:
            tool, args = "search_memories", {"query": self.queries[n % len(self.queries)]}

        started = time.monotonic()
        error: str | None = None
        body: dict = {}
        try:
            async with asyncio.timeout(CALL_TIMEOUT_S):  # in this task: the SDK's task groups must not change task
                result = await client.call_tool(tool, args)
            text = result.content[0].text if result.content else ""
            if result.is_error:
                match = _CODE.search(text)
                error = f"tool:{match.group(1) if match else 'UNKNOWN'}"
            elif op in WRITES:
                body = json.loads(text)
        except BaseException as exc:  # noqa: BLE001 - recorded first; a cancellation is raised again below
            error = f"transport:{describe(exc)}"
            if isinstance(exc, asyncio.CancelledError):  # the SDK cancels the session's tasks when its server is gone
                self._record(op, started, gateway, error, content, target, body)
                raise
        self._record(op, started, gateway, error, content, target, body)
        if error and error.startswith("transport"):
            raise _MoveOn(error)

    def _record(self, op, started, gateway, error, content, target, body) -> None:  # noqa: ANN001
        with self.state.lock:
            self.state.calls.append(Call(op, started, time.monotonic() - started, gateway, error))
            if op in WRITES:
                self._record_write(op, content, target, body, error)
            elif op == "forget" and error is None:
                del self.state.writes[target.id]
                self.state.forgotten += 1

    def _record_write(self, op: str, content: str, target: Write | None, body: dict, error: str | None) -> None:
        if op == "amend":
            if error is None:
                target.shas, target.settled = {sha(content)}, True
            else:  # it may have committed before the failure: either text is right, and it is not amended again
                target.shas = target.shas | {sha(content)}
                self.state.unacknowledged[sha(content)] = f"amend {error}"
            return
        if error is not None:
            self.state.unacknowledged[sha(content)] = f"{op} {error}"
            return
        frag_id = body["id"] if op == "remember" else body["created"]["id"]
        self.state.writes[frag_id] = Write(frag_id, op, {sha(content)}, time.monotonic())

    # ---- clients ----

    async def _client_loop(self, index: int) -> None:
        """One virtual client: a session on one gateway after another. Each session runs in a task of its own: when
        its server goes away, the SDK cancels that task's scope, and the cancellation must stay inside it."""
        self._next_at[index] = time.monotonic() + index / self.rate
        gateway = index % len(self.urls)
        while not self._stop.is_set():
            try:
                await asyncio.create_task(self._session(index, gateway))
            except asyncio.CancelledError:
                if asyncio.current_task().cancelling():  # this loop itself is being cancelled
                    raise
            except Exception as exc:  # noqa: BLE001 - recorded as a failed connection, then the next gateway
                with self.state.lock:
                    failed = Call("connect", time.monotonic(), 0.0, gateway, f"transport:{describe(exc)}")
                    self.state.calls.append(failed)
                await _sleep_until(time.monotonic() + self.clients / self.rate, self._stop)
            gateway = (gateway + 1) % len(self.urls)

    async def _session(self, index: int, gateway: int) -> None:
        """Calls on one gateway at this client's share of the rate, until stopped or a call fails in transport."""
        period = self.clients / self.rate
        ops, weights = zip(*self.mix, strict=True)
        headers = {"Authorization": f"Bearer {self.key}", "X-Memento-Workspace": self.workspace}
        transport = streamable_http_client(
            self.urls[gateway] + "?profile=all", http_client=create_mcp_http_client(headers=headers)
        )
        client = Client(transport, read_timeout_seconds=CALL_TIMEOUT_S)
        async with asyncio.timeout(CONNECT_TIMEOUT_S):
            await client.__aenter__()
        try:
            while not self._stop.is_set():
                await _sleep_until(self._next_at[index], self._stop)
                if self._stop.is_set():
                    break
                self._next_at[index] = max(self._next_at[index] + period, time.monotonic())  # no burst to catch up
                await self._one(client, self.rng.choices(ops, weights)[0], gateway)
        except _MoveOn:
            pass
        finally:
            with contextlib.suppress(Exception):  # a dead gateway's session cannot be closed cleanly
                async with asyncio.timeout(5):
                    await client.__aexit__(None, None, None)

    async def run(self) -> None:
        await asyncio.gather(*(self._client_loop(i) for i in range(self.clients)))

    def stop(self) -> None:
        self._stop.set()


def describe(exc: BaseException) -> str:
    """A short name for a failure: the first leaf of an exception group, an MCP error's code and message."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    error = getattr(exc, "error", None)
    if error is not None and hasattr(error, "code"):
        return f"{type(exc).__name__}({error.code}: {str(error.message)[:60]})"
    return type(exc).__name__


class _MoveOn(Exception):
    pass


async def _sleep_until(when: float, stop: asyncio.Event) -> None:
    delay = when - time.monotonic()
    if delay > 0:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(delay):
                await stop.wait()


class LoadThread:
    """A MixedLoad in a thread of its own, with its own event loop."""

    def __init__(self, load: MixedLoad) -> None:
        self.load = load
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._main, name="mixed-load", daemon=True)
        self.failure: BaseException | None = None

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._run())
        except BaseException as exc:  # noqa: BLE001 - reported by stop()
            self.failure = exc
        finally:
            self.loop.close()

    async def _run(self) -> None:
        self.load._stop = asyncio.Event()  # bound to this loop
        await self.load.run()

    def start(self) -> LoadThread:
        self.thread.start()
        return self

    def stop(self, timeout: float = 60.0) -> None:
        if self.thread.is_alive():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                self.loop.call_soon_threadsafe(self.load.stop)
        self.thread.join(timeout)
        if self.thread.is_alive():
            raise RuntimeError(f"the load did not stop within {timeout:.0f} s")
        if self.failure is not None:
            raise RuntimeError(f"the load failed: {self.failure!r}") from self.failure


async def verify(owner_url: str, state: LoadState, workspace: str, timeout: float) -> dict:
    """Every acknowledged write present exactly once with what it wrote; then wait (up to `timeout` s) until each is
    embedded for its current content and evaluated since its last change. Unacknowledged writes: present at most
    once. Dead letters of the workspace are listed."""
    import asyncpg

    conn = await asyncpg.connect(owner_url)
    try:
        rows = await conn.fetch("SELECT id, content FROM agent_memory.fragments WHERE workspace = $1", workspace)
        by_sha: dict[str, list[str]] = {}
        content_of: dict[str, str] = {}
        for row in rows:
            by_sha.setdefault(sha(row["content"]), []).append(row["id"])
            content_of[row["id"]] = sha(row["content"])
        missing, changed, duplicated = [], [], []
        for write in state.writes.values():
            if write.id not in content_of:
                missing.append(write.id)
            elif content_of[write.id] not in write.shas:
                changed.append(write.id)
            elif len(by_sha[content_of[write.id]]) != 1:
                duplicated.append(write.id)
        unacked_twice = sum(1 for digest in state.unacknowledged if len(by_sha.get(digest, [])) > 1)
        # what their callers were told, for those that were stored all the same
        unacked_present = dict(Counter(error for digest, error in state.unacknowledged.items() if digest in by_sha))
        ids = list(state.writes)
        deadline = time.monotonic() + timeout
        started = time.monotonic()
        while True:
            pending = await conn.fetchrow(
                "SELECT count(*) FILTER (WHERE NOT EXISTS (SELECT 1 FROM agent_memory.fragment_embeddings e"
                "   WHERE e.fragment_id = f.id AND e.content_hash = f.content_hash)) AS not_embedded,"
                " count(*) FILTER (WHERE f.quality_score IS NULL OR f.verified_at < f.updated_at) AS not_evaluated"
                " FROM agent_memory.fragments f WHERE f.id = ANY($1::text[])",
                ids,
            )
            if (pending["not_embedded"] == 0 and pending["not_evaluated"] == 0) or time.monotonic() > deadline:
                break
            await asyncio.sleep(1.0)
        dead = await conn.fetch(
            "SELECT queue, event_type, error, attempts FROM agent_memory.dead_letters WHERE workspace = $1",
            workspace,
        )
    finally:
        await conn.close()
    return {
        "acknowledged_writes": len(state.writes),
        "missing": missing,
        "changed": changed,
        "duplicated": duplicated,
        "lost": len(missing) + len(changed) + len(duplicated),
        "unacknowledged_writes": len(state.unacknowledged),
        "unacknowledged_present": sum(unacked_present.values()),
        "unacknowledged_present_errors": unacked_present,
        "unacknowledged_present_twice": unacked_twice,
        "not_embedded": pending["not_embedded"],
        "not_evaluated": pending["not_evaluated"],
        "settle_seconds": round(time.monotonic() - started, 1),
        "dead_letters": [dict(r) for r in dead],
    }

"""Cancellation and slow upstreams: `notifications/cancelled` stops a running tool call on whichever replica runs
it, and a memory-api that does not answer becomes a clean, retryable tool error.

The slow memory-api is a loopback socket that accepts requests and never answers: a network condition, not a
stand-in for any of our code.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator

import pytest

from tests.gateway.conftest import Gateway


class SilentPeer:
    """Accepts HTTP connections and never answers; records when a caller gives up on one."""

    def __init__(self) -> None:
        self.opened = 0
        self.closed = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.opened += 1
        await reader.read()  # until the caller closes the connection
        self.closed += 1
        writer.close()


@pytest.fixture
async def silent_url() -> AsyncIterator[tuple[str, SilentPeer]]:
    peer = SilentPeer()
    server = await asyncio.start_server(peer.handle, "127.0.0.1", 0)
    yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", peer
    server.close()


async def wait_until(predicate, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(0.02)  # bounded poll


async def _cancel_running_call(caller: Gateway, canceller: Gateway, peer: SilentPeer) -> list[dict]:
    async with caller.http() as http, canceller.http() as other:
        session = await caller.session(http)
        headers = {"Mcp-Session-Id": session}
        params = {"name": "recall", "arguments": {"topic": "slow"}, "_meta": {"progressToken": 1}}
        call = {"jsonrpc": "2.0", "id": "slow-1", "method": "tools/call", "params": params}
        events = []
        async with http.stream("POST", "/mcp", json=call, headers=headers) as stream:
            lines = stream.aiter_lines()
            async for line in lines:
                if line.startswith("data:"):
                    events.append(json.loads(line[5:]))
                    break  # the "started" progress: the call is now waiting on memory-api
            await wait_until(lambda: peer.opened == 1)
            cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "slow-1"}}
            assert (await other.post("/mcp", json=cancel, headers=headers)).status_code == 202
            events += [json.loads(line[5:]) async for line in lines if line.startswith("data:")]
        await wait_until(lambda: peer.closed == 1)  # the upstream request was abandoned, not left hanging
        return events


async def test_cancelling_a_tool_call_ends_its_stream_without_an_answer(gateways, silent_url):
    url, peer = silent_url
    gateway = await gateways(MEMORY_API_URL=url, UPSTREAM_TIMEOUT_SECONDS="60")
    events = await _cancel_running_call(gateway, gateway, peer)
    assert [e.get("method") for e in events] == ["notifications/progress"]


async def test_a_cancellation_sent_to_another_replica_reaches_the_call(gateways, silent_url):
    url, peer = silent_url
    running_here = await gateways(MEMORY_API_URL=url, UPSTREAM_TIMEOUT_SECONDS="60")
    other_replica = await gateways(MEMORY_API_URL=url)
    events = await _cancel_running_call(running_here, other_replica, peer)
    assert all("result" not in e for e in events)


async def test_an_upstream_that_never_answers_is_a_retryable_tool_error(gateways, silent_url):
    url, _ = silent_url
    gateway = await gateways(MEMORY_API_URL=url, UPSTREAM_TIMEOUT_SECONDS="0.3")
    async with gateway.client() as client:
        result = await client.call_tool("recall", {"topic": "x"})
    error = json.loads(result.content[0].text)["error"]
    assert result.is_error and error["code"] == "RESOURCE_BUSY" and error["retryable"] is True


async def test_a_call_cancelled_by_both_its_client_and_its_caller_stops_the_caller(monkeypatch):
    """At shutdown every in-flight call and every waiting handler is cancelled at once: the handler must stop, not
    take the call's cancellation for the client's and go on as if it had an answer to send (None)."""
    from types import SimpleNamespace

    from memento_gateway.mcp import engine
    from memento_gateway.mcp.inflight import InFlight, owner
    from memento_gateway.mcp.jsonrpc import Message

    async def runs_until_cancelled(gw, message, call):
        await asyncio.Event().wait()

    monkeypatch.setattr(engine, "_run", runs_until_cancelled)
    gw = SimpleNamespace(inflight=InFlight())
    call = SimpleNamespace(session=SimpleNamespace(id="session", principal=SimpleNamespace(tenant_id="t")))
    message = Message("request", {"jsonrpc": "2.0", "id": 7, "method": "tools/call"})

    client_only = asyncio.create_task(engine.answer(gw, message, call, "test"))
    await asyncio.sleep(0.01)
    assert gw.inflight.cancel(owner(call.session), 7)
    assert await client_only is None, "the client's cancel alone: no answer, and the handler goes on"

    both = asyncio.create_task(engine.answer(gw, message, call, "test"))
    await asyncio.sleep(0.01)
    [running] = gw.inflight.tasks.values()
    running.cancel()  # as InFlight.drain does at shutdown, and in the same turn the server cancels the handler
    both.cancel()
    with pytest.raises(asyncio.CancelledError):
        await both


def test_the_same_handle_and_request_id_of_two_tenants_are_two_calls():
    """A stateless request's session id is the working-memory handle its client chose: another tenant's client may
    choose it too, and closing one's stream must not cancel the other's call."""
    from types import SimpleNamespace

    from memento_gateway.mcp.inflight import owner

    mine = SimpleNamespace(id="handle-1", principal=SimpleNamespace(tenant_id="a"))
    theirs = SimpleNamespace(id="handle-1", principal=SimpleNamespace(tenant_id="b"))
    assert owner(mine) != owner(theirs)

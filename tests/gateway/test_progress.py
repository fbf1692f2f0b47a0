"""A long tool call's steps, reported by the worker on its progress channel in Valkey, reach the MCP client as
increasing notifications/progress while the call runs (the wiring through all services: tests/e2e, memory_consolidate).
"""

from __future__ import annotations

import asyncio
import time

import pytest

from memento_gateway.mcp import progress as relay
from memento_gateway.mcp.call import Call
from memento_gateway.mcp.sessions import Session
from memento_shared import progress
from memento_shared.principal import Principal
from tests.fixtures.waiting import eventually, truthy

PRINCIPAL = Principal(tenant_id="t", workspaces=("default",), agents=("a",), scopes=("read",), subject="s")


def call_with(sent: list[dict], version: str = "2025-06-18") -> Call:
    async def emit(message: dict) -> None:
        sent.append(message["params"])

    session = Session("sid", PRINCIPAL, version, ("full",), time.time())
    return Call(session, PRINCIPAL, emit)


async def slow_work(redis, progress_id: str | None, steps: int) -> str:
    """A worker's steps, each outlasting the gateway's polling interval, one reported twice (a stale reading)."""
    for done in range(1, steps + 1):
        await asyncio.sleep(relay.POLL_S * 1.6)
        await progress.report(redis, PRINCIPAL.tenant_id, progress_id, done, steps, f"step {done}")
    await progress.report(redis, PRINCIPAL.tenant_id, progress_id, steps - 1, steps, "late, out of order")
    return "answer"


async def test_steps_are_relayed_while_the_call_runs_always_increasing(redis_client):
    sent: list[dict] = []
    tracker = relay.ToolProgress(call_with(sent), {"_meta": {"progressToken": "tok"}}, redis_client, reports_steps=True)
    assert tracker.id is not None and progress.valid_id(tracker.id) == tracker.id

    await tracker.start("started")
    assert await tracker.around(slow_work(redis_client, tracker.id, 4)) == "answer"
    await tracker.finish("finished")

    values = [(p["progress"], p["total"]) for p in sent]
    assert values[0] == (0, 1) and values[-1] == (4, 4)
    assert [v for v, _ in values] == sorted({v for v, _ in values}), "strictly increasing, nothing repeated"
    assert len(values) >= 4, f"steps arrived while the call ran, not only at its end: {sent}"
    assert all(p["progressToken"] == "tok" for p in sent) and sent[1]["message"].startswith("step ")


async def test_a_fractional_step_is_relayed_between_the_start_and_the_first_step(redis_client):
    """A worker waiting before its first step (memory_consolidate behind another run) reports half a step."""
    sent: list[dict] = []
    tracker = relay.ToolProgress(call_with(sent), {"_meta": {"progressToken": "tok"}}, redis_client, reports_steps=True)

    async def work() -> str:
        await progress.report(redis_client, PRINCIPAL.tenant_id, tracker.id, 0.5, 2, "waiting")
        await eventually(lambda: truthy(len(sent) == 2), 10, "the half step relayed")
        await progress.report(redis_client, PRINCIPAL.tenant_id, tracker.id, 1, 2, "step 1")
        await eventually(lambda: truthy(len(sent) == 3), 10, "the first step relayed")
        return "answer"

    await tracker.start("started")
    assert await tracker.around(work()) == "answer"
    await tracker.finish("finished")
    assert [(p["progress"], p["message"]) for p in sent] == [
        (0, "started"),
        (0.5, "waiting"),
        (1, "step 1"),
        (2, "finished"),
    ]


async def test_no_token_no_channel_and_the_call_runs_as_before(redis_client):
    sent: list[dict] = []
    tracker = relay.ToolProgress(call_with(sent), {}, redis_client, reports_steps=True)
    assert tracker.id is None
    await tracker.start("started")
    assert await tracker.around(slow_work(redis_client, tracker.id, 1)) == "answer"
    await tracker.finish("finished")
    assert sent == []


async def test_a_tool_that_reports_no_steps_gets_its_start_and_end_and_no_channel(redis_client):
    """Only memory_consolidate's work reports steps: other tools asked for progress are not polled for any."""
    from memento_shared.tools.registry import TOOLS

    assert [name for name, spec in TOOLS.items() if spec.reports_progress] == ["memory_consolidate"]
    sent: list[dict] = []
    tracker = relay.ToolProgress(call_with(sent), {"_meta": {"progressToken": "t"}}, redis_client, reports_steps=False)
    assert tracker.id is None
    await tracker.start("started")
    assert await tracker.around(slow_work(redis_client, tracker.id, 1)) == "answer"
    await tracker.finish("finished")
    assert [(p["progress"], p["total"]) for p in sent] == [(0, 1), (1, 1)]


async def test_messages_only_for_versions_that_have_them(redis_client):
    sent: list[dict] = []
    tracker = relay.ToolProgress(
        call_with(sent, "2024-11-05"), {"_meta": {"progressToken": 7}}, redis_client, reports_steps=True
    )
    await tracker.start("started")
    await tracker.finish("finished")
    assert sent == [{"progressToken": 7, "progress": 0, "total": 1}, {"progressToken": 7, "progress": 1, "total": 1}]


async def test_a_cancelled_call_stops_its_work(redis_client):
    tracker = relay.ToolProgress(call_with([]), {"_meta": {"progressToken": "tok"}}, redis_client, reports_steps=True)
    work = asyncio.ensure_future(asyncio.sleep(30))
    waiting = asyncio.create_task(tracker.around(work))
    await asyncio.sleep(relay.POLL_S * 2)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert work.cancelled()


async def test_notifications_that_cannot_go_out_do_not_fail_the_call(redis_client):
    """On legacy SSE a notification is a Redis PUBLISH: when it fails, the call still answers (its work already ran)."""

    tried: list[dict] = []

    async def failing(message: dict) -> None:
        tried.append(message)
        raise ConnectionError("the stream's channel is gone")

    session = Session("sid", PRINCIPAL, "2025-06-18", ("full",), time.time())
    tracker = relay.ToolProgress(
        Call(session, PRINCIPAL, failing), {"_meta": {"progressToken": "t"}}, redis_client, reports_steps=True
    )
    await tracker.start("started")
    assert await tracker.around(slow_work(redis_client, tracker.id, 2)) == "answer"
    await tracker.finish("finished")
    assert len(tried) >= 3, "the start, a step and the finish were each tried, and each failure was absorbed"


@pytest.mark.parametrize("value", [None, "", "../x", "A" * 32, "0" * 31, "0" * 33, "memento:l1:ready:2"])
def test_only_minted_ids_become_keys(value):
    assert progress.valid_id(value) is None

"""The `lifecycle` dialect (seed 004) as its clients use it: the official MCP client with `?profile=lifecycle`, two
calls a turn through the gateway, against the whole system."""

from __future__ import annotations

import re
import time
from datetime import datetime

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.test_protocol_dialect import call, client_for

pytestmark = pytest.mark.e2e


def user(text: str) -> dict:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def assistant(text: str) -> dict:
    return {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}


def text_of(item: dict) -> str:
    return "\n".join(part["text"] for part in item["content"])


async def run_turn(client, session: str, said: str, reply: str, **extra) -> dict:
    before, _ = await call(
        client, "memory_before_turn", {"session_id": session, "current_input": [user(said)], **extra}
    )
    assert before["input_items"][-1] == user(said)  # the current input is last and unchanged
    after, _ = await call(
        client,
        "memory_after_turn",
        {
            "session_id": session,
            "turn_id": before["turn_id"],
            "input_items": before["input_items"],
            "output_items": [assistant(reply)],
        },
    )
    assert after["ok"] is True and isinstance(after["indexed"], bool)
    return before


def after_turn_calls(system) -> float:
    text = httpx.get(system.service_url("memory-api") + "/metrics").text
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "mcp_memory_after_turn_total" and s.labels.get("status") == "ok"
    )


async def test_a_fact_from_turn_one_is_recalled_in_turn_three_within_the_window(system):
    workspace = f"life-{time.time_ns()}"
    calls_before = after_turn_calls(system)
    async with client_for(system, workspace, "lifecycle") as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert tools == {
            "memory_before_turn", "memory_after_turn", "memory_run_maintenance", "memory_list_dir_with_abstract"
        }  # fmt: skip
        await run_turn(client, "s", "The payments API rate limit is 300 requests per minute.", "Good to know.")
        second = await run_turn(client, "s", "Please write the changelog for 2.4.", "Done: 2.4 adds exports.")
        third, _ = await call(
            client, "memory_before_turn", {"session_id": "s", "current_input_text": "What is the payments rate limit?"}
        )
        recall = text_of(third["input_items"][0])
        assert recall.startswith("Memory recall:") and "300 requests per minute" in recall
        assert third["input_items"][-1] == user("What is the payments rate limit?")
        # a client replaying the last input, recall block included: still one block
        replay, _ = await call(
            client, "memory_before_turn", {"session_id": "s", "current_input": second["input_items"]}
        )
        assert sum(text_of(i).startswith("Memory recall:") for i in replay["input_items"]) == 1
        small, _ = await call(
            client,
            "memory_before_turn",
            {"session_id": "s", "current_input_text": "and the changelog?", "max_input_tok": 300},
        )
        assert small["context_token_count"] <= 240
        maintenance, _ = await call(client, "memory_run_maintenance", {"session_id": "s"})
        assert maintenance["ok"] is True
        listed, _ = await call(client, "memory_list_dir_with_abstract", {"session_id": "s"})
        assert listed["summaries"][0]["path"] == "/memory/s"
        bad = await client.call_tool("memory_after_turn", {"session_id": "s", "output_items": []})
        assert bad.is_error and '"code":"INVALID_ARGUMENT"' in bad.content[0].text.replace(" ", "")
    async with client_for(system, workspace, "simple") as simple:
        found, _ = await call(simple, "search_memories", {"query": "payments API rate limit"})
        assert "300 requests per minute" in found["memories"][0]["content"]
    assert after_turn_calls(system) >= calls_before + 2


async def test_a_client_leaning_on_every_default_keeps_memory_in_the_default_session(system):
    """No project, no session_id, no turn_id (seed 004's reference client guide: each has a default): the turn is
    committed under turn-<unix ms>-<6 hex>, in the connection's workspace's `default` session, and recalled there."""
    async with client_for(system, f"life-defaults-{time.time_ns()}", "lifecycle") as client:
        before, _ = await call(client, "memory_before_turn", {"current_input_text": "Hello"})
        assert re.fullmatch(r"turn-\d{13}-[0-9a-f]{6}", before["turn_id"]) and before["recall_insight_ids"] == []
        said = user("Our staging database is called heron-db.")
        after, _ = await call(client, "memory_after_turn", {"input_items": [said], "output_items": [assistant("Ok.")]})
        assert after["ok"] is True and isinstance(after["indexed"], bool)
        # the reference guide's other form: the turn's input as a window of the conversation, no input_items
        window = {"conversation_items": [said, user("It runs Postgres 16.")], "current_input_start": 1}
        after, _ = await call(client, "memory_after_turn", {**window, "current_input_count": 1})
        assert after["ok"] is True
        recalled, _ = await call(client, "memory_before_turn", {"current_input": "Which database is staging on?"})
        recall = text_of(recalled["input_items"][0])
        assert recalled["recall_fact_ids"] and "heron-db" in recall and "It runs Postgres 16." in recall
        listed, _ = await call(client, "memory_list_dir_with_abstract", {})
        assert listed["summaries"][0]["path"] == "/memory/default"
        assert "2 turns" in next(s["abstract"] for s in listed["summaries"] if s["path"] == "/memory/default/meta")


async def test_every_directory_listed_has_an_iso_updated_at(system):
    """Seed 004 §4.4: `updated_at` is an ISO time on every entry, the empty weekly tier and a session's events
    directory included; a session no turn was committed to has no directories yet."""
    async with client_for(system, f"life-dirs-{time.time_ns()}", "lifecycle") as client:
        await run_turn(client, "s", "The release train leaves every Thursday.", "Noted.")
        listed, _ = await call(client, "memory_list_dir_with_abstract", {"session_id": "s"})
        summaries = {s["path"]: s for s in listed["summaries"]}
        assert summaries["/memory/s/memory_tiers/l2"]["abstract"] == "0 weekly facts"
        assert set(summaries) >= {"/memory/s", "/memory/s/events", "/memory/s/context", "/memory/s/meta"}
        for entry in summaries.values():
            when = datetime.fromisoformat(entry["updated_at"])
            assert entry["updated_at"].endswith("Z") and when.utcoffset().total_seconds() == 0, entry
        root = datetime.fromisoformat(summaries["/memory/s"]["updated_at"])
        assert datetime.fromisoformat(summaries["/memory/s/memory_tiers/l2"]["updated_at"]) == root
        # the reference's paths are relative to the session's root; the absolute form the listing answers works too
        for path in ("memory_tiers", "/memory/s/memory_tiers/"):
            tiers, _ = await call(client, "memory_list_dir_with_abstract", {"session_id": "s", "path": path})
            assert [t["path"] for t in tiers["summaries"]] == [f"/memory/s/memory_tiers{t}" for t in ("", "/l1", "/l2")]
        unused, _ = await call(client, "memory_list_dir_with_abstract", {"session_id": "never-used"})
        assert unused == {"summaries": []}

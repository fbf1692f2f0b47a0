"""Runs last in the e2e suite: every log line every service wrote during the suite is searched for the access key,
the generated secrets, a planted password and planted memory content (seed 004 §8: none may appear)."""

from __future__ import annotations

import asyncio
import json
import secrets
import time

import pytest

from tests.e2e.conftest import ACCESS_KEY
from tests.e2e.test_simple_dialect import client_for
from tests.e2e.test_walking_skeleton import mcp_client, payload


def every_dialect(system):
    return client_for(system, "all", "default")


pytestmark = pytest.mark.e2e


async def test_no_log_line_carries_secrets_or_content(system):
    marker = "zebra-" + secrets.token_hex(6)
    password = "Pw-" + secrets.token_hex(8)
    async with mcp_client(system) as client:
        stored = payload(
            await client.call_tool(
                "remember",
                {
                    "content": f"the {marker} vault password: {password} lives in ops",
                    "topic": "e2e-logs",
                    "type": "fact",
                },
            )
        )
        await client.call_tool(
            "amend", {"id": stored["id"], "content": f"the {marker} vault moved; password={password}"}
        )
        await client.call_tool("recall", {"text": f"{marker} vault", "keywords": [marker]})
        await client.call_tool(
            "reflect", {"summary": f"rotated the {marker} vault secret {password}", "sessionId": "s"}
        )
        bad = await client.call_tool(
            "remember", {"content": f"{marker} {password}", "topic": "t", "type": "fact", "importance": 2}
        )
        assert bad.is_error
    async with every_dialect(system) as client:  # the other dialects' payloads (seed 004 §8 names its turn items)
        await client.call_tool("store_memory", {"content": f"the {marker} vault password is {password}"})
        await client.call_tool("memento_store", {"content": f"{marker} vault note {password}", "tags": [marker]})
        said = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": f"{marker} {password}"}]}
        before = payload(await client.call_tool("memory_before_turn", {"session_id": "logs", "current_input": [said]}))
        await client.call_tool(
            "memory_after_turn",
            {
                "session_id": "logs",
                "turn_id": before["turn_id"],
                "input_items": before["input_items"],
                "output_items": [],
            },
        )
    async with mcp_client(system) as client:
        # let the workers do their part (embedding the amended text) so their log lines are in too
        deadline = time.monotonic() + 60
        while True:
            found = payload(await client.call_tool("recall", {"text": f"{marker} vault moved", "threshold": 0.5}))
            if any(f["id"] == stored["id"] and f["similarity"] for f in found["fragments"]):
                break
            assert time.monotonic() < deadline, "the amended fragment was never embedded"
            await asyncio.sleep(0.2)

    generated = json.loads((system.data_dir / "secrets.json").read_text())
    forbidden = {"access key": ACCESS_KEY, "planted password": password, "planted content": marker}
    forbidden |= {name: value for name, value in generated.items() if isinstance(value, str) and len(value) >= 12}
    logs = sorted((system.data_dir / "logs").glob("*.log"))
    assert {p.stem for p in logs} >= {"gateway", "memory-api", "embedder", "evaluator", "consolidator"}
    lines = 0
    for path in logs:
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            lines += 1
            for what, value in forbidden.items():
                assert value not in line, f"{what} in {path.name}:{number}"
    assert lines > 50  # the suite really wrote logs to search

"""Issue 30 through the gateway with the official MCP client: batch_remember, fragment_history and recall's pages,
asOf and filters, as an agent written for seed 000's current reference project calls them."""

from __future__ import annotations

import pytest

from tests.e2e.test_simple_dialect import call, client_for, fresh_workspace

pytestmark = pytest.mark.e2e


async def test_a_batch_of_200_with_three_bad_entries_then_history_and_pages(system):
    async with client_for(system, "fragments", fresh_workspace("batch")) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert {"batch_remember", "fragment_history"} <= set(tools)
        assert tools["batch_remember"].input_schema["properties"]["fragments"]["maxItems"] == 200
        assert tools["fragment_history"].output_schema["type"] == "object"

        entries = [
            {"content": f"release checklist step {i:03d}", "topic": "release", "type": "procedure",
             "keywords": ["checklist"]}
            for i in range(200)
        ]  # fmt: skip
        entries[10] = {"content": "no topic", "type": "fact"}
        entries[50] = {"content": "bad importance", "topic": "release", "type": "fact", "importance": 2}
        entries[150] = {"content": "unknown field", "topic": "release", "type": "fact", "colour": "red"}
        failed, batch = await call(client, "batch_remember", {"fragments": entries})
        assert not failed and (batch["created"], batch["failed"]) == (197, 3)
        fields = {r["index"]: r["error"]["field"] for r in batch["results"] if r.get("error")}
        assert fields == {10: "fragments.10.topic", 50: "fragments.50.importance", 150: "fragments.150.colour"}

        first_id = batch["results"][0]["id"]
        await call(client, "amend", {"id": first_id, "content": "release checklist step zero"})
        _, history = await call(client, "fragment_history", {"id": first_id})
        assert [(c["before"]["content"], c["after"]["content"]) for c in history["history"]] == [
            ("release checklist step 000", "release checklist step zero")
        ]

        seen, answer = [], None
        _, answer = await call(client, "recall", {"keywords": ["checklist"], "pageSize": 50, "includeLinks": False,
                                                  "fields": ["content"], "tokenBudget": 100000})  # fmt: skip
        while True:
            seen += [f["id"] for f in answer["fragments"]]
            assert all(set(f) == {"id", "content"} for f in answer["fragments"])
            if "nextCursor" not in answer:
                break
            _, answer = await call(client, "recall", {"cursor": answer["nextCursor"]})
        assert len(seen) == len(set(seen)) == 197

        failed, wrong = await call(client, "fragment_history", {"id": "frag-nope"})
        assert failed and wrong["error"]["code"] == "MEMORY_NOT_FOUND"

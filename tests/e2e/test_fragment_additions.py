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


def note(content: str) -> dict:
    return {"content": content, "topic": "pg", "type": "fact", "keywords": ["paging"]}


async def test_pages_of_50_through_120_matches_while_30_more_are_written(system):
    async with client_for(system, "fragments", fresh_workspace("pages")) as client:
        await call(client, "batch_remember", {"fragments": [note(f"paging note {i:03d}") for i in range(120)]})
        args = {"keywords": ["paging"], "pageSize": 50, "includeLinks": False, "tokenBudget": 100000}
        _, page = await call(client, "recall", args)
        seen, late, pages = [], set(), 0
        while True:
            pages += 1
            seen += [f["id"] for f in page["fragments"]]
            _, written = await call(
                client, "batch_remember", {"fragments": [note(f"late {pages}-{i}") for i in range(10)]}
            )
            late |= {r["id"] for r in written["results"]}
            if "nextCursor" not in page:
                break
            _, page = await call(client, "recall", {"cursor": page["nextCursor"]})
        assert pages == 3 and len(late) == 30
        assert len(seen) == len(set(seen)) == 120 and not late & set(seen)


async def test_as_of_and_time_ranges_on_crafted_timestamps(system):
    from datetime import UTC, datetime, timedelta

    import asyncpg

    from tests.e2e.test_fuzz_tools import owner_url

    async with client_for(system, "fragments", fresh_workspace("asof")) as client:
        _, old = await call(client, "remember", {"content": "the queue is rabbitmq", "topic": "q", "type": "fact",
                                                 "keywords": ["queue"]})  # fmt: skip
        _, newer = await call(client, "remember", {"content": "the queue has three partitions", "topic": "q",
                                                   "type": "fact", "keywords": ["queue"]})  # fmt: skip
        await call(client, "amend", {"id": old["id"], "content": "the queue is kafka"})
        owner = await asyncpg.connect(owner_url(system))
        # noon three days ago the first, amended at noon two days ago; noon yesterday the second (whole UTC days, so
        # the words' days do not depend on the hour the test runs)
        midnight = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        try:
            await owner.execute("UPDATE agent_memory.fragments SET created_at = $2 WHERE id = $1", old["id"],
                                midnight - timedelta(days=3) + timedelta(hours=12))  # fmt: skip
            await owner.execute("UPDATE agent_memory.fragment_versions SET amended_at = $2 WHERE fragment_id = $1",
                                old["id"], midnight - timedelta(days=2) + timedelta(hours=12))  # fmt: skip
            await owner.execute("UPDATE agent_memory.fragments SET created_at = $2 WHERE id = $1", newer["id"],
                                midnight - timedelta(days=1) + timedelta(hours=12))  # fmt: skip
        finally:
            await owner.close()
        base = {"keywords": ["queue"], "includeLinks": False}

        async def contents(**args) -> list[str]:
            failed, answer = await call(client, "recall", {**base, **args})
            assert not failed, answer
            return sorted(f["content"] for f in answer["fragments"])

        before_amend = (midnight - timedelta(days=2)).isoformat()
        assert await contents(asOf=before_amend) == ["the queue is rabbitmq"]  # the old text; the newer not yet
        assert await contents(asOf=(midnight - timedelta(hours=1)).isoformat()) == [
            "the queue has three partitions", "the queue is kafka"]  # fmt: skip
        assert await contents(timeRange={"from": "2 days ago"}) == ["the queue has three partitions"]
        assert await contents(timeRange={"to": "그저께"}) == ["the queue is kafka"]  # created three days ago
        assert await contents(timeRange={"from": "어제"}) == ["the queue has three partitions"]


async def test_exclude_seen_after_context_in_the_same_session(system):
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    from tests.e2e.conftest import ACCESS_KEY

    headers = {"Authorization": f"Bearer {ACCESS_KEY}", "X-Memento-Workspace": fresh_workspace("seen")}
    transport = streamable_http_client(f"{system.mcp_url}?profile=fragments",
                                       http_client=create_mcp_http_client(headers=headers))  # fmt: skip
    async with Client(transport, mode="legacy") as client:  # a 2025 session: context and recall share it
        _, pref = await call(client, "remember", {"content": "prefers short answers", "topic": "style",
                                                  "type": "preference", "keywords": ["style"]})  # fmt: skip
        _, fact = await call(client, "remember", {"content": "style guide is in the wiki", "topic": "style",
                                                  "type": "fact", "keywords": ["style"]})  # fmt: skip
        _, loaded = await call(client, "context", {})
        assert pref["id"] in [f["id"] for f in loaded["coreMemory"]]
        _, rest = await call(client, "recall", {"keywords": ["style"], "excludeSeen": True, "includeLinks": False})
        assert [f["id"] for f in rest["fragments"]] == [fact["id"]]


async def test_without_page_size_recall_answers_the_reference_default_page(system):
    """Seed 000's reference project pages every recall: without pageSize a page is its default 20
    (pagination.defaultPageSize), and its recall answer carries no cursor (its tool response has kept only fragments,
    count, totalTokens and searchPath since its 2026-07 refactor). A client written for it gets those 20, the best
    first; a client that wants the rest asks with pageSize (docs/dialects/fragments.md "Pages")."""
    async with client_for(system, "fragments", fresh_workspace("default-page")) as client:
        await call(client, "batch_remember", {"fragments": [note(f"default page note {i:03d}") for i in range(30)]})
        base = {"keywords": ["paging"], "includeLinks": False, "tokenBudget": 100000}
        _, first = await call(client, "recall", base)
        assert first["count"] == len(first["fragments"]) == 20 and "nextCursor" not in first
        _, paged = await call(client, "recall", {**base, "pageSize": 50})
        assert len(paged["fragments"]) == 30
        assert [f["id"] for f in first["fragments"]] == [f["id"] for f in paged["fragments"]][:20]


async def test_the_reference_workspace_argument_names_the_workspace_a_call_works_in(system):
    """Seed 000's reference project takes `workspace` on remember, batch_remember, recall and context (its agent guide
    uses it throughout); the call then works in that workspace of the credential's tenant."""
    home, other = fresh_workspace("ws-home"), fresh_workspace("ws-other")
    async with client_for(system, "fragments", home) as client:
        fact = {"content": "The billing cron runs at 02:00 UTC", "topic": "billing", "type": "procedure"}
        failed, stored = await call(client, "remember", {**fact, "keywords": ["cron"], "workspace": other})
        assert not failed and stored["created"]
        batch = [
            {"content": "Invoices retry three times", "topic": "billing", "type": "procedure", "keywords": ["cron"]}
        ]
        failed, _ = await call(client, "batch_remember", {"fragments": batch, "workspace": other})
        assert not failed
        _, here = await call(client, "recall", {"keywords": ["cron"]})
        assert here["fragments"] == []
        _, there = await call(client, "recall", {"keywords": ["cron"], "workspace": other})
        assert {f["content"] for f in there["fragments"]} == {fact["content"], batch[0]["content"]}
        _, context = await call(client, "context", {"types": ["procedure"], "workspace": other})
        assert stored["id"] in {f["id"] for f in context["coreMemory"]}
        failed, bad = await call(client, "recall", {"keywords": ["cron"], "workspace": "no spaces allowed"})
        assert failed and (bad["error"]["code"], bad["error"]["field"]) == ("INVALID_PARAMETER", "workspace")
    async with client_for(system, "fragments", other) as there_client:
        _, direct = await call(there_client, "recall", {"keywords": ["cron"]})
        assert stored["id"] in {f["id"] for f in direct["fragments"]}

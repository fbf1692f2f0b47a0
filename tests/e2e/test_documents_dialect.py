"""The `documents` dialect (seed 001) through the gateway with the official MCP client, against the whole system (the
embedder included, so search by meaning once a version's chunks are embedded)."""

from __future__ import annotations

import time
import uuid

import pytest

from tests.e2e.test_protocol_dialect import call, client_for
from tests.integration.test_documents_canonical import SPEC
from tests.integration.test_documents_canonical_preference import TOKENS, TOKENS_NOTE

pytestmark = pytest.mark.e2e


async def test_upsert_outline_section_and_get_through_the_gateway(system):
    async with client_for(system, f"docs-{time.time_ns()}", "documents") as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert names == {
            "memory.commit", "memory.search", "memory.restore", "canonical.upsert", "canonical.get",
            "canonical.outline", "canonical.get_section", "canonical.context_pack",
        }  # fmt: skip
        args = {"canonicalKey": "app", "docClass": "app_spec", "title": "App", "contentMarkdown": SPEC,
                "idempotencyKey": str(uuid.uuid4())}  # fmt: skip
        first, _ = await call(client, "canonical.upsert", args)
        again, _ = await call(client, "canonical.upsert", args)
        # a replay answers the first answer: its chunks were waiting for their vectors then
        assert first == again == {"itemId": first["itemId"], "versionNum": 1, "created": True, "indexed": False}
        outline, _ = await call(client, "canonical.outline", {"canonicalKey": "app"})
        assert [s["anchor"] for s in outline["sections"]][2] == "h3:app-spec.auth.token-refresh"
        section, _ = await call(
            client, "canonical.get_section", {"canonicalKey": "app", "sectionAnchor": "h3:app-spec.auth.token-refresh"}
        )
        assert section["contentMarkdown"].startswith("### Token Refresh") and "```python" in section["contentMarkdown"]
        document, _ = await call(client, "canonical.get", {"canonicalKey": "app"})
        assert document["contentMarkdown"] == SPEC


async def test_documents_are_mcp_resources_of_their_workspace(system):
    workspace = f"docs-res-{time.time_ns()}"
    async with client_for(system, workspace, "documents") as client:
        ids = []
        for n in range(3):
            args = {"canonicalKey": f"doc-{n}", "docClass": "feature_spec", "title": f"Feature {n}",
                    "contentMarkdown": f"# Feature {n}\n\nBody {n}.", "idempotencyKey": str(uuid.uuid4())}  # fmt: skip
            ids.append((await call(client, "canonical.upsert", args))[0]["itemId"])
        listed = await client.list_resources()
        assert [str(r.uri) for r in listed.resources] == [f"memento://items/{i}" for i in reversed(ids)]
        assert listed.resources[0].mime_type == "text/markdown"
        templates = await client.list_resource_templates()
        assert templates.resource_templates[0].uri_template == "memento://items/{id}"
        read = await client.read_resource(f"memento://items/{ids[1]}")
        assert read.contents[0].text == "# Feature 1\n\nBody 1."
    async with client_for(system, workspace + "-other", "documents") as other:
        assert (await other.list_resources()).resources == []
        with pytest.raises(Exception, match="not found"):
            await other.read_resource(f"memento://items/{ids[1]}")


async def test_a_paraphrase_finds_the_section_once_the_chunks_are_embedded(system):
    import asyncio

    content = (
        "# Runbook\n\n## Database failover\n\nPromote the standby with pg_ctl promote, then repoint the pooler.\n\n"
        "## Cache warmup\n\nPreload the top thousand keys after a deploy.\n"
    )
    async with client_for(system, f"docs-meaning-{time.time_ns()}", "documents") as client:
        args = {"canonicalKey": "runbook", "docClass": "implementation_plan", "title": "Runbook",
                "contentMarkdown": content, "idempotencyKey": str(uuid.uuid4())}  # fmt: skip
        await call(client, "canonical.upsert", args)
        # at once: by its words
        found, _ = await call(client, "memory.search", {"query": "promote the standby"})
        assert found["results"][0]["sectionAnchor"] == "h2:runbook.database-failover"
        # no word in common: only the chunk vectors can answer, once the embedder wrote them
        deadline = time.monotonic() + 120
        while True:
            found, _ = await call(client, "memory.search", {"query": "what to do when the primary DB dies"})
            if found["results"] and found["results"][0]["sectionAnchor"] == "h2:runbook.database-failover":
                break
            assert time.monotonic() < deadline, f"never found by meaning: {found}"
            await asyncio.sleep(0.3)
        pack, _ = await call(
            client, "canonical.context_pack", {"canonicalKey": "runbook", "goal": "cache warmup", "maxChars": 200}
        )
        assert [s["anchor"] for s in pack["sections"]] == ["h2:runbook.cache-warmup"]
        bundle, _ = await call(client, "memory.restore", {"goal": "failover"})
        again, _ = await call(client, "memory.restore", {"goal": "failover"})
        assert bundle["bundle"] == again["bundle"] and "pg_ctl promote" in bundle["bundle"]


def long_spec() -> str:
    """A 6 KB specification whose one section on data retention comes near its end: the whole of it cut to a 3,000
    character bundle's room would lose that section."""
    filler = "The courier app shows each parcel on a map and sorts stops by the planned route. " * 5
    sections = [f"## Area {n}\n\n{filler}\n" for n in range(13)]
    sections.insert(
        12, "## Data retention\n\nCustomer exports are deleted after 90 days; audit logs are kept a year.\n"
    )
    return "# Platform spec\n\n" + "\n".join(sections)


async def test_restore_with_a_goal_brings_the_canonical_sections_that_answer_it(system):
    """Seed 001's bundle: pinned canonical documents, the latest snapshot, recent troubleshooting, then what the goal
    asks for; a canonical document the goal is about comes with the sections that answer it, however long it is."""
    async with client_for(system, f"docs-restore-{time.time_ns()}", "documents") as client:
        spec = {"canonicalKey": "platform", "docClass": "app_spec", "title": "Platform spec",
                "contentMarkdown": long_spec(), "idempotencyKey": str(uuid.uuid4())}  # fmt: skip
        assert len(spec["contentMarkdown"]) > 5_000
        await call(client, "canonical.upsert", spec)
        entries = [
            {"kind": "decision", "title": "Exports", "content": "Customer exports are CSV files, one per month."},
            {"kind": "troubleshooting", "title": "Stuck export", "content": "A stuck export job needed a restart."},
            {"kind": "note", "title": "Session notes", "content": "Reviewing what we keep and for how long."},
        ]
        await call(client, "memory.commit", {"idempotencyKey": str(uuid.uuid4()), "entries": entries})
        restore = {"goal": "how long are customer exports kept before deletion", "maxChars": 3000}
        bundle, _ = await call(client, "memory.restore", restore)
        reasons = [(i["title"], i["reason"]) for i in bundle["items"]]
        assert reasons == [
            ("Session notes", "latest_snapshot"), ("Stuck export", "recent_troubleshooting"),
            ("Platform spec", "canonical"), ("Exports", "goal"),
        ]  # fmt: skip
        assert bundle["items"][2]["sectionAnchors"] == ["h2:platform-spec.data-retention"]
        assert "Customer exports are deleted after 90 days" in bundle["bundle"] and bundle["totalChars"] <= 3000
        again, _ = await call(client, "memory.restore", restore)
        assert again["bundle"] == bundle["bundle"]


async def test_a_canonical_document_ranks_above_a_note_saying_the_same_thing(system):
    """Seed 001 "Boosting Canonical Documents": the spec first, though the note says it more often (its BM25 is
    higher, and with the tuned weights the seed's boost alone leaves it first: test_documents_canonical_preference)."""
    async with client_for(system, f"docs-canonical-{time.time_ns()}", "documents") as client:
        spec = {"canonicalKey": "app", "docClass": "app_spec", "title": "App", "contentMarkdown": TOKENS,
                "idempotencyKey": str(uuid.uuid4())}  # fmt: skip
        await call(client, "canonical.upsert", spec)
        note = {"kind": "note", "title": "Tokens", "content": TOKENS_NOTE}
        await call(client, "memory.commit", {"idempotencyKey": str(uuid.uuid4()), "entries": [note]})
        found, _ = await call(client, "memory.search", {"query": "how often are access tokens refreshed"})
        top = [(r["title"], r["isCanonical"]) for r in found["results"][:2]]
        assert top == [("App", True), ("Tokens", False)]
        assert found["results"][0]["score"] >= found["results"][1]["score"]

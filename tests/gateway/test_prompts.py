"""Prompts and completions through the gateway with the official SDK: the prompts are listed with their arguments
and rendered from the dialects' own tools' answers (recall, canonical.get) on the caller's rows; completion/complete
suggests topics, dates, canonical keys and item ids from the caller's own rows only (RLS), for prompt arguments and
for the resource template's variable. Each test works in a workspace of its own."""

from __future__ import annotations

import secrets
import uuid
from datetime import UTC, datetime

import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from tests.gateway.conftest import ACCESS_KEY
from tests.gateway.sdk import streamable_session
from tests.gateway.test_api_keys import new_key

PROMPT = types.PromptReference(type="ref/prompt", name="catch_up")


def client(gateway, workspace: str, key: str = ACCESS_KEY, url: str | None = None, **kwargs) -> Client:
    headers = {"Authorization": f"Bearer {key}", "X-Memento-Workspace": workspace}
    http = create_mcp_http_client(headers=headers)
    return Client(streamable_http_client(url or gateway.mcp_url, http_client=http), **kwargs)


async def remember(session, content: str, topic: str, kind: str = "fact") -> str:
    result = await session.call_tool("remember", {"content": content, "topic": topic, "type": kind})
    assert not result.is_error, result.content
    return result.structured_content["id"]


async def completed(session, ref, name: str, value: str, **kwargs) -> types.Completion:
    return (await session.complete(ref, {"name": name, "value": value}, **kwargs)).completion


def text_of(result: types.GetPromptResult) -> str:
    return result.messages[0].content.text


@pytest.fixture
def workspace() -> str:
    return "w-" + secrets.token_hex(5)


async def test_prompts_are_listed_with_their_arguments(gateway, workspace):
    async with client(gateway, workspace) as session:
        assert session.server_capabilities.completions is not None
        prompts = {p.name: p for p in (await session.list_prompts()).prompts}
        assert list(prompts) == ["catch_up", "decisions", "changes_since", "document"]
        since = {a.name: a.required for a in prompts["changes_since"].arguments}
        assert since == {"since": True, "topic": False} and prompts["catch_up"].title == "Catch me up"


async def test_catch_up_carries_recalls_answer_for_the_topic(gateway, workspace):
    async with client(gateway, workspace) as session:
        topic = "billing-" + secrets.token_hex(3)
        first = await remember(session, "Invoices are generated nightly by the cron job", topic)
        second = await remember(session, "We chose Stripe over Adyen for card payments", topic, "decision")
        await remember(session, "The office plant needs water on Fridays", "plants")
        text = text_of(await session.get_prompt("catch_up", {"topic": topic}))
        assert "Invoices are generated nightly" in text and "Stripe over Adyen" in text and "office plant" not in text
        assert first in text and second in text and f"filed under the topic {topic!r}" in text
        # no topic of that name: recall by text finds it instead
        by_text = text_of(await session.get_prompt("catch_up", {"topic": "Stripe Adyen card payments"}))
        assert "Stripe over Adyen" in by_text and "found for" in by_text
        nothing = text_of(await session.get_prompt("catch_up", {"topic": "zz-" + secrets.token_hex(4)}))
        assert "remembers nothing" in nothing


async def test_decisions_and_changes_since(gateway, workspace):
    async with client(gateway, workspace) as session:
        topic = "deploy-" + secrets.token_hex(3)
        await remember(session, "Deploys go out on Tuesdays after the freeze", topic, "decision")
        await remember(session, "Deploys take eleven minutes on average", topic, "fact")
        decided = await session.get_prompt("decisions", {"subject": "deploys Tuesdays freeze"})
        assert "Tuesdays after the freeze" in text_of(decided) and "eleven minutes" not in text_of(decided)
        assert decided.description.startswith("Decisions about")
        today = datetime.now(UTC).date().isoformat()
        recent = text_of(await session.get_prompt("changes_since", {"since": today, "topic": topic}))
        assert "Tuesdays after the freeze" in recent and "eleven minutes" in recent
        future = text_of(await session.get_prompt("changes_since", {"since": "2099-01-01", "topic": topic}))
        assert "learned nothing new" in future


async def test_the_document_prompt_embeds_the_document_as_its_resource(gateway, workspace):
    async with client(gateway, workspace, read_timeout_seconds=30) as session:
        key = "feature/" + secrets.token_hex(3)
        content = "# Auth flow\n\nTokens refresh every 15 minutes."
        upsert = {"canonicalKey": key, "docClass": "feature_spec", "title": "Auth flow", "contentMarkdown": content,
                  "idempotencyKey": str(uuid.uuid4())}  # fmt: skip
        # the documents tools are outside the default profile; the prompt is not
        async with client(gateway, workspace, url=gateway.mcp_url + "?profile=documents") as documents:
            item_id = (await documents.call_tool("canonical.upsert", upsert)).structured_content["itemId"]
        briefing = await session.get_prompt("document", {"key": key})
        assert "Auth flow" in text_of(briefing) and "version 1" in text_of(briefing)
        resource = briefing.messages[1].content.resource
        assert str(resource.uri) == f"memento://items/{item_id}" and "refresh every 15 minutes" in resource.text
        with pytest.raises(MCPError) as missing:
            await session.get_prompt("document", {"key": "no-such-doc"})
        assert missing.value.error.code == -32602 and "no-such-doc" in missing.value.error.message
        # completion of the key and of the resource template's id, from this workspace's documents
        keys = await completed(session, types.PromptReference(type="ref/prompt", name="document"), "key", "feature/")
        assert keys.values == [key] and keys.total == 1 and not keys.has_more
        template = types.ResourceTemplateReference(type="ref/resource", uri="memento://items/{id}")
        ids = await completed(session, template, "id", item_id[:6])
        assert ids.values == [item_id]


async def test_bad_prompt_requests_are_invalid_params_naming_what_is_wrong(gateway, workspace):
    async with client(gateway, workspace) as session:
        for name, arguments, named in [
            ("no_such_prompt", {}, "unknown prompt"),
            ("catch_up", {}, "arguments.topic: is required"),
            ("catch_up", {"topic": "x", "colour": "red"}, "arguments.colour"),
            ("changes_since", {"since": "not a date at all"}, "timeRange"),
        ]:
            with pytest.raises(MCPError) as refused:
                await session.get_prompt(name, arguments)
            assert refused.value.error.code == -32602 and named in refused.value.error.message, (name, refused.value)
        for ref, argument in [
            (types.PromptReference(type="ref/prompt", name="catch_up"), "colour"),
            (types.ResourceTemplateReference(type="ref/resource", uri="memento://other/{id}"), "id"),
        ]:
            with pytest.raises(MCPError) as refused:
                await session.complete(ref, {"name": argument, "value": ""})
            assert refused.value.error.code == -32602


async def test_completions_come_from_the_callers_own_rows(gateway, workspace, app_pool, tenant):
    prefix = "cmp" + secrets.token_hex(3)
    async with client(gateway, workspace) as session:
        for n in range(3):
            await remember(session, f"note {n} on the {prefix} service", f"{prefix}-api")
        await remember(session, "one note on the worker", f"{prefix}-worker")
        await remember(session, f"we keep {prefix} on Postgres", f"{prefix}-db", "decision")
        topics = await completed(session, PROMPT, "topic", prefix.upper())  # case-insensitive, most used first
        assert topics.values == [f"{prefix}-api", f"{prefix}-db", f"{prefix}-worker"] and topics.total == 3
        subjects = await completed(
            session, types.PromptReference(type="ref/prompt", name="decisions"), "subject", prefix
        )
        assert subjects.values == [f"{prefix}-db"]
        since = types.PromptReference(type="ref/prompt", name="changes_since")
        today = datetime.now(UTC).date().isoformat()
        assert today in (await completed(session, since, "since", today[:4])).values
        assert (await completed(session, since, "since", "yes")).values == ["yesterday"]
    # another tenant, same workspace name: none of it
    other = await new_key(app_pool, tenant)
    async with client(gateway, workspace, key=other) as stranger:
        assert (await completed(stranger, PROMPT, "topic", prefix)).values == []
        await remember(stranger, "the stranger's own note", f"{prefix}-theirs")
        assert (await completed(stranger, PROMPT, "topic", prefix)).values == [f"{prefix}-theirs"]


async def test_a_2025_session_gets_prompts_and_completions_too(gateway, workspace):
    headers = {"Authorization": f"Bearer {ACCESS_KEY}", "X-Memento-Workspace": workspace}
    async with streamable_session(gateway.mcp_url, "2025-11-25", headers) as (session, init):
        assert init.capabilities.completions is not None and init.capabilities.prompts is not None
        topic = "legacy-" + secrets.token_hex(3)
        await remember(session, "sessions still get prompts", topic)
        result = await session.get_prompt("catch_up", {"topic": topic})
        assert "sessions still get prompts" in result.messages[0].content.text
        done = await session.complete(PROMPT, {"name": "topic", "value": topic[:9]})
        assert done.completion.values == [topic]

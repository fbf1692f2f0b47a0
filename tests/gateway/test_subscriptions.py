"""Subscriptions fed by the outbox: a document changed through one gateway replica reaches a listener on another,
by `subscriptions/listen` (2026-07-28, the official SDK's Client.listen) and by `resources/subscribe` in a 2025
session (notifications/resources/updated on the session's stream). The change goes memory-api → outbox → relay →
Redis → every replica, so nothing here is delivered by the replica that made it. Also: the acknowledgment and its
honored filter, subscription ids on every message, the graceful close, tenants and workspaces kept apart."""

from __future__ import annotations

import asyncio
import json
import secrets
import uuid

import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.subscriptions import ResourcesListChanged, ResourceUpdated

from tests.gateway.conftest import ACCESS_KEY
from tests.gateway.oauth_client import Browser, MemoryStorage, oauth
from tests.gateway.sdk import streamable_session
from tests.gateway.test_api_keys import new_key

WAIT_S = 15  # the relay wakes on NOTIFY; this only bounds a failure
SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"


def client(gateway, workspace: str, key: str = ACCESS_KEY, profile: str = "documents") -> Client:
    headers = {"Authorization": f"Bearer {key}", "X-Memento-Workspace": workspace}
    http = create_mcp_http_client(headers=headers)
    return Client(streamable_http_client(f"{gateway.mcp_url}?profile={profile}", http_client=http))


async def upsert(session, key: str, text: str) -> str:
    arguments = {"canonicalKey": key, "docClass": "feature_spec", "title": key, "contentMarkdown": f"# {key}\n\n{text}",
                 "idempotencyKey": str(uuid.uuid4())}  # fmt: skip
    result = await session.call_tool("canonical.upsert", arguments)
    assert not result.is_error, result.content
    return "memento://items/" + result.structured_content["itemId"]


async def next_event(subscription):
    async with asyncio.timeout(WAIT_S):
        return await anext(subscription)


@pytest.fixture
def workspace() -> str:
    return "sub-" + secrets.token_hex(5)


async def test_a_change_through_one_replica_reaches_a_listener_on_another(gateways, workspace):
    writer, reader = await gateways(), await gateways()
    async with client(writer, workspace) as write, client(reader, workspace) as listen:
        uri = await upsert(write, "spec", "first version")
        async with listen.listen(
            resources_list_changed=True, tools_list_changed=True, resource_subscriptions=[uri]
        ) as sub:
            assert sub.honored.resources_list_changed and sub.honored.resource_subscriptions == [uri]
            assert not sub.honored.tools_list_changed  # our tool lists never change: not honored
            await upsert(write, "spec", "second version")
            assert await next_event(sub) == ResourceUpdated(uri)
            async with client(writer, "elsewhere-" + workspace) as other:  # another workspace: not heard
                await upsert(other, "spec", "not this workspace's")
            await upsert(write, "plan", "a new document")
            assert await next_event(sub) == ResourcesListChanged()
            await upsert(write, "spec", "third version")
            assert await next_event(sub) == ResourceUpdated(uri)
            read = await listen.read_resource(uri)
            assert "third version" in read.contents[0].text


@pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed")  # removed in 2026-07-28, not in 2025
async def relayed(owner_pool) -> None:
    """Every outbox event relayed, and a moment for the change notices the relay publishes after its commit."""
    async with asyncio.timeout(WAIT_S):
        while await owner_pool.fetchval("SELECT count(*) FROM agent_memory.outbox WHERE published_at IS NULL"):
            await asyncio.sleep(0.05)
    await asyncio.sleep(0.2)


async def test_a_2025_session_subscribed_on_one_replica_hears_a_change_made_through_another(
    gateways, workspace, owner_pool
):
    writer, reader = await gateways(), await gateways()
    heard: asyncio.Queue = asyncio.Queue()

    async def handler(message) -> None:
        if isinstance(message, types.ServerNotification):
            await heard.put(message)

    headers = {"Authorization": f"Bearer {ACCESS_KEY}", "X-Memento-Workspace": workspace}
    async with client(writer, workspace) as write:
        uri, other = await upsert(write, "spec", "v1"), await upsert(write, "notes", "v1")
        # the first versions' notices out before the session subscribes: a late one for "notes" (relayed while the
        # machine is loaded) would otherwise reach it between its subscribe and unsubscribe
        await relayed(owner_pool)
        url = reader.mcp_url + "?profile=documents"
        async with streamable_session(url, "2025-11-25", headers, message_handler=handler) as (session, init):
            assert init.capabilities.resources.subscribe is True
            await session.subscribe_resource(uri)
            await session.subscribe_resource(other)
            await session.unsubscribe_resource(other)
            await upsert(write, "notes", "v2")  # unsubscribed: not heard
            await upsert(write, "spec", "v2")
            async with asyncio.timeout(WAIT_S):
                note = await heard.get()
            assert note.method == "notifications/resources/updated" and str(note.params.uri) == uri
            assert heard.empty()


async def test_other_tenants_hear_nothing_of_it(gateways, workspace, app_pool, tenant):
    gateway = await gateways()
    stranger_key = await new_key(app_pool, tenant)
    async with client(gateway, workspace) as owner, client(gateway, workspace, key=stranger_key) as stranger:
        uri = await upsert(owner, "spec", "v1")
        their = await upsert(stranger, "spec", "the stranger's own")
        async with stranger.listen(resources_list_changed=True, resource_subscriptions=[uri, their]) as sub:
            await upsert(owner, "spec", "v2")  # same workspace name and URI subscribed, another tenant
            await upsert(owner, "other", "a new document of the owner's")
            await upsert(stranger, "spec", "v2 of their own")
            assert await next_event(sub) == ResourceUpdated(their)


def listen_request(msg_id, notifications) -> dict:
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    params = {"_meta": meta, "notifications": notifications}
    return {"jsonrpc": "2.0", "id": msg_id, "method": "subscriptions/listen", "params": params}


def stateless_headers(accept: str = "application/json, text/event-stream") -> dict[str, str]:
    return {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "subscriptions/listen", "Accept": accept}


async def messages(stream):
    async for line in stream.aiter_lines():
        if line.startswith("data:"):
            yield json.loads(line[5:])


async def test_the_stream_is_acknowledged_first_and_closed_gracefully_at_shutdown(gateways):
    gateway = await gateways()
    async with gateway.http() as http:
        body = listen_request("L-7", {"resourceSubscriptions": ["memento://items/x"], "promptsListChanged": True})
        async with http.stream("POST", "/mcp", json=body, headers=stateless_headers()) as stream:
            assert stream.status_code == 200 and stream.headers["content-type"].startswith("text/event-stream")
            received = messages(stream)
            ack = await anext(received)
            assert ack["method"] == "notifications/subscriptions/acknowledged"
            assert ack["params"] == {"_meta": {SUBSCRIPTION_ID: "L-7"}, "notifications": {
                "resourceSubscriptions": ["memento://items/x"]}}  # fmt: skip
            await gateway.state.subscriptions.stop()
            closing = await anext(received)
            assert closing["id"] == "L-7" and closing["result"]["resultType"] == "complete"
            assert closing["result"]["_meta"][SUBSCRIPTION_ID] == "L-7"


@pytest.mark.parametrize(
    ("notifications", "named"),
    [
        (None, "notifications: must be an object"),
        ({"resourcesListChanged": "yes"}, "resourcesListChanged"),
        ({"resourceSubscriptions": "memento://items/x"}, "resourceSubscriptions"),
        ({"resourceSubscriptions": [f"memento://items/{n}" for n in range(101)]}, "at most 100"),
    ],
)
async def test_a_bad_filter_is_invalid_params(gateway, notifications, named):
    async with gateway.http() as http:
        answer = await http.post("/mcp", json=listen_request(3, notifications), headers=stateless_headers())
    error = answer.json()["error"]
    assert error["code"] == -32602 and named in error["message"]


async def test_listen_needs_an_event_stream_and_sessions_keep_resources_subscribe(gateway):
    async with gateway.http() as http:
        json_only = stateless_headers("application/json")
        refused = await http.post("/mcp", json=listen_request(4, {}), headers=json_only)
        assert refused.status_code == 406
        # 2026-07-28 has no resources/subscribe: the listen stream replaced it
        meta = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        subscribe = {"jsonrpc": "2.0", "id": 5, "method": "resources/subscribe", "params": {"_meta": meta, "uri": "x"}}
        headers = {**stateless_headers(), "Mcp-Method": "resources/subscribe"}
        removed = await http.post("/mcp", json=subscribe, headers=headers)
        assert removed.status_code == 404 and removed.json()["error"]["code"] == -32601


async def test_the_stream_closes_gracefully_when_its_token_expires(gateways):
    gateway = await gateways(MEMENTO_OAUTH_ACCESS_TOKEN_SECONDS="2", MEMENTO_SSE_KEEPALIVE_SECONDS="0.3")
    browser, storage = Browser(ACCESS_KEY), MemoryStorage()
    http = create_mcp_http_client(auth=oauth(gateway.mcp_url, browser, storage))
    async with Client(streamable_http_client(gateway.mcp_url, http_client=http)) as signed_in:
        await signed_in.list_tools()
    token = storage.tokens.access_token
    async with gateway.http(Authorization=f"Bearer {token}") as raw:
        body = listen_request("exp", {"resourcesListChanged": True})
        async with raw.stream("POST", "/mcp", json=body, headers=stateless_headers()) as stream:
            received = messages(stream)
            assert (await anext(received))["method"] == "notifications/subscriptions/acknowledged"
            async with asyncio.timeout(WAIT_S):
                closing = await anext(received)
    assert closing["id"] == "exp" and closing["result"]["_meta"][SUBSCRIPTION_ID] == "exp"


async def test_a_credential_listens_and_subscribes_only_in_the_workspaces_it_allows(gateway, app_pool, tenant):
    """Neither request reaches memory-api (where a tool call's workspace is checked): the gateway checks it itself, so
    a key bound to one workspace cannot learn another's documents and when they change."""
    key = await new_key(app_pool, tenant, workspaces=["mine"])
    async with gateway.http(Authorization=f"Bearer {key}", **{"X-Memento-Workspace": "theirs"}) as http:
        answer = await http.post(
            "/mcp", json=listen_request(6, {"resourcesListChanged": True}), headers=stateless_headers()
        )
    error = answer.json()["error"]
    assert error["code"] == -32602 and "workspace" in error["message"]
    headers = {"Authorization": f"Bearer {key}", "X-Memento-Workspace": "theirs"}
    url = gateway.mcp_url + "?profile=documents"
    async with streamable_session(url, "2025-11-25", headers) as (session, _):
        with pytest.raises(Exception, match="workspace"):
            await session.subscribe_resource("memento://items/doc-anything")
    headers["X-Memento-Workspace"] = "mine"
    async with streamable_session(url, "2025-11-25", headers) as (session, _):
        await session.subscribe_resource("memento://items/doc-anything")  # its own workspace: allowed

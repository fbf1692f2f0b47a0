"""The 2024-11-05 HTTP+SSE transport: `GET /sse` → `endpoint` event → `POST /message` answered 202, the response
arriving on the stream, also when the stream is open on another replica."""

from __future__ import annotations

import json
import secrets
from contextlib import asynccontextmanager

import httpx

from memento_shared import working_memory
from tests.fixtures.waiting import eventually
from tests.gateway.conftest import ACCESS_KEY, initialize
from tests.gateway.sdk import sse_session


@asynccontextmanager
async def raw_stream(http: httpx.AsyncClient, path: str = "/sse"):
    """The open stream's line iterator and the endpoint it announced."""
    async with http.stream("GET", path, headers={"Accept": "text/event-stream"}) as stream:
        assert stream.status_code == 200, await stream.aread()
        lines = stream.aiter_lines()
        assert await anext(lines) == "event: endpoint"
        endpoint = (await anext(lines)).removeprefix("data: ")
        yield lines, endpoint


async def next_message(lines) -> dict:
    async for line in lines:
        if line.startswith("data:"):
            return json.loads(line[5:])
    raise AssertionError("stream ended")


async def test_sdk_sse_client_remembers_and_recalls(gateway, tenant):
    headers = {"Authorization": f"Bearer {ACCESS_KEY}"}
    async with sse_session(gateway.url + "/sse", "2024-11-05", headers) as (session, init):
        assert init.protocol_version == "2024-11-05"
        tools = (await session.list_tools()).tools
        assert "remember" in {t.name for t in tools} and tools[0].annotations is None
        stored = await session.call_tool("remember", {"content": "legacy SSE works", "topic": tenant, "type": "fact"})
        assert not stored.is_error and stored.structured_content is None  # no structured output before 2025-06-18
        found = json.loads((await session.call_tool("recall", {"topic": tenant})).content[0].text)
        assert [f["content"] for f in found["fragments"]] == ["legacy SSE works"]


async def test_endpoint_is_relative_and_the_session_ends_with_the_stream(gateway):
    async with gateway.http() as http:
        async with raw_stream(http) as (lines, endpoint):
            assert endpoint.startswith("/message?sessionId=") and endpoint.endswith("&tenant=default")
            # the session's key carries its tenant (memento_shared.keys): another tenant names no session
            elsewhere = endpoint.replace("&tenant=default", "&tenant=other")
            assert (await http.post(elsewhere, json=initialize("2024-11-05"))).status_code == 404
            accepted = await http.post(endpoint, json=initialize("2024-11-05"))
            assert accepted.status_code == 202
            assert (await next_message(lines))["result"]["protocolVersion"] == "2024-11-05"

        # the stream closed: its session is gone (polled: the server notices the hang-up asynchronously)
        async def session_gone():
            return (await http.post(endpoint, json=initialize())).status_code == 404

        await eventually(session_gone, 10, "the session to end with its stream")


async def test_access_key_in_the_query_and_session_id_authority_for_messages(gateway):
    async with httpx.AsyncClient(base_url=gateway.url, trust_env=False, timeout=10) as anonymous:
        assert (await anonymous.get("/sse")).status_code == 401
        async with raw_stream(anonymous, f"/sse?accessKey={ACCESS_KEY}") as (lines, endpoint):
            # the client could set no header for /sse, so it sends none here either: the session id is enough
            assert (await anonymous.post(endpoint, json=initialize("2024-11-05"))).status_code == 202
            assert "result" in await next_message(lines)
            wrong = await anonymous.post(endpoint, json=initialize(), headers={"Authorization": "Bearer wrong"})
            assert wrong.status_code == 401
        assert (await anonymous.post("/message?sessionId=unknown", json=initialize())).status_code == 404


async def test_bad_messages_are_refused_at_the_post(gateway):
    async with gateway.http() as http:
        async with raw_stream(http) as (lines, endpoint):
            assert (await http.post(endpoint, content=b"{oops")).status_code == 400
            assert (await http.post(endpoint, json=[{"jsonrpc": "2.0", "id": 1, "method": "ping"}])).status_code == 400
            await http.post(endpoint, json=initialize("2025-03-26"))
            assert (await next_message(lines))["result"]["protocolVersion"] == "2025-03-26"
            batch = [{"jsonrpc": "2.0", "id": 2, "method": "ping"}, {"jsonrpc": "2.0", "id": 3, "method": "nope"}]
            assert (await http.post(endpoint, json=batch)).status_code == 202
            answers = {m["id"]: m for m in [await next_message(lines), await next_message(lines)]}
            assert answers[2]["result"] == {} and answers[3]["error"]["code"] == -32601


async def test_answers_reach_a_stream_held_by_another_replica(gateways):
    holder, other = await gateways(), await gateways()
    async with holder.http() as http, other.http() as elsewhere:
        async with raw_stream(http) as (lines, endpoint):
            assert (await elsewhere.post(endpoint, json=initialize("2024-11-05"))).status_code == 202
            assert (await next_message(lines))["result"]["serverInfo"]["name"] == "memento"
            call = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "recall", "arguments": {}}}
            assert (await elsewhere.post(endpoint, json=call)).status_code == 202
            answer = await next_message(lines)
            assert answer["id"] == 9 and answer["result"]["isError"] is False


async def test_working_memory_slides_with_the_open_stream_and_ends_with_it(gateways, redis_client):
    """A legacy session lives as long as its stream, which keeps it alive with keepalives; working memory slides with
    them (no request needed) and is deleted when the stream ends."""
    gateway = await gateways(MEMENTO_SSE_KEEPALIVE_SECONDS="0.2")
    remember = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "remember", "arguments": {"content": "on lexer.py", "topic": "task", "type": "fact",
                                                      "scope": "session"}},
    }  # fmt: skip
    async with gateway.http(**{"X-Memento-Workspace": "wm-" + secrets.token_hex(3)}) as http:
        async with raw_stream(http) as (lines, endpoint):
            await http.post(endpoint, json=initialize("2024-11-05"))
            await next_message(lines)
            await http.post(endpoint, json=remember)
            stored = json.loads((await next_message(lines))["result"]["content"][0]["text"])
            key = working_memory.key("default", stored["sessionId"])
            await redis_client.expire(key, 30)  # as if written long ago in a session still open

            async def slid():
                return await redis_client.ttl(key) > 60

            await eventually(slid, 5, "a keepalive to slide working memory with the session")

        async def dropped():  # the server notices the hang-up asynchronously
            return not await redis_client.exists(key)

        await eventually(dropped, 10, "working memory to go with the stream")

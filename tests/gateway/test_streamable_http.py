"""Streamable HTTP (`POST/GET/DELETE /mcp`) against a real gateway and memory-api: the SDK client end to end, then
the protocol's edges with raw HTTP (status codes, JSON-RPC errors, batches, the GET stream)."""

from __future__ import annotations

import asyncio
import json
import secrets

import httpx
import pytest
import redis.asyncio as aioredis

from memento_shared import working_memory
from tests.gateway.conftest import ACCESS_KEY, initialize


def rpc(method: str, params: dict | None = None, msg_id: int | str | None = 7) -> dict:
    message: dict = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    if msg_id is not None:
        message["id"] = msg_id
    return message


async def test_sdk_client_in_auto_mode_speaks_the_stateless_revision_and_uses_the_tools(gateway, tenant):
    async with gateway.client() as client:
        assert client.protocol_version == "2026-07-28"
        caps = client.server_capabilities
        assert caps.tools is not None and caps.logging is not None and caps.completions is not None
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert tools["remember"].output_schema and tools["remember"].annotations.read_only_hint is False
        topic = "t-" + secrets.token_hex(4)
        stored = await client.call_tool("remember", {"content": "gateways speak MCP", "topic": topic, "type": "fact"})
        assert not stored.is_error and stored.structured_content["created"] is True
        found = await client.call_tool("recall", {"topic": topic})
        assert [f["id"] for f in found.structured_content["fragments"]] == [stored.structured_content["id"]]
        assert (await client.list_resources()).resources == []
        prompts = [p.name for p in (await client.list_prompts()).prompts]
        assert prompts == ["catch_up", "decisions", "changes_since", "document"]


async def test_requests_after_initialize_need_a_live_session(gateway):
    async with gateway.http() as http:
        missing = await http.post("/mcp", json=rpc("tools/list"))
        assert missing.status_code == 400 and missing.json()["error"]["code"] == -32600
        unknown = await http.post("/mcp", json=rpc("tools/list"), headers={"Mcp-Session-Id": "nope"})
        assert unknown.status_code == 404
        session = await gateway.session(http)
        headers = {"Mcp-Session-Id": session}
        assert (await http.post("/mcp", json=rpc("ping"), headers=headers)).json()["result"] == {}
        assert (await http.delete("/mcp", headers=headers)).status_code == 200
        ended = await http.post("/mcp", json=rpc("ping"), headers=headers)
        assert ended.status_code == 404 and "initialize again" in ended.json()["error"]["message"]
        assert (await http.delete("/mcp", headers=headers)).status_code == 404


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"])
async def test_every_supported_protocol_version_header_is_accepted(gateway, version):
    async with gateway.http() as http:
        session = await gateway.session(http, version)
        headers = {"Mcp-Session-Id": session, "MCP-Protocol-Version": version}
        assert (await http.post("/mcp", json=rpc("ping"), headers=headers)).status_code == 200


async def test_an_unsupported_protocol_version_header_is_400(gateway):
    async with gateway.http() as http:
        session = await gateway.session(http)
        headers = {"Mcp-Session-Id": session, "MCP-Protocol-Version": "1999-01-01"}
        answer = await http.post("/mcp", json=rpc("ping"), headers=headers)
        assert answer.status_code == 400 and "Unsupported MCP-Protocol-Version" in answer.json()["error"]["message"]
        # 2026-07-28 is the stateless form: a request of it without its _meta is invalid params, session or not
        headers["MCP-Protocol-Version"] = "2026-07-28"
        answer = await http.post("/mcp", json=rpc("ping"), headers=headers)
        assert answer.status_code == 400 and answer.json()["error"]["code"] == -32602


async def test_initialize_negotiates_the_clients_version_or_the_newest(gateway):
    async with gateway.http() as http:
        for offered, agreed in [
            ("2024-11-05", "2024-11-05"),
            ("2025-03-26", "2025-03-26"),
            ("2030-01-01", "2025-11-25"),
        ]:
            answer = (await http.post("/mcp", json=initialize(offered))).json()["result"]
            assert answer["protocolVersion"] == agreed
            assert answer["serverInfo"]["name"] == "memento"


async def test_notifications_and_client_responses_get_202(gateway):
    async with gateway.http() as http:
        headers = {"Mcp-Session-Id": await gateway.session(http)}
        note = rpc("notifications/roots/list_changed", msg_id=None)
        assert (await http.post("/mcp", json=note, headers=headers)).status_code == 202
        response = {"jsonrpc": "2.0", "id": "server-1", "result": {}}
        assert (await http.post("/mcp", json=response, headers=headers)).status_code == 202


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (b"{not json", 400, -32700),
        (b"[1, 2", 400, -32700),
        (b'"just a string"', 400, -32600),
        (b'{"id": 1, "method": "ping"}', 400, -32600),
        (b'{"jsonrpc": "2.0", "id": 1, "method": 5}', 400, -32600),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1]}', 400, -32600),
        (b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}', 400, -32600),
    ],
)
async def test_malformed_messages_are_json_rpc_errors(gateway, body, status, code):
    async with gateway.http() as http:
        headers = {"Mcp-Session-Id": await gateway.session(http)}
        answer = await http.post("/mcp", content=body, headers=headers)
        assert answer.status_code == status and answer.json()["error"]["code"] == code


async def test_unknown_methods_tools_and_bad_params(gateway):
    async with gateway.http() as http:
        headers = {"Mcp-Session-Id": await gateway.session(http)}

        async def error_of(message):
            answer = await http.post("/mcp", json=message, headers=headers)
            assert answer.status_code == 200
            return answer.json()["error"]

        assert (await error_of(rpc("no/such_method", {})))["code"] == -32601
        assert (await error_of(rpc("completion/complete", {})))["code"] == -32602
        assert (await error_of(rpc("tools/call", {"name": "no_such_tool"})))["code"] == -32602
        assert (await error_of(rpc("tools/call", {"name": "recall", "arguments": [1]})))["code"] == -32602
        assert (await error_of(rpc("logging/setLevel", {"level": "loud"})))["code"] == -32602
        assert (await error_of(rpc("resources/read", {"uri": "memento://items/1"})))["code"] == -32002
        bad = await http.post("/mcp", json=rpc("tools/call", {"name": "remember", "arguments": {}}), headers=headers)
        result = bad.json()["result"]
        assert result["isError"] and json.loads(result["content"][0]["text"])["error"]["field"] == "content"


async def test_accept_decides_json_or_sse_and_nothing_acceptable_is_406(gateway):
    async with gateway.http() as http:
        sse_only = await http.post("/mcp", json=initialize(), headers={"Accept": "text/event-stream"})
        assert sse_only.headers["content-type"].startswith("text/event-stream")
        assert '"protocolVersion":"2025-11-25"' in sse_only.text and sse_only.headers["mcp-session-id"]
        refused = await http.post("/mcp", json=initialize(), headers={"Accept": "application/xml"})
        assert refused.status_code == 406


async def test_batches_only_on_2025_03_26_sessions(gateway):
    async with gateway.http() as http:
        headers = {"Mcp-Session-Id": await gateway.session(http, "2025-03-26")}
        batch = [rpc("ping", msg_id=1), rpc("notifications/initialized", msg_id=None), rpc("tools/list", msg_id=2)]
        answers = (await http.post("/mcp", json=batch, headers=headers)).json()
        assert sorted(a["id"] for a in answers) == [1, 2] and all("result" in a for a in answers)
        mixed = (await http.post("/mcp", json=[initialize(msg_id=3), {"jsonrpc": "1.0"}], headers=headers)).json()
        assert [a["error"]["code"] for a in mixed] == [-32600, -32600]
        notes = [rpc("notifications/initialized", msg_id=None)]
        assert (await http.post("/mcp", json=notes, headers=headers)).status_code == 202
        assert (await http.post("/mcp", json=[], headers=headers)).status_code == 400

        newer = {"Mcp-Session-Id": await gateway.session(http, "2025-06-18")}
        refused = await http.post("/mcp", json=[rpc("ping", msg_id=1)], headers=newer)
        assert refused.status_code == 400 and "batches" in refused.json()["error"]["message"]


async def test_tools_list_shape_follows_the_negotiated_version(gateway):
    async with gateway.http() as http:
        shapes = {}
        for version in ("2024-11-05", "2025-03-26", "2025-06-18"):
            headers = {"Mcp-Session-Id": await gateway.session(http, version)}
            tool = (await http.post("/mcp", json=rpc("tools/list"), headers=headers)).json()["result"]["tools"][0]
            shapes[version] = {k for k in ("annotations", "outputSchema", "title") if k in tool}
        assert shapes == {
            "2024-11-05": set(),
            "2025-03-26": {"annotations"},
            "2025-06-18": {"annotations", "outputSchema", "title"},
        }


async def test_large_json_answers_are_gzipped(gateway):
    async with gateway.http(**{"Accept-Encoding": "gzip"}) as http:
        headers = {"Mcp-Session-Id": await gateway.session(http)}
        answer = await http.post("/mcp", json=rpc("tools/list"), headers=headers)
        assert answer.headers["content-encoding"] == "gzip" and answer.json()["result"]["tools"]


async def test_progress_notifications_then_the_result_on_the_sse_answer(gateway, tenant):
    async with gateway.http() as http:
        headers = {"Mcp-Session-Id": await gateway.session(http)}
        params = {"name": "recall", "arguments": {"topic": "nothing-here"}, "_meta": {"progressToken": "p1"}}
        async with http.stream("POST", "/mcp", json=rpc("tools/call", params), headers=headers) as answer:
            assert answer.headers["content-type"].startswith("text/event-stream")
            events = [json.loads(line[5:]) async for line in answer.aiter_lines() if line.startswith("data:")]
        progress = [e["params"] for e in events if e.get("method") == "notifications/progress"]
        assert [(p["progressToken"], p["progress"], p["total"]) for p in progress] == [("p1", 0, 1), ("p1", 1, 1)]
        assert events[-1]["id"] == 7 and events[-1]["result"]["isError"] is False


async def test_get_opens_one_server_stream_per_session_and_delete_ends_it(gateway):
    async with gateway.http() as http:
        session = await gateway.session(http)
        headers = {"Mcp-Session-Id": session, "Accept": "text/event-stream"}
        assert (await http.get("/mcp", headers={"Accept": "text/event-stream"})).status_code == 400
        assert (await http.get("/mcp", headers={**headers, "Mcp-Session-Id": "nope"})).status_code == 404
        assert (await http.get("/mcp", headers={**headers, "Accept": "application/json"})).status_code == 406
        async with http.stream("GET", "/mcp", headers=headers) as stream:
            assert stream.status_code == 200 and stream.headers["content-type"].startswith("text/event-stream")
            assert (await http.get("/mcp", headers=headers)).status_code == 409
            delivered = await gateway.state.hub.publish(session, {"jsonrpc": "2.0", "method": "notifications/x"})
            assert delivered
            lines = stream.aiter_lines()
            assert await anext(lines) == "event: message"
            assert json.loads((await anext(lines))[5:])["method"] == "notifications/x"
            assert (await http.delete("/mcp", headers={"Mcp-Session-Id": session})).status_code == 200
            rest = [line async for line in lines]  # ends: the DELETE closed it
            assert not any(line.startswith("data:") for line in rest)


async def test_health_counts_sessions_and_streams(gateway):
    async with gateway.http() as http:
        before = (await http.get("/health")).json()["sessions"]["active"]
        await gateway.session(http)
        after = (await http.get("/health")).json()
        assert after["status"] == "ok" and after["sessions"]["active"] >= before + 1


async def test_upstream_down_is_a_clean_tool_error_and_a_log_message(gateways):
    closed = f"http://127.0.0.1:{await _closed_port()}"
    gateway = await gateways(MEMORY_API_URL=closed)
    async with gateway.http() as http:
        headers = {"Mcp-Session-Id": await gateway.session(http)}
        assert (await http.post("/mcp", json=rpc("logging/setLevel", {"level": "info"}), headers=headers)).json()
        call = rpc("tools/call", {"name": "recall", "arguments": {}})
        async with http.stream("POST", "/mcp", json=call, headers=headers) as answer:
            events = [json.loads(line[5:]) async for line in answer.aiter_lines() if line.startswith("data:")]
        log = [e["params"] for e in events if e.get("method") == "notifications/message"]
        assert log == [{"level": "warning", "logger": "memento", "data": {"tool": "recall", "error": "STORAGE_ERROR"}}]
        result = events[-1]["result"]
        assert result["isError"] and json.loads(result["content"][0]["text"])["error"]["code"] == "STORAGE_ERROR"


async def _closed_port() -> int:
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    return port


async def test_unauthorized_requests_get_the_oauth_pointer(gateway):
    async with httpx.AsyncClient(base_url=gateway.url, trust_env=False) as http:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic " + ACCESS_KEY}):
            answer = await http.post("/mcp", json=initialize(), headers=headers)
            assert answer.status_code == 401
            assert (
                f'resource_metadata="{gateway.url}/.well-known/oauth-protected-resource/mcp"'
                in (answer.headers["www-authenticate"])
            )
        by_query = await http.post(f"/mcp?accessKey={ACCESS_KEY}", json=initialize())
        assert by_query.status_code == 200


async def test_working_memory_lives_as_long_as_its_session(gateway, servers):
    """scope "session": the list's expiry slides with the session's on every request, and ending the session
    (DELETE) deletes it (seed 000 §5.2: working memory expires with the session)."""
    redis = aioredis.from_url(servers.valkey.url)
    async with gateway.http(**{"X-Memento-Workspace": "wm-" + secrets.token_hex(3)}) as http:
        session = await gateway.session(http)
        headers = {"Mcp-Session-Id": session}
        params = {
            "name": "remember",
            "arguments": {"content": "editing lexer.py", "topic": "task", "type": "fact", "scope": "session"},
        }
        stored = (await http.post("/mcp", json=rpc("tools/call", params), headers=headers)).json()["result"]
        assert stored["structuredContent"]["sessionId"] == session
        key = working_memory.key("default", session)
        ttl = await redis.ttl(key)
        assert ttl > 60
        await redis.expire(key, 30)  # as if written long ago in a session still in use
        await http.post("/mcp", json=rpc("ping"), headers=headers)
        assert await redis.ttl(key) >= ttl - 5  # slid forward with the session
        context = {"name": "context", "arguments": {}}
        answer = (await http.post("/mcp", json=rpc("tools/call", context), headers=headers)).json()["result"]
        assert [w["content"] for w in answer["structuredContent"]["workingMemory"]] == ["editing lexer.py"]
        assert (await http.delete("/mcp", headers=headers)).status_code == 200
        assert not await redis.exists(key)
    await redis.aclose()


async def test_a_tool_calls_json_answer_says_where_its_time_went_in_memory_api_and_the_gateway(gateway):
    async with gateway.http() as http:
        headers = {"Mcp-Session-Id": await gateway.session(http)}
        answer = await http.post("/mcp", json=rpc("tools/call", {"name": "recall", "arguments": {}}), headers=headers)
        assert answer.status_code == 200 and not answer.json()["result"]["isError"]
        figures = dict(part.split(";dur=") for part in answer.headers["server-timing"].split(", "))
        assert list(figures) == ["embed", "fresh", "pool", "db", "total", "gateway"]  # memory-api's, then its own
        assert float(figures["db"]) > 0 and float(figures["gateway"]) >= float(figures["total"]) > 0
        listed = await http.post("/mcp", json=rpc("tools/list"), headers=headers)
        assert "server-timing" not in listed.headers  # no tool call, nothing of memory-api's to tell

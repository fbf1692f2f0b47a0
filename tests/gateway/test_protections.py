"""Protections at the edge: Host/Origin (DNS rebinding), body size, per-principal rate, open-stream cap, and
profiles that narrow what a session can see and call."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from tests.gateway.conftest import ACCESS_KEY, initialize


async def status_of(gateway, **headers: str) -> int:
    async with gateway.http(**headers) as http:
        return (await http.post("/mcp", json=initialize())).status_code


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"Origin": "http://evil.example.com"}, 403),
        ({"Host": "evil.example.com", "Origin": "http://evil.example.com"}, 403),
        ({"Host": "evil.example.com"}, 403),
        ({"Origin": "null"}, 403),
        ({"Origin": "http://localhost:6274"}, 200),  # the MCP Inspector in a browser on this machine
        ({"Origin": "http://127.0.0.1:9999", "Host": "localhost:1234"}, 200),
        ({}, 200),
    ],
)
async def test_dns_rebinding_protection_on_a_loopback_gateway(gateway, headers, status):
    assert await status_of(gateway, **headers) == status


async def test_allowed_origins_and_hosts_when_listed(gateways):
    listed = await gateways(ALLOWED_ORIGINS="https://app.example.com", MEMENTO_BIND_HOST="0.0.0.0")
    assert await status_of(listed, Origin="https://app.example.com") == 200
    assert await status_of(listed, Origin="http://localhost:6274") == 403
    assert await status_of(listed, Host="memento.internal:8080") == 200  # public bind, no host list: any Host
    hosts = await gateways(MEMENTO_BIND_HOST="0.0.0.0", MEMENTO_ALLOWED_HOSTS="memento.example.com,gw.internal:*")
    assert await status_of(hosts, Host="memento.example.com", Origin="https://anywhere.example") == 200
    assert await status_of(hosts, Host="gw.internal:8443") == 200
    assert await status_of(hosts, Host="other.example.com") == 403


async def test_oversized_bodies_are_413(gateways):
    gateway = await gateways(MEMENTO_MAX_BODY_BYTES="2000")
    async with gateway.http() as http:
        big = initialize()
        big["params"]["clientInfo"]["name"] = "x" * 3000
        assert (await http.post("/mcp", json=big)).status_code == 413

        async def chunks():  # no Content-Length: counted as it arrives
            for _ in range(10):
                yield b" " * 500

        assert (await http.post("/mcp", content=chunks())).status_code == 413
        assert (await http.post("/mcp", json=initialize())).status_code == 200


async def test_the_rate_limit_is_per_principal_with_retry_after(gateways):
    gateway = await gateways(MEMENTO_RATE_LIMIT_PER_MINUTE="3")
    other_replica = await gateways(MEMENTO_RATE_LIMIT_PER_MINUTE="3")
    async with gateway.http() as http, other_replica.http() as other:
        session = await gateway.session(http)  # two requests
        headers = {"Mcp-Session-Id": session}
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        assert (await other.post("/mcp", json=ping, headers=headers)).is_success  # the same bucket, in Redis
        limited = await http.post("/mcp", json=ping, headers=headers)
        assert limited.status_code == 429 and 1 <= int(limited.headers["retry-after"]) <= 20


async def test_guessing_credentials_is_slowed_down_per_address(gateway):
    async with httpx.AsyncClient(base_url=gateway.url, trust_env=False) as http:
        statuses = set()
        for attempt in range(62):
            answer = await http.post("/mcp", json=initialize(), headers={"Authorization": f"Bearer guess-{attempt}"})
            statuses.add(answer.status_code)
        assert statuses == {401, 429}


async def test_open_streams_per_principal_are_capped(gateways):
    gateway = await gateways(MEMENTO_MAX_STREAMS_PER_PRINCIPAL="1")
    async with gateway.http() as http:
        async with http.stream("GET", "/sse") as first:
            assert first.status_code == 200
            second = await http.get("/sse")
            assert second.status_code == 429 and second.headers["retry-after"]
        deadline = time.monotonic() + 10
        while True:  # the slot is freed once the server noticed the hang-up
            async with http.stream("GET", "/sse") as again:
                if again.status_code == 200:
                    break
            assert time.monotonic() < deadline, "the stream slot was never released"
            await asyncio.sleep(0.05)


async def test_profiles_narrow_tools_list_and_calls(gateway):
    async with gateway.http() as http:

        async def session_for(profile: str) -> dict[str, str]:
            answer = await http.post(f"/mcp?profile={profile}", json=initialize())
            assert answer.status_code == 200, answer.text
            return {"Mcp-Session-Id": answer.headers["mcp-session-id"]}

        simple = await session_for("simple")
        listed = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, headers=simple)
        names = [t["name"] for t in listed.json()["result"]["tools"]]
        assert names == ["store_memory", "supersede_memory", "search_memories", "list_recent_memories"]
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "recall", "arguments": {}}}
        refused = (await http.post("/mcp", json=call, headers=simple)).json()["error"]
        assert refused["code"] == -32602 and "outside this session's profiles" in refused["message"]
        every = await session_for("all")
        tools = await http.post("/mcp", json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, headers=every)
        assert {"recall", "store_memory"} <= {t["name"] for t in tools.json()["result"]["tools"]}
        assert (await http.post("/mcp?profile=bogus", json=initialize())).status_code == 400


async def test_auth_disabled_means_the_operator_without_a_key(gateways):
    open_gateway = await gateways(MEMENTO_ACCESS_KEY="")
    async with httpx.AsyncClient(base_url=open_gateway.url, trust_env=False, headers={"Accept": "*/*"}) as http:
        assert (await http.post("/mcp", json=initialize())).status_code == 200
    assert ACCESS_KEY  # the other gateways in this module all require it


async def test_browser_clients_on_allowed_origins_get_cors_and_the_session_header(gateways):
    gateway = await gateways(ALLOWED_ORIGINS="https://app.example.com")
    async with httpx.AsyncClient(base_url=gateway.url, trust_env=False) as http:
        preflight = {
            "Origin": "https://app.example.com",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type, mcp-protocol-version",
        }
        allowed = await http.options("/mcp", headers=preflight)
        assert allowed.status_code == 200
        assert allowed.headers["access-control-allow-origin"] == "https://app.example.com"
        refused = await http.options("/mcp", headers={**preflight, "Origin": "https://evil.example.com"})
        assert refused.status_code == 403
    async with gateway.http(Origin="https://app.example.com") as http:
        answer = await http.post("/mcp", json=initialize())
        assert "mcp-session-id" in answer.headers["access-control-expose-headers"].lower()

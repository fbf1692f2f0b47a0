"""Any replica serves any session: state lives in Redis, server-to-client messages travel by pub/sub."""

from __future__ import annotations

import json


async def test_a_session_made_on_one_replica_is_served_by_another(gateways, tenant):
    first, second = await gateways(), await gateways()
    async with first.http() as a, second.http() as b:
        session = await first.session(a)
        headers = {"Mcp-Session-Id": session}
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
        call["params"] = {"name": "remember", "arguments": {"content": "x", "topic": tenant, "type": "fact"}}
        stored = (await b.post("/mcp", json=call, headers=headers)).json()["result"]
        assert stored["structuredContent"]["created"] is True
        assert (await b.delete("/mcp", headers=headers)).status_code == 200
        assert (
            await a.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "ping"}, headers=headers)
        ).status_code == 404


async def test_the_get_stream_hears_messages_published_on_another_replica(gateways):
    holder, other = await gateways(), await gateways()
    async with holder.http() as http:
        session = await holder.session(http)
        headers = {"Mcp-Session-Id": session, "Accept": "text/event-stream"}
        async with http.stream("GET", "/mcp", headers=headers) as stream:
            note = {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": 1}}
            assert await other.state.hub.publish(session, note)
            lines = stream.aiter_lines()
            data = None
            async for line in lines:
                if line.startswith("data:"):
                    data = json.loads(line[5:])
                    break
            assert data == note
            async with other.http() as elsewhere:  # and DELETE on the other replica ends the stream here
                assert (await elsewhere.delete("/mcp", headers={"Mcp-Session-Id": session})).status_code == 200
            assert [line async for line in lines if line.startswith("data:")] == []

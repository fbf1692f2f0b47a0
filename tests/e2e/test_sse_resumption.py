"""Resumable SSE (Streamable HTTP 2025-03-26 to 2025-11-25) through the whole system and a second gateway replica:
a client whose response stream drops mid-progress resumes it with `Last-Event-ID` on the other replica and gets
every event it missed exactly once, then the answer."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from tests.e2e.conftest import ACCESS_KEY, System, another_gateway

pytestmark = pytest.mark.e2e
HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Authorization": f"Bearer {ACCESS_KEY}",
    "MCP-Protocol-Version": "2025-11-25",
}


@pytest.fixture(scope="module")
def replica(system: System) -> Iterator[str]:
    with another_gateway(system) as url:
        yield url + "/mcp"


def open_session(http: httpx.Client, url: str) -> str:
    params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}}
    answer = http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
    session = answer.headers["mcp-session-id"]
    http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers={"Mcp-Session-Id": session})
    return session


def events(lines: Iterator[str]) -> Iterator[tuple[str, dict]]:
    """(event id, message) for each SSE event, as the lines arrive."""
    event_id = None
    for line in lines:
        if line.startswith("id: "):
            event_id = line[4:]
        elif line.startswith("data: "):
            yield event_id, json.loads(line[6:])
            event_id = None


def test_a_stream_dropped_mid_progress_resumes_on_the_other_replica_exactly_once(system, replica):
    with httpx.Client(headers=HEADERS, trust_env=False, timeout=60) as http:
        session = open_session(http, system.mcp_url)
        call = {"name": "memory_consolidate", "arguments": {}, "_meta": {"progressToken": "p1"}}
        body = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}
        with http.stream("POST", system.mcp_url, json=body, headers={"Mcp-Session-Id": session}) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            first_id, first = next(events(response.iter_lines()))
        # the connection is closed here, after the first event: everything after it was never read
        assert first["method"] == "notifications/progress" and first["params"]["progress"] == 0
        stream, number = first_id.rsplit(":", 1)
        assert number == "1"

        resumed_headers = {"Mcp-Session-Id": session, "Last-Event-ID": first_id}
        with http.stream("GET", replica, headers=resumed_headers) as response:
            assert response.status_code == 200
            rest = list(events(response.iter_lines()))

    ids = [event_id for event_id, _ in rest]
    assert ids == [f"{stream}:{n}" for n in range(2, len(rest) + 2)]  # the next ones, in order, none twice
    *progress, (_, answer) = rest
    assert answer["id"] == 2 and answer["result"]["structuredContent"]["success"] is True
    done = [first["params"]["progress"]] + [m["params"]["progress"] for _, m in progress]
    assert done == sorted(set(done)) and done[-1] == 10  # every step once, increasing, up to the end


def test_a_last_event_id_reaches_only_its_own_sessions_streams(system, replica):
    with httpx.Client(headers=HEADERS, trust_env=False, timeout=60) as http:
        owner, other = open_session(http, system.mcp_url), open_session(http, system.mcp_url)
        call = {"name": "recall", "arguments": {"topic": "e2e-resume"}, "_meta": {"progressToken": "p2"}}
        body = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call}
        with http.stream("POST", system.mcp_url, json=body, headers={"Mcp-Session-Id": owner}) as response:
            received = list(events(response.iter_lines()))
        last_id = received[-1][0]
        assert received[-1][1]["id"] == 3 and last_id
        foreign = http.get(replica, headers={"Mcp-Session-Id": other, "Last-Event-ID": last_id})
        assert foreign.status_code == 404
        unknown = http.get(replica, headers={"Mcp-Session-Id": owner, "Last-Event-ID": "nope:1"})
        assert unknown.status_code == 404
        finished = http.get(replica, headers={"Mcp-Session-Id": owner, "Last-Event-ID": last_id})
        assert finished.status_code == 200 and list(events(iter(finished.text.splitlines()))) == []

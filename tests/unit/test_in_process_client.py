"""The in-process hop the co-hosted gateway uses to reach memory-api (memento_shared.internal_http.InProcessClient):
the same answers as over HTTP, and a caller that gives up never cuts the service's work short."""

from __future__ import annotations

import asyncio

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from memento_gateway.upstream import Upstream
from memento_shared import jsonio
from memento_shared.internal_http import InProcessClient, InternalTimeout, InternalUnreachable
from memento_shared.principal import HEADER, Principal, decode_principal

SECRET = "s" * 32


def app_with(finished: list[str], release: asyncio.Event) -> Starlette:
    async def echo(request: Request) -> Response:
        body = await request.json()
        seen = {"path": request.url.path, "query": request.url.query, "trace": request.headers.get("x-trace")}
        return JSONResponse({"body": body, **seen}, headers={"X-Timing": "db;dur=1"})

    async def slow(request: Request) -> Response:
        await release.wait()
        finished.append("slow")
        return JSONResponse({"done": True})

    async def broken(request: Request) -> Response:
        raise RuntimeError("a bug")

    async def principal(request: Request) -> Response:
        decoded = decode_principal(request.headers[HEADER], SECRET)
        return JSONResponse(
            {"result": {"tenant": decoded.tenant_id, "session": request.headers.get("x-memento-session-id")}}
        )

    routes = [
        Route("/echo", echo, methods=["POST", "GET"]),
        Route("/slow", slow, methods=["POST"]),
        Route("/broken", broken, methods=["POST"]),
        Route("/v1/tools/{name}", principal, methods=["POST"]),
    ]
    return Starlette(routes=routes)


async def test_a_call_gets_status_body_and_headers_as_over_http() -> None:
    client = InProcessClient(app_with([], asyncio.Event()))
    answer = await client.post_json("/echo?x=1", {"a": [1, "ü"]}, {"X-Trace": "abc"})
    assert answer.status == 200
    assert jsonio.loads(answer.content) == {"body": {"a": [1, "ü"]}, "path": "/echo", "query": "x=1", "trace": "abc"}
    assert answer.headers.get("x-timing") == answer.headers.get("X-Timing") == "db;dur=1"  # any case, as aiohttp
    missing = await client.get("/nowhere")
    assert missing.status == 404


async def test_a_caller_that_gives_up_leaves_the_work_to_finish() -> None:
    finished: list[str] = []
    release = asyncio.Event()
    client = InProcessClient(app_with(finished, release))
    with pytest.raises(InternalTimeout):
        await client.post_json("/slow", {}, timeout_s=0.05)
    caller = asyncio.create_task(client.post_json("/slow", {}))
    await asyncio.sleep(0.05)
    caller.cancel()  # a cancelled tool call
    with pytest.raises(asyncio.CancelledError):
        await caller
    assert finished == []
    release.set()
    await client.aclose()  # waits for what is still running
    assert finished == ["slow", "slow"]


async def test_a_service_error_is_a_500_answer_not_an_exception_and_is_logged(caplog) -> None:
    client = InProcessClient(app_with([], asyncio.Event()))
    answer = await client.post_json("/broken", {"secret": "memory content"})
    assert answer.status == 500
    await client.aclose()
    logged = [r for r in caplog.records if r.getMessage() == "internal.unhandled_error"]
    assert [(r.path, r.error_type) for r in logged] == [("/broken", "RuntimeError")]  # as uvicorn would, apart
    assert "memory content" not in caplog.text


async def test_an_answer_cut_short_is_not_taken_for_a_whole_one() -> None:
    async def dies_mid_body(scope, receive, send) -> None:
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b'{"result": {', "more_body": True})
        raise RuntimeError("killed mid-answer")

    client = InProcessClient(dies_mid_body)
    with pytest.raises(InternalUnreachable, match="ClientPayloadError"):  # the gateway says: check before repeating
        await client.post_json("/any", {})


async def test_an_app_that_ends_without_answering_is_unreachable() -> None:
    async def silent(scope, receive, send) -> None:
        await receive()

    client = InProcessClient(silent)
    with pytest.raises(InternalUnreachable):
        await client.post_json("/any", {})


async def test_the_gateway_upstream_signs_the_principal_through_it() -> None:
    upstream = Upstream("", SECRET, timeout_s=5, client=InProcessClient(app_with([], asyncio.Event())))
    body = await upstream.call_tool("remember", {"content": "x"}, Principal(tenant_id="t1", workspace="w"), "sess-1")
    assert body == {"result": {"tenant": "t1", "session": "sess-1"}}

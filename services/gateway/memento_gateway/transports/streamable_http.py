"""MCP Streamable HTTP (2025-03-26 to 2025-11-25): `POST /mcp` answers JSON or an SSE stream, `GET /mcp` opens
the session's server-to-client stream, `DELETE /mcp` ends the session. Sessions live in Redis, so any replica
serves any request; the GET stream hears messages from every replica through the hub. A POST's SSE stream is
resumable: a `GET` with `Last-Event-ID` continues it on any replica (mcp/replay.py).

A POST in the stateless form of 2026-07-28 (its version in the `MCP-Protocol-Version` header or the body's
`_meta`) goes to transports/stateless.py instead; `initialize` still opens a session of an older revision."""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from memento_gateway.auth.authenticator import Caller
from memento_gateway.gateway import Gateway, gateway
from memento_gateway.http import sse, timing
from memento_gateway.http.limits import STREAM_LEASE_S
from memento_gateway.mcp import engine, envelope, profiles, replay, versions
from memento_gateway.mcp.call import Call
from memento_gateway.mcp.jsonrpc import (
    INVALID_REQUEST,
    REQUEST_CANCELLED,
    Message,
    RpcError,
    classify,
    error_response,
    parse_body,
    result_response,
)
from memento_gateway.mcp.methods import initialize_result
from memento_gateway.mcp.sessions import Session
from memento_gateway.transports import common, stateless
from memento_shared import keys
from memento_shared.jsonio import JSONBody
from memento_shared.telemetry.metrics import GATEWAY_STREAMS

log = logging.getLogger(__name__)
TRANSPORT = "streamable-http"
SESSION_HEADER = "mcp-session-id"
BATCH_VERSION = "2025-03-26"  # JSON-RPC batches came with 2025-03-26 and left with 2025-06-18


async def _admitted(request: Request, gw: Gateway) -> tuple[Caller, Session | None] | Response:
    """The caller and the session its request names (None: unknown or expired), read with the rate check in one
    Redis round trip (common.admit); or the response refusing the request."""
    admitted = await common.admit(request, gw, request.headers.get(SESSION_HEADER))
    if isinstance(admitted, Response):
        return admitted
    return common.version_header_problem(request) or admitted


def _session(request: Request, caller: Caller, session: Session | None) -> Session | Response:
    """The request's session if the caller may use it."""
    if not request.headers.get(SESSION_HEADER):
        return common.rpc_error(400, INVALID_REQUEST, "Bad Request: Mcp-Session-Id header is required after initialize")
    if session is None or session.transport != TRANSPORT or not session.owned_by(caller.principal):
        return common.rpc_error(404, INVALID_REQUEST, "Session not found: it ended or expired; initialize again")
    return session


def _reply(answer: Any, json_ok: bool, headers: dict[str, str] | None = None) -> Response:
    if json_ok:
        return JSONBody(answer, headers=headers)
    events = answer if isinstance(answer, list) else [answer]
    body = b"".join(sse.event(a) for a in events)
    return Response(body, media_type=sse.MEDIA_TYPE, headers={**sse.HEADERS, **(headers or {})})


async def post(request: Request) -> Response:
    timing.begin()  # a tool call's answer says where its time went (http/timing.py)
    gw = gateway(request)
    stateless_header = envelope.declared(request.headers)
    # the stateless form names no session: an Mcp-Session-Id it carries is not even read (2026-07-28)
    admitted = await common.admit(request, gw, None if stateless_header else request.headers.get(SESSION_HEADER))
    if isinstance(admitted, Response):
        return admitted
    caller, prefetched = admitted
    json_ok, sse_ok = common.accepts(request)
    if not (json_ok or sse_ok):
        return common.rpc_error(406, INVALID_REQUEST, "Not Acceptable: accept application/json or text/event-stream")
    raw = await common.body(request, gw)
    if isinstance(raw, Response):
        return raw
    try:
        parsed = parse_body(raw)
    except RpcError as exc:
        return common.rpc_failure(400, exc)
    if stateless_header or envelope.carried(parsed):
        return await stateless.post(request, gw, caller, parsed, json_ok, sse_ok)
    problem = common.version_header_problem(request)
    if problem is not None:
        return problem
    try:
        if isinstance(parsed, list):
            return await _batch(request, gw, caller, prefetched, parsed, json_ok)
        message = classify(parsed)
    except RpcError as exc:
        return common.rpc_failure(400, exc)
    if message.kind == "request" and message.method == "initialize":
        return await _initialize(request, gw, caller, message, json_ok)
    session = _session(request, caller, prefetched)
    if isinstance(session, Response):
        return session
    if message.kind != "request":
        await engine.notify(gw, message, session, TRANSPORT)
        return Response(status_code=202)
    call = await _call(request, caller, session)
    if isinstance(call, Response):
        return call
    if not json_ok or (sse_ok and common.wants_stream(message, session)):
        events = replay.EventLog(
            gw.redis, session.principal.tenant_id, session.id, gw.settings.session_ttl_minutes * 60
        )
        return sse.EventStream(common.answer_stream(gw, message, call, TRANSPORT, events=events))
    answer = await engine.answer(gw, message, call, TRANSPORT)
    return JSONBody(
        answer or error_response(message.id, REQUEST_CANCELLED, "Request cancelled"), headers=timing.headers()
    )


async def _call(request: Request, caller: Caller, session: Session) -> Call | Response:
    space = common.workspace(request)
    if isinstance(space, Response):
        return space
    return Call(session, replace(caller.principal, workspace=space, profiles=session.profiles))


async def _initialize(request: Request, gw: Gateway, caller: Caller, message: Message, json_ok: bool) -> Response:
    try:
        chosen = profiles.choose(request.query_params.get("profile"), caller.principal.profiles)
    except profiles.ProfileError as exc:
        return common.rpc_error(exc.status, INVALID_REQUEST, exc.message, message.id)
    version = versions.negotiate(message.params.get("protocolVersion"))
    info = message.params.get("clientInfo")
    session = await gw.sessions.create(
        replace(caller.principal, workspace="default"),
        version,
        chosen,
        client=str(info.get("name", "")) if isinstance(info, dict) else "",
        credential=caller.credential,
        credential_expires_at=caller.expires_at,
    )
    engine.count("initialize", TRANSPORT, version)
    log.info("session.created", extra={"protocol_version": version, "transport": TRANSPORT})
    return _reply(result_response(message.id, initialize_result(version)), json_ok, {"Mcp-Session-Id": session.id})


async def _batch(
    request: Request, gw: Gateway, caller: Caller, prefetched: Session | None, items: list[Any], json_ok: bool
) -> Response:
    if not items:
        return common.rpc_error(400, INVALID_REQUEST, "Invalid Request: empty batch")
    session = _session(request, caller, prefetched)
    if isinstance(session, Response):
        return session
    if session.protocol_version != BATCH_VERSION:
        return common.rpc_error(
            400, INVALID_REQUEST, f"JSON-RPC batches are accepted on {BATCH_VERSION} sessions only, not on "
            f"{session.protocol_version}"
        )  # fmt: skip
    call = await _call(request, caller, session)
    if isinstance(call, Response):
        return call

    async def one(item: Any) -> dict[str, Any] | None:
        try:
            message = classify(item)
        except RpcError as exc:
            return exc.response()
        if message.kind != "request":
            await engine.notify(gw, message, session, TRANSPORT)
            return None
        if message.method == "initialize":
            return error_response(message.id, INVALID_REQUEST, "initialize cannot be part of a batch")
        return await engine.answer(gw, message, call, TRANSPORT)

    answers = [a for a in await asyncio.gather(*(one(item) for item in items)) if a is not None]
    return _reply(answers, json_ok) if answers else Response(status_code=202)


def _stateless_refusal(request: Request) -> Response | None:
    """GET and DELETE belong to sessions; 2026-07-28 has neither (its transport page: 405)."""
    if envelope.declared(request.headers):
        return Response(status_code=405, headers={"Allow": "POST"})
    return None


async def get(request: Request) -> Response:
    gw = gateway(request)
    refused = _stateless_refusal(request)
    if refused is not None:
        return refused
    admitted = await _admitted(request, gw)
    if isinstance(admitted, Response):
        return admitted
    caller, prefetched = admitted
    if not common.accepts(request)[1]:
        return common.rpc_error(406, INVALID_REQUEST, "Not Acceptable: GET /mcp needs Accept: text/event-stream")
    session = _session(request, caller, prefetched)
    if isinstance(session, Response):
        return session
    last_event_id = request.headers.get("last-event-id")
    if last_event_id is not None:
        return await _resume(gw, caller, session, last_event_id)
    stream_id = secrets.token_urlsafe(12)
    if not await gw.streams.claim(caller.identity, stream_id):
        return common.too_many(5, f"at most {gw.settings.max_streams_per_principal} open streams per credential")
    owner = keys.stream_owner(session.principal.tenant_id, session.id)
    if not await gw.redis.set(owner, stream_id, nx=True, ex=STREAM_LEASE_S):
        await gw.streams.release(caller.identity, stream_id)
        return common.rpc_error(409, INVALID_REQUEST, "Conflict: this session already has an open GET stream")
    stream = _server_stream(gw, session, caller.identity, stream_id, owner)
    return sse.EventStream(stream, headers={"Mcp-Session-Id": session.id})


async def _server_stream(
    gw: Gateway, session: Session, identity: str, stream_id: str, owner: str
) -> AsyncIterator[bytes]:
    GATEWAY_STREAMS.labels("mcp").inc()

    async def still_open() -> bool:
        await gw.streams.renew(identity, stream_id)
        await gw.redis.expire(owner, STREAM_LEASE_S)
        return await gw.sessions.touch(session)  # an open stream keeps its session alive

    try:
        async with gw.hub.attach(session.id) as queue:
            async for chunk in sse.relay(queue, gw.settings.sse_keepalive_s, still_open):
                yield chunk
    finally:
        GATEWAY_STREAMS.labels("mcp").dec()
        with anyio.CancelScope(shield=True):  # the client hung up: our cleanup must still reach Redis
            await gw.streams.release(identity, stream_id)
            if await gw.redis.get(owner) == stream_id.encode():
                await gw.redis.delete(owner)


async def _resume(gw: Gateway, caller: Caller, session: Session, last_event_id: str) -> Response:
    """`GET` with `Last-Event-ID`: the rest of the POST response stream that event belongs to, on any replica."""
    where = replay.parse(last_event_id)
    if where is None or not await replay.exists(gw.redis, session.principal.tenant_id, session.id, where[0]):
        return common.rpc_error(404, INVALID_REQUEST, "Last-Event-ID names no stream of this session (or it expired)")
    slot = secrets.token_urlsafe(12)
    if not await gw.streams.claim(caller.identity, slot):
        return common.too_many(5, f"at most {gw.settings.max_streams_per_principal} open streams per credential")
    return sse.EventStream(_resumed(gw, session, caller.identity, slot, *where), headers={"Mcp-Session-Id": session.id})


async def _resumed(
    gw: Gateway, session: Session, identity: str, slot: str, stream: str, after: int
) -> AsyncIterator[bytes]:
    GATEWAY_STREAMS.labels("mcp").inc()
    quiet_since = time.monotonic()
    try:
        async for item in replay.resume(gw.redis, session.principal.tenant_id, session.id, stream, after):
            if item is not None:
                yield sse.event(item[1], event_id=item[0])
            elif time.monotonic() - quiet_since >= gw.settings.sse_keepalive_s:
                await gw.streams.renew(identity, slot)
                if not await gw.sessions.touch(session):
                    return
                yield sse.KEEPALIVE
            else:
                continue
            quiet_since = time.monotonic()
    finally:
        GATEWAY_STREAMS.labels("mcp").dec()
        with anyio.CancelScope(shield=True):  # the client hung up: the slot must still be freed
            await gw.streams.release(identity, slot)


async def delete(request: Request) -> Response:
    gw = gateway(request)
    refused = _stateless_refusal(request)
    if refused is not None:
        return refused
    admitted = await _admitted(request, gw)
    if isinstance(admitted, Response):
        return admitted
    caller, prefetched = admitted
    session = _session(request, caller, prefetched)
    if isinstance(session, Response):
        return session
    await gw.sessions.delete(session)
    await gw.hub.close(session.id)  # ends its GET stream on whichever replica holds it
    log.info("session.ended", extra={"transport": TRANSPORT})
    return Response(status_code=200)


ROUTES = [
    Route("/mcp", post, methods=["POST"]),
    Route("/mcp", get, methods=["GET"]),
    Route("/mcp", delete, methods=["DELETE"]),
]

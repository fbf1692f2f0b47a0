"""The 2024-11-05 HTTP+SSE transport: `GET /sse` opens a session and its stream, whose first event names the
endpoint (`/message?sessionId=…`); `POST /message` answers 202 and the response travels on the stream.

The stream may be open on another replica than the one that gets the POST: answers go through the hub (Redis
pub/sub per session). The session lives as long as its stream.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any
from urllib.parse import urlencode

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from memento_gateway.auth.authenticator import Caller
from memento_gateway.auth.credentials import credential, unauthorized
from memento_gateway.gateway import Gateway, gateway
from memento_gateway.http import sse
from memento_gateway.mcp import engine, profiles, versions
from memento_gateway.mcp.call import Call
from memento_gateway.mcp.jsonrpc import INVALID_REQUEST, Message, RpcError, classify, parse_body, result_response
from memento_gateway.mcp.methods import initialize_result
from memento_gateway.mcp.sessions import Session
from memento_gateway.transports import common
from memento_shared.principal import Principal
from memento_shared.telemetry.metrics import GATEWAY_STREAMS

log = logging.getLogger(__name__)
TRANSPORT = "sse"


async def open_stream(request: Request) -> Response:
    gw = gateway(request)
    caller = await common.authenticate(request, gw)
    if isinstance(caller, Response):
        return caller
    try:
        chosen = profiles.choose(request.query_params.get("profile"), caller.principal.profiles)
    except profiles.ProfileError as exc:
        return JSONResponse({"error": "invalid_request", "error_description": exc.message}, exc.status)
    stream_id = secrets.token_urlsafe(12)
    if not await gw.streams.claim(caller.identity, stream_id):
        return common.too_many(5, f"at most {gw.settings.max_streams_per_principal} open streams per credential")
    session = await gw.sessions.create(
        replace(caller.principal, workspace="default"),
        versions.OLDEST,  # until the client's initialize says otherwise
        chosen,
        transport=TRANSPORT,
        credential=caller.credential,
        credential_expires_at=caller.expires_at,
    )
    log.info("session.created", extra={"transport": TRANSPORT})
    stream = _stream(gw, session, caller.identity, stream_id)
    return sse.EventStream(stream)


async def _stream(gw: Gateway, session: Session, identity: str, stream_id: str) -> AsyncIterator[bytes]:
    GATEWAY_STREAMS.labels("sse").inc()

    async def still_open() -> bool:
        await gw.streams.renew(identity, stream_id)
        return await gw.sessions.touch(session)

    try:
        async with gw.hub.attach(session.id) as queue:  # subscribed before the client learns where to post
            yield sse.event(endpoint(session), "endpoint")
            async for chunk in sse.relay(queue, gw.settings.sse_keepalive_s, still_open):
                yield chunk
    finally:
        GATEWAY_STREAMS.labels("sse").dec()
        with anyio.CancelScope(shield=True):  # runs as the client hangs up
            await gw.streams.release(identity, stream_id)
            await gw.sessions.delete(session)
        log.info("session.ended", extra={"transport": TRANSPORT})


def endpoint(session: Session) -> str:
    """Where the client posts: the session id, and its tenant, which the session's key is found by (it carries the
    tenant as its hash tag: memento_shared.keys). A wrong tenant finds no session, like a wrong id."""
    return f"/message?{urlencode({'sessionId': session.id, 'tenant': session.principal.tenant_id})}"


async def post_message(request: Request) -> Response:
    gw = gateway(request)
    session = await gw.sessions.get(request.query_params.get("sessionId", ""), request.query_params.get("tenant", ""))
    if session is None or session.transport != TRANSPORT:
        return common.rpc_error(404, INVALID_REQUEST, "Session not found: open a new stream at /sse")
    caller = await _caller(request, gw, session)
    if isinstance(caller, Response):
        return caller
    space = common.workspace(request)
    if isinstance(space, Response):
        return space
    raw = await common.body(request, gw)
    if isinstance(raw, Response):
        return raw
    try:
        parsed = parse_body(raw)
        items = parsed if isinstance(parsed, list) else [parsed]
        if not items or (isinstance(parsed, list) and session.protocol_version != "2025-03-26"):
            raise RpcError(INVALID_REQUEST, "Invalid Request: batches are accepted on 2025-03-26 sessions only")
        messages = [classify(item) for item in items]
    except RpcError as exc:
        return common.rpc_failure(400, exc)
    principal = replace(caller.principal, workspace=space, profiles=session.profiles)
    for message in messages:
        session = await _handle(gw, session, message, principal)
    return Response("Accepted", status_code=202)


async def _caller(request: Request, gw: Gateway, session: Session) -> Caller | Response:
    """The sender: by its credential when it sends one (it must be the session's owner), else by the session id,
    which only the stream's owner has seen; a credential the session was opened with must still be valid."""
    token = credential(request)
    if token is not None:
        caller = await common.authenticate(request, gw, token)
        if isinstance(caller, Caller) and not session.owned_by(caller.principal):
            return common.rpc_error(404, INVALID_REQUEST, "Session not found: open a new stream at /sse")
        return caller
    principal = await _still_valid(gw, session)
    if principal is None:
        return unauthorized(gw.edge.resource_metadata_url, "the credential this session was opened with expired")
    return await common.within_rate(gw, Caller(principal, session.credential, session.credential_expires_at))


async def _still_valid(gw: Gateway, session: Session) -> Principal | None:
    if session.credential == "open":
        return session.principal
    if session.credential_expires_at is not None and session.credential_expires_at < time.time():
        return None
    current = await gw.auth.credential_principal(session.principal)
    return session.principal if current is not None else None


async def _handle(gw: Gateway, session: Session, message: Message, principal: Principal) -> Session:
    if message.kind != "request":
        await engine.notify(gw, message, session, TRANSPORT)
        return session
    if message.method == "initialize":
        return await _initialize(gw, session, message)
    call = Call(session, principal, emit=lambda note: _publish(gw, session, note))
    gw.inflight.spawn(_answer(gw, message, call))
    return session


async def _answer(gw: Gateway, message: Message, call: Call) -> None:
    answer = await engine.answer(gw, message, call, TRANSPORT)
    if answer is not None:
        await _publish(gw, call.session, answer)


async def _initialize(gw: Gateway, session: Session, message: Message) -> Session:
    version = versions.negotiate(message.params.get("protocolVersion"))
    info = message.params.get("clientInfo")
    client = str(info.get("name", "")) if isinstance(info, dict) else ""
    session = replace(session, protocol_version=version, client=client)
    await gw.sessions.save(session)
    engine.count("initialize", TRANSPORT, version)
    await _publish(gw, session, result_response(message.id, initialize_result(version)))
    return session


async def _publish(gw: Gateway, session: Session, message: dict[str, Any]) -> None:
    await gw.hub.publish(session.id, message)


ROUTES = [
    Route("/sse", open_stream, methods=["GET"]),
    Route("/message", post_message, methods=["POST"]),
]

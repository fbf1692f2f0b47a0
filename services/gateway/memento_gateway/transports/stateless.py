"""The stateless form of Streamable HTTP (2026-07-28) on `POST /mcp`, beside the session-based one: every request
stands alone with its version, client capabilities and log level in its own `_meta`. No session is made or read,
so any replica answers any request. A request asking for progress or log messages gets an SSE stream of its own;
closing that stream cancels it.

What a session held travels with the request instead: the tool profiles come from `?profile=` and the credential,
the workspace from `X-Memento-Workspace`, the log level from `_meta`, and working memory (`remember` with scope
"session") from the handle the client sends back in `_meta` (envelope.SESSION_KEY); without one, a fresh handle is
minted for the request, which `remember` returns as `sessionId`.
"""

from __future__ import annotations

import logging
import secrets
import time
from dataclasses import replace
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from memento_gateway.auth.authenticator import Caller
from memento_gateway.gateway import Gateway
from memento_gateway.http import sse, timing
from memento_gateway.mcp import engine, envelope, methods, profiles
from memento_gateway.mcp.call import Call
from memento_gateway.mcp.jsonrpc import (
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    REQUEST_CANCELLED,
    RpcError,
    classify,
    error_response,
    result_response,
)
from memento_gateway.mcp.sessions import Session
from memento_gateway.transports import common, listen
from memento_shared.jsonio import JSONBody

log = logging.getLogger(__name__)
TRANSPORT = "streamable-http"  # the metric's label; its version label (2026-07-28) tells the stateless form apart
# besides server/discover and subscriptions/listen; the rest answer 404 + -32601
SERVED = {"tools/list", "tools/call", *methods.FORWARDED, *methods.TASKS}


async def post(request: Request, gw: Gateway, caller: Caller, body: Any, json_ok: bool, sse_ok: bool) -> Response:
    """One stateless POST, its caller already authenticated and within its rate."""
    if isinstance(body, list):
        return common.rpc_error(400, INVALID_REQUEST, "Invalid Request: 2026-07-28 takes one message per POST")
    try:
        message = classify(body)
        if message.kind == "response":
            raise RpcError(INVALID_REQUEST, "Invalid Request: a client sends no responses in 2026-07-28", message.id)
    except RpcError as exc:
        return common.rpc_failure(400, exc)
    if message.kind == "notification":
        return Response(status_code=202)  # the revision defines none over HTTP: accepted and ignored
    try:
        env = envelope.read(message, request.headers)
    except envelope.Rejected as rejected:
        return common.rpc_failure(400, rejected.error)
    if message.method == listen.METHOD:
        return await listen.open_stream(request, gw, caller, message, env, sse_ok)
    if message.method == "server/discover":
        engine.count(message.method, TRANSPORT, env.version)
        return JSONBody(result_response(message.id, envelope.stamp(message.method, methods.discover_result())))
    if message.method not in SERVED:  # initialize, ping, logging/setLevel, resources/subscribe, ... and unknown ones
        engine.count(message.method, TRANSPORT, env.version)
        return common.rpc_error(404, METHOD_NOT_FOUND, f"Method not found: {message.method}", message.id)
    call = await _call(request, gw, caller, env, message.id)
    if isinstance(call, Response):
        return call
    if sse_ok and (not json_ok or common.wants_stream(message, call.session)):
        return sse.EventStream(common.answer_stream(gw, message, call, TRANSPORT, cancel_on_close=True))
    answer = await engine.answer(gw, message, call, TRANSPORT)
    return JSONBody(
        answer or error_response(message.id, REQUEST_CANCELLED, "Request cancelled"), headers=timing.headers()
    )


async def _call(request: Request, gw: Gateway, caller: Caller, env: envelope.Envelope, msg_id: Any) -> Call | Response:
    """The request as a call in a session of its own, which lives no longer than the request."""
    try:
        chosen = profiles.choose(request.query_params.get("profile"), caller.principal.profiles)
    except profiles.ProfileError as exc:
        return common.rpc_error(exc.status, INVALID_REQUEST, exc.message, msg_id)
    space = common.workspace(request)
    if isinstance(space, Response):
        return space
    if env.handle:
        await gw.sessions.slide_working_memory(caller.principal.tenant_id, env.handle)
    session = Session(
        id=env.handle or secrets.token_urlsafe(24),
        principal=caller.principal,
        protocol_version=env.version,
        profiles=chosen,
        created_at=time.time(),
        client=env.client,
        transport="stateless",
        log_level=env.log_level,
        credential=caller.credential,
        credential_expires_at=caller.expires_at,
        client_extensions=env.extensions,
    )
    return Call(session, replace(caller.principal, workspace=space, profiles=chosen))

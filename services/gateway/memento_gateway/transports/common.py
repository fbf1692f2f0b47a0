"""Steps the MCP transports take on every request: authenticate and rate-limit the caller, read the body within
its limit, pick the workspace, check the protocol-version header, answer HTTP-level errors, and stream one
request's answer with its notifications."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from memento_gateway.auth.authenticator import AuthError, Caller
from memento_gateway.auth.credentials import credential, unauthorized
from memento_gateway.gateway import Gateway
from memento_gateway.http import sse
from memento_gateway.http.limits import PayloadTooLarge, read_body
from memento_gateway.mcp import engine, inflight, versions
from memento_gateway.mcp.call import Call
from memento_gateway.mcp.hub import CLOSE
from memento_gateway.mcp.jsonrpc import INVALID_REQUEST, Message, RpcError, error_response
from memento_gateway.mcp.replay import EventLog
from memento_gateway.mcp.sessions import Session, SessionStore
from memento_gateway.upstream import UpstreamUnavailable
from memento_shared.telemetry.metrics import GATEWAY_REJECTIONS

log = logging.getLogger(__name__)
WORKSPACE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
FAILED_AUTH_PER_MINUTE = 60  # per client address: guessing keys is slowed down, not just refused


def rpc_error(
    status: int, code: int, message: str, msg_id: Any = None, headers: dict[str, Any] | None = None
) -> JSONResponse:
    return JSONResponse(error_response(msg_id, code, message), status_code=status, headers=headers)


def rpc_failure(status: int, exc: RpcError) -> JSONResponse:
    return JSONResponse(exc.response(), status_code=status)


def too_many(retry_after: int, what: str = "rate limit exceeded") -> JSONResponse:
    GATEWAY_REJECTIONS.labels("rate_limited").inc()
    return JSONResponse(
        {"error": "rate_limited", "error_description": f"{what}; retry after {retry_after} s"},
        status_code=429,
        headers={"Retry-After": str(retry_after)},
    )


def unavailable() -> JSONResponse:
    return JSONResponse({"error": "unavailable", "error_description": "memory-api is unavailable; retry"}, 503)


async def authenticate(request: Request, gw: Gateway, token: str | None = None) -> Caller | Response:
    """The caller, or the response refusing it (401 with the OAuth pointer, 429, 503)."""
    caller = await _identify(request, gw, token)
    if isinstance(caller, Response):
        return caller
    return await within_rate(gw, caller)


async def admit(request: Request, gw: Gateway, session_id: str | None) -> tuple[Caller, Session | None] | Response:
    """authenticate, and read the session the request names (None: unknown or expired) in the rate check's Redis
    round trip: one round trip instead of two on every call of a session."""
    caller = await _identify(request, gw, None)
    if isinstance(caller, Response):
        return caller
    if not SessionStore.readable(session_id):
        checked = await within_rate(gw, caller)
        return checked if isinstance(checked, Response) else (checked, None)
    async with gw.redis.pipeline(transaction=False) as pipe:
        gw.rate.queue(pipe, caller.identity)
        gw.sessions.queue_get(pipe, session_id, caller.principal.tenant_id)
        results = await pipe.execute()
    wait = gw.rate.waited(results)
    return too_many(wait) if wait else (caller, SessionStore.got(results))


async def _identify(request: Request, gw: Gateway, token: str | None) -> Caller | Response:
    token = credential(request) if token is None else token
    try:
        return await gw.auth.authenticate(token)
    except AuthError as exc:
        client = request.client.host if request.client else "unknown"
        wait = await gw.rate.retry_after(f"ip:{client}", per_minute=FAILED_AUTH_PER_MINUTE)
        if wait:
            return too_many(wait, "too many failed authentications")
        log.info("auth.refused", extra={"reason": "missing" if exc.missing else "invalid"})
        return unauthorized(gw.edge.resource_metadata_url, exc.description, missing=exc.missing)
    except UpstreamUnavailable:
        return unavailable()


async def within_rate(gw: Gateway, caller: Caller) -> Caller | Response:
    wait = await gw.rate.retry_after(caller.identity)
    return too_many(wait) if wait else caller


def version_header_problem(request: Request) -> Response | None:
    version = request.headers.get("mcp-protocol-version")
    if version is None or version in versions.SUPPORTED:
        return None
    supported = ", ".join(versions.SUPPORTED)
    return rpc_error(400, INVALID_REQUEST, f"Unsupported MCP-Protocol-Version {version!r}; supported: {supported}")


def workspace(request: Request) -> str | Response:
    name = request.headers.get("x-memento-workspace", "default")
    if not WORKSPACE.match(name):
        return rpc_error(400, INVALID_REQUEST, "X-Memento-Workspace: 1-64 letters, digits, '_', '.', '-'")
    return name


async def body(request: Request, gw: Gateway) -> bytes | Response:
    """The request's JSON body within the size limit; 415 for a body that does not say it is JSON."""
    media_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media_type != "application/json":
        GATEWAY_REJECTIONS.labels("unsupported_media_type").inc()
        return rpc_error(415, INVALID_REQUEST, "Unsupported Media Type: send Content-Type: application/json")
    try:
        return await read_body(request, gw.settings.max_body_bytes)
    except PayloadTooLarge:
        GATEWAY_REJECTIONS.labels("payload_too_large").inc()
        return rpc_error(413, INVALID_REQUEST, f"request body larger than {gw.settings.max_body_bytes} bytes")


def accepts(request: Request) -> tuple[bool, bool]:
    """(JSON acceptable, SSE acceptable). No Accept header at all accepts both."""
    header = request.headers.get("accept", "").strip()
    if not header:
        return True, True
    kinds = {part.split(";")[0].strip().lower() for part in header.split(",")}
    return bool(kinds & {"application/json", "application/*", "*/*"}), bool(
        kinds & {"text/event-stream", "text/*", "*/*"}
    )


def wants_stream(message: Message, session: Session) -> bool:
    """A tools/call that has something to stream besides its answer: progress, or log messages asked for."""
    if message.method != "tools/call":
        return False
    meta = message.params.get("_meta")
    return (isinstance(meta, dict) and "progressToken" in meta) or session.log_level is not None


async def answer_stream(
    gw: Gateway,
    message: Message,
    call: Call,
    transport: str,
    *,
    cancel_on_close: bool = False,
    events: EventLog | None = None,
) -> AsyncIterator[bytes]:
    """One request's notifications, then its answer, as SSE events. The call runs outside this generator, so a
    client that goes away does not stop it (2025 revisions), and with `events` every event is numbered and kept so
    the client can resume the stream elsewhere (mcp/replay.py). With `cancel_on_close` (2026-07-28, where closing
    the stream is the cancellation) a client that goes away stops the call."""
    queue: asyncio.Queue[tuple[str | None, dict[str, Any]]] = asyncio.Queue()

    async def emit(item: dict[str, Any]) -> None:
        event_id = None
        if events is not None:
            try:
                event_id = await events.append(item)
            except Exception as exc:  # Redis unreachable: the event still goes out, only not resumable
                log.warning("sse.event_not_kept", extra={"error_type": type(exc).__name__})
        await queue.put((event_id, item))

    async def run() -> None:
        answer = await engine.answer(gw, message, replace(call, emit=emit), transport)
        if answer is not None:
            await emit(answer)
            return
        if events is not None:  # cancelled: the stream ends without an answer, here and when resumed
            with contextlib.suppress(Exception):
                await events.end()
        await queue.put((None, CLOSE))

    gw.inflight.spawn(run())
    answered = False
    try:
        while True:
            try:
                async with asyncio.timeout(gw.settings.sse_keepalive_s):
                    event_id, item = await queue.get()
            except TimeoutError:
                yield sse.KEEPALIVE
                continue
            if item == CLOSE:
                return
            answered = item.get("id") == message.id and "method" not in item
            yield sse.event(item, event_id=event_id)
            if answered:
                return
    finally:
        if cancel_on_close and not answered:
            gw.inflight.cancel(inflight.owner(call.session), message.id)

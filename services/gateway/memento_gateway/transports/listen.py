"""`subscriptions/listen` (2026-07-28): a stateless request whose answer is a long-lived SSE stream of the change
notifications its filter asked for, in the tenant and workspace of the request.

The stream opens with `notifications/subscriptions/acknowledged`, naming the part of the filter honored: the resource
list (`resourcesListChanged`) and resource URIs (`resourceSubscriptions`). Tool and prompt lists never change here,
so those are left out. Every message carries the subscription id (the request's JSON-RPC id) in `_meta`. The client
ends it by closing the stream; the gateway ends it gracefully, with the request's result, at shutdown or when the
credential it was opened with expires or is revoked, and abruptly when the client falls too far behind.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import Response

from memento_gateway.auth.authenticator import Caller
from memento_gateway.gateway import Gateway
from memento_gateway.http import sse
from memento_gateway.mcp import engine, envelope
from memento_gateway.mcp.hub import CLOSE
from memento_gateway.mcp.jsonrpc import INVALID_PARAMS, INVALID_REQUEST, Message, error_response, notification
from memento_gateway.mcp.subscriptions import LOST, MAX_URI_CHARS, MAX_URIS
from memento_gateway.transports import common
from memento_gateway.upstream import UpstreamUnavailable
from memento_shared.jsonio import JSONBody
from memento_shared.telemetry.metrics import GATEWAY_STREAMS

log = logging.getLogger(__name__)
SUBSCRIPTION_ID = envelope.PREFIX + "subscriptionId"
METHOD = "subscriptions/listen"
ACKNOWLEDGED = "notifications/subscriptions/acknowledged"
FLAGS = ("toolsListChanged", "promptsListChanged", "resourcesListChanged")


class BadFilter(Exception):
    pass


def honored(params: dict[str, Any]) -> dict[str, Any]:
    """The filter this server keeps of what the request asked for; BadFilter naming a malformed field."""
    wanted = params.get("notifications")
    if not isinstance(wanted, dict):
        raise BadFilter("notifications: must be an object (the subscription filter)")
    for flag in FLAGS:
        if flag in wanted and not isinstance(wanted[flag], bool):
            raise BadFilter(f"notifications.{flag}: must be a boolean")
    uris = wanted.get("resourceSubscriptions", [])
    if not isinstance(uris, list) or not all(isinstance(u, str) and 0 < len(u) <= MAX_URI_CHARS for u in uris):
        raise BadFilter(f"notifications.resourceSubscriptions: a list of URIs of at most {MAX_URI_CHARS} characters")
    if len(uris) > MAX_URIS:
        raise BadFilter(f"notifications.resourceSubscriptions: at most {MAX_URIS} URIs")
    kept: dict[str, Any] = {}
    if wanted.get("resourcesListChanged"):
        kept["resourcesListChanged"] = True
    if uris:
        kept["resourceSubscriptions"] = list(dict.fromkeys(uris))
    return kept


async def open_stream(
    request: Request, gw: Gateway, caller: Caller, message: Message, env: envelope.Envelope, sse_ok: bool
) -> Response:
    engine.count(METHOD, "streamable-http", env.version)
    if not sse_ok:
        return common.rpc_error(406, INVALID_REQUEST, "Not Acceptable: subscriptions/listen answers text/event-stream")
    try:
        kept = honored(message.params)
    except BadFilter as exc:
        return JSONBody(error_response(message.id, INVALID_PARAMS, str(exc)))
    if not caller.principal.has_scope("read"):
        return JSONBody(error_response(message.id, INVALID_PARAMS, "this credential lacks the 'read' scope"))
    space = common.workspace(request)
    if isinstance(space, Response):
        return space
    if not caller.principal.allows_workspace(space):  # memory-api checks a tool call's; this one never reaches it
        return JSONBody(
            error_response(message.id, INVALID_PARAMS, f"workspace: {space!r} is not allowed for this credential")
        )
    slot = secrets.token_urlsafe(12)
    if not await gw.streams.claim(caller.identity, slot):
        return common.too_many(5, f"at most {gw.settings.max_streams_per_principal} open streams per credential")
    return sse.EventStream(_stream(gw, caller, message.id, space, kept, slot))


async def _still_valid(gw: Gateway, caller: Caller) -> bool:
    """The credential the stream was opened with may still be used: not expired, its API key not revoked."""
    if caller.expires_at is not None and caller.expires_at < time.time():
        return False
    try:
        return await gw.auth.credential_principal(caller.principal) is not None
    except UpstreamUnavailable:  # cannot tell now: the next keep-alive asks again
        return True


async def _stream(
    gw: Gateway, caller: Caller, subscription: Any, workspace: str, kept: dict[str, Any], slot: str
) -> AsyncIterator[bytes]:
    GATEWAY_STREAMS.labels("listen").inc()
    meta = {SUBSCRIPTION_ID: subscription}
    uris = frozenset(kept.get("resourceSubscriptions", ()))
    try:
        async with gw.subscriptions.listen(
            caller.principal.tenant_id, workspace, list_changed="resourcesListChanged" in kept, uris=uris
        ) as queue:  # listening before the acknowledgment, so nothing that happens after it is missed
            yield sse.event(notification(ACKNOWLEDGED, {"_meta": meta, "notifications": kept}))
            while True:
                try:
                    async with asyncio.timeout(gw.settings.sse_keepalive_s):
                        item = await queue.get()
                except TimeoutError:
                    if not await _still_valid(gw, caller):
                        item = CLOSE  # its credential expired or was revoked: the client must come back with another
                    else:
                        await gw.streams.renew(caller.identity, slot)
                        yield sse.KEEPALIVE
                        continue
                if item == CLOSE:
                    result = envelope.stamp(METHOD, {"_meta": meta})
                    yield sse.event({"jsonrpc": "2.0", "id": subscription, "result": result})
                    return
                if item == LOST:
                    log.info("listen.fell_behind")
                    return
                params = {**item["params"], "_meta": meta}
                yield sse.event({**item, "params": params})
    finally:
        GATEWAY_STREAMS.labels("listen").dec()
        with anyio.CancelScope(shield=True):  # the client hung up: the slot must still be freed
            await gw.streams.release(caller.identity, slot)

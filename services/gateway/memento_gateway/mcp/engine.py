"""Running one JSON-RPC message whatever the transport: a request becomes its response (or nothing, if the client
cancelled it), a notification is acted on. Requests run as tasks registered in InFlight, so a cancellation
arriving at any replica can stop them."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from opentelemetry import trace

from memento_gateway.mcp import envelope, inflight, methods, versions
from memento_gateway.mcp.call import Call
from memento_gateway.mcp.jsonrpc import INTERNAL_ERROR, Message, RpcError, error_response, result_response
from memento_gateway.mcp.sessions import Session
from memento_shared.telemetry.metrics import MCP_MESSAGES

if TYPE_CHECKING:
    from memento_gateway.gateway import Gateway

log = logging.getLogger(__name__)
tracer = trace.get_tracer("memento.gateway")
KNOWN = {
    "initialize", "server/discover", "ping", "tools/list", "tools/call", "logging/setLevel", *methods.FORWARDED,
    *methods.SUBSCRIBING, "subscriptions/listen", *methods.TASKS,
    "notifications/initialized", "notifications/cancelled", "notifications/progress",
    "notifications/roots/list_changed",
}  # fmt: skip


def count(method: str, transport: str, version: str) -> None:
    """One message served, by its protocol version: 2026-07-28 counts the stateless form."""
    MCP_MESSAGES.labels(method if method in KNOWN else "other", transport, version).inc()


async def answer(gw: Gateway, message: Message, call: Call, transport: str) -> dict[str, Any] | None:
    """The response to a request; None when the client cancelled it meanwhile (it then gets no response). Counted
    once answered."""
    task = gw.inflight.start(inflight.owner(call.session), message.id, _run(gw, message, call))
    try:
        # shielded: a client that goes away is not cancelling (MCP transports); the call finishes regardless
        response = await asyncio.shield(task)
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if task.cancelled() and not (current and current.cancelling()):  # the client's cancel, not our caller's
            return None
        raise
    count(message.method, transport, call.session.protocol_version)
    return response


async def _run(gw: Gateway, message: Message, call: Call) -> dict[str, Any]:
    with tracer.start_as_current_span(
        f"mcp {message.method}", kind=trace.SpanKind.SERVER, attributes={"mcp.method": message.method}
    ):
        try:
            result = await methods.dispatch(message, call, gw)
        except RpcError as exc:
            return error_response(message.id, exc.code, exc.message, exc.data)
        except Exception as exc:  # a bug here must not become a stack trace for the client
            log.exception("mcp.internal_error", extra={"method": message.method, "error_type": type(exc).__name__})
            return error_response(message.id, INTERNAL_ERROR, "internal error")
    if versions.is_stateless(call.session.protocol_version):
        result = envelope.stamp(message.method, result)
    return result_response(message.id, result)


async def notify(gw: Gateway, message: Message, session: Session, transport: str) -> None:
    """Notifications and client responses need no answer; a cancellation stops its request wherever it runs."""
    if message.kind == "notification":
        count(message.method, transport, session.protocol_version)
    if message.method != "notifications/cancelled":
        return
    request_id = message.params.get("requestId")
    if isinstance(request_id, str | int) and not gw.inflight.cancel(inflight.owner(session), request_id):
        await gw.hub.cancel(inflight.owner(session), request_id)

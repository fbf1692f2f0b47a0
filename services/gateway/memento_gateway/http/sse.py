"""Server-sent events: framing, the response headers, and relaying a queue with keep-alives."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from memento_gateway.mcp.hub import CLOSE
from memento_shared import jsonio

MEDIA_TYPE = "text/event-stream"
# no-transform and X-Accel-Buffering keep proxies from buffering or compressing the stream
HEADERS = {"Cache-Control": "no-cache, no-transform", "X-Accel-Buffering": "no"}
KEEPALIVE = b": keepalive\n\n"  # a comment: clients ignore it, idle-closing proxies see traffic


def event(data: Any, name: str = "message", event_id: str | None = None) -> bytes:
    text = data if isinstance(data, str) else jsonio.dumps_str(data)
    head = f"id: {event_id}\n" if event_id else ""
    return f"{head}event: {name}\ndata: {text}\n\n".encode()


async def relay(
    queue: asyncio.Queue[dict[str, Any]], keepalive_s: float, still_open: Callable[[], Awaitable[bool]]
) -> AsyncIterator[bytes]:
    """Every queued message as an event until CLOSE; between messages a keep-alive, unless `still_open` says no."""
    while True:
        try:
            async with asyncio.timeout(keepalive_s):
                item = await queue.get()
        except TimeoutError:
            if not await still_open():
                return
            yield KEEPALIVE
            continue
        if item == CLOSE:
            return
        yield event(item)


class EventStream(StreamingResponse):
    """A streaming response that notices at once when the client hangs up.

    Starlette's own, under ASGI 2.4 servers, only finds out at its next write; an idle SSE stream would keep its
    session, its stream slot and its subscription for a whole keep-alive period after the client left.
    """

    def __init__(self, content: AsyncIterator[bytes], headers: dict[str, str] | None = None) -> None:
        super().__init__(content, media_type=MEDIA_TYPE, headers={**HEADERS, **(headers or {})})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async with anyio.create_task_group() as group:

            async def stream() -> None:
                try:
                    await self.stream_response(send)
                except OSError:
                    pass  # the client went away mid-write
                group.cancel_scope.cancel()

            group.start_soon(stream)
            await self.listen_for_disconnect(receive)
            group.cancel_scope.cancel()

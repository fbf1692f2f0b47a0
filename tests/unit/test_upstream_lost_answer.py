"""A task start whose answer memory-api never sent (found by the type checker: the error body lacked `retryable`,
so the gateway raised TypeError instead of answering). A loopback server reads the request and closes the
connection, as a memory-api killed mid-call does."""

from __future__ import annotations

import asyncio

from memento_gateway.upstream import Upstream
from memento_shared.principal import Principal


async def test_a_task_start_that_lost_its_answer_is_a_retryable_error_saying_to_check_first():
    async def read_then_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.close()

    server = await asyncio.start_server(read_then_close, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    upstream = Upstream(f"http://127.0.0.1:{port}", "s" * 32, timeout_s=5)
    principal = Principal(tenant_id="t", workspace="w")
    try:
        body = await upstream.start_task("remember", {"content": "x"}, principal, None)
    finally:
        await upstream.client.aclose()
        server.close()
        await server.wait_closed()
    assert body["error"]["code"] == "STORAGE_ERROR" and body["error"]["retryable"] is True
    assert "check before repeating" in body["error"]["message"]

"""Tool errors say whether a retry can help, and text no call can ever store is refused as the argument it is."""

from __future__ import annotations

import asyncpg
import pytest

from memento_memory_api.routes.console import _failure
from memento_memory_api.routes.tools import storage_error
from memento_shared.errors import ErrorCode, MementoError, invalid, unavailable
from memento_shared.tools.registry import TOOLS


@pytest.mark.parametrize(
    ("error", "retryable"),
    [
        (MementoError(ErrorCode.RESOURCE_BUSY, "busy"), True),
        (MementoError(ErrorCode.RATE_LIMITED, "slow down"), True),
        (unavailable("the database is unavailable"), True),
        (MementoError(ErrorCode.STORAGE_ERROR, "the database refused the operation"), False),
        (MementoError(ErrorCode.CONFLICT, "already superseded"), False),
        (MementoError(ErrorCode.PAYLOAD_TOO_LARGE, "content: too long", field="content"), False),
        (invalid("limit", "must be at most 20"), False),
    ],
)
def test_every_error_body_says_whether_a_retry_can_succeed(error, retryable):
    body = error.to_body()["error"]
    assert body["retryable"] is retryable and body["code"] == error.code.value


@pytest.mark.parametrize(
    ("tool", "arguments", "field"),
    [
        ("remember", {"content": "a\x00b", "topic": "t", "type": "fact"}, "content"),
        ("remember", {"content": "ok", "topic": "t", "type": "fact", "keywords": ["fine", "bad\x00"]}, "keywords.1"),
        ("link", {"fromId": "frag-1\x00", "toId": "frag-2"}, "fromId"),
        (
            "reflect",
            {"summary": "s", "task_effectiveness": {"overall_success": True, "tool_highlights": ["\ud800"]}},
            "task_effectiveness.tool_highlights.0",
        ),
        ("store_memory", {"content": "lone \udfff surrogate"}, "content"),
        ("search_memories", {"query": "\x00"}, "query"),
    ],
)
def test_nul_and_lone_surrogates_are_invalid_parameters_naming_the_field(tool, arguments, field):
    with pytest.raises(MementoError) as raised:
        TOOLS[tool].parse(arguments)
    assert raised.value.code == ErrorCode.INVALID_PARAMETER and raised.value.field == field


def test_ordinary_unicode_passes():
    args = TOOLS["store_memory"].parse({"content": "사용자는 오스틴으로 이사했다 🎉 \u200f right-to-left"})
    assert args.content.startswith("사용자는")


@pytest.mark.parametrize(
    ("exc", "retryable", "says"),
    [
        (asyncpg.DeadlockDetectedError("deadlock detected"), True, "concurrent"),
        (asyncpg.SerializationError("could not serialize access"), True, "concurrent"),
        (asyncpg.LockNotAvailableError("could not obtain lock"), True, "concurrent"),
        (asyncpg.UniqueViolationError("duplicate key value"), False, "refused"),
        (asyncpg.PostgresConnectionError("connection lost"), True, "unavailable"),
        (OSError("connection refused"), True, "unavailable"),
        (TimeoutError(), True, "unavailable"),
    ],
)
def test_a_database_error_tells_the_client_whether_a_retry_can_pass(exc, retryable, says):
    # a deadlock or serialization failure is another transaction's clash with this one, not an unreachable database
    body = storage_error(exc).to_body()["error"]
    assert (body["code"], body["retryable"]) == ("STORAGE_ERROR", retryable)
    assert says in body["message"] and "nothing was changed" in body["message"]


def test_the_console_tells_database_errors_as_the_tools_do():
    clash = _failure(asyncpg.DeadlockDetectedError("deadlock detected"))
    refused = _failure(asyncpg.UniqueViolationError("duplicate key value"))
    assert clash.status_code == 503 and b"concurrent" in clash.body
    assert refused.status_code == 500 and b"refused" in refused.body
